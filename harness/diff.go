package harness

import (
	"context"
	"fmt"
	"strings"

	"github.com/goai-sdk/goai/sandbox"
)

// TreeDiff is the whole-tree diff of the workspace at dir against base (the
// session's git baseline): tracked changes as `git diff` prints them, plus
// an add-patch for every untracked file that git does not ignore. With no
// baseline (a repository without commits) every file is an addition. The
// index is never touched. A directory that is not a git work tree has no
// diff: an error.
func TreeDiff(ctx context.Context, h sandbox.Handle, dir, base string) (string, error) {
	var b strings.Builder
	if base != "" {
		res, err := h.Exec(ctx, "git diff --no-color --no-ext-diff "+sandbox.Quote(base), sandbox.ExecOptions{Dir: dir})
		if err != nil {
			return "", fmt.Errorf("git diff: %w", err)
		}
		if res.ExitCode != 0 {
			return "", fmt.Errorf("git diff exited %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
		}
		b.WriteString(res.Stdout)
	}
	res, err := h.Exec(ctx, "git ls-files -z --others --exclude-standard", sandbox.ExecOptions{Dir: dir})
	if err != nil {
		return "", fmt.Errorf("git ls-files: %w", err)
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("git ls-files exited %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	for _, rel := range strings.Split(res.Stdout, "\x00") {
		if rel == "" {
			continue
		}
		data, err := h.FS().ReadFile(ctx, joinPath(dir, rel))
		if err != nil {
			continue // removed since it was listed
		}
		b.WriteString(sandbox.SynthesizeAddPatch(rel, string(data)))
	}
	return b.String(), nil
}
