package sandbox

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goai-sdk/goai/chat"
)

// Baseline captures the session's git baseline: `git rev-parse HEAD` run in
// root. It returns "" when root is not a git repository, has no commits, or
// the command could not run; it never fails.
func Baseline(ctx context.Context, h Handle, root string, logger *slog.Logger) string {
	logger = orDiscard(logger)
	res, err := h.Exec(ctx, "git rev-parse HEAD", ExecOptions{Dir: root})
	if err != nil {
		logWarn(logger, "sandbox git baseline capture failed", "root", root, "error", err)
		return ""
	}
	if res.ExitCode != 0 {
		logDebug(logger, "sandbox git baseline unavailable (non-zero exit)",
			"root", root, "exitCode", res.ExitCode, "stderr", res.Stderr)
		return ""
	}
	sha := strings.TrimSpace(res.Stdout)
	logDebug(logger, "sandbox git baseline captured", "root", root, "sha", sha)
	return sha
}

// FileContent is a watched file's lazy, git-backed content: the
// chat.FileContent behind the chat.FileEvent that sandbox-scoped and
// run-scoped hooks receive (see Event). Nothing is computed until a method
// is called, so a hook that reads only Type and Path starts no process and
// reads no file. The methods never fail: on failure they log and return "".
//
// The accessors keep the values of the context they are given but not its
// cancellation, and each call is bounded by AccessorTimeout instead: a hook
// that runs while its run winds down (an aborted or cancelled run, whose
// context is done) still reads the content it was told about.
type FileContent struct {
	WatchEvent
	handle  Handle
	root    string
	baseSHA string
	logger  *slog.Logger
}

// NewFileContent enriches ev. root is the watch root (a virtual path) in
// which git runs; baseSHA is the value of [Baseline] ("" for none).
func NewFileContent(h Handle, root, baseSHA string, ev WatchEvent, logger *slog.Logger) *FileContent {
	if root == "" {
		root = DefaultRoot
	}
	return &FileContent{WatchEvent: ev, handle: h, root: root, baseSHA: baseSHA, logger: orDiscard(logger)}
}

// AccessorTimeout bounds each call of Before, After and Diff.
const AccessorTimeout = 30 * time.Second

// accessorContext detaches ctx from its cancellation and bounds it by
// AccessorTimeout.
func accessorContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), AccessorTimeout)
}

// Event is the hook event for e: its type, path and time, with e as the
// content behind Before, After and Diff.
func (e *FileContent) Event() chat.FileEvent {
	return chat.FileEvent{Type: string(e.Type), Path: e.Path, Timestamp: e.Timestamp.UnixMilli(), Content: e}
}

// BaseSHA is the session baseline the accessors compare against.
func (e *FileContent) BaseSHA() string { return e.baseSHA }

// Rel is the path relative to the watch root.
func (e *FileContent) Rel() string { return relPath(e.root, e.Path) }

// After returns the file's current content, "" for a delete.
func (e *FileContent) After(ctx context.Context) string {
	if e.Type == FileDelete {
		return ""
	}
	ctx, cancel := accessorContext(ctx)
	defer cancel()
	b, err := e.handle.FS().ReadFile(ctx, e.Path)
	if err != nil {
		logWarn(e.logger, "sandbox after() failed to read file", "path", e.Path, "error", err)
		return ""
	}
	return string(b)
}

func (e *FileContent) showCmd() string {
	return "git show " + Quote(e.baseSHA) + ":" + Quote(e.Rel())
}

// Before returns the file's content at the baseline, "" when there is no
// baseline or the file did not exist there.
func (e *FileContent) Before(ctx context.Context) string {
	if e.baseSHA == "" {
		return ""
	}
	ctx, cancel := accessorContext(ctx)
	defer cancel()
	res, err := e.handle.Exec(ctx, e.showCmd(), ExecOptions{Dir: e.root, MaxOutputBytes: UnlimitedOutput})
	if err != nil {
		logWarn(e.logger, "sandbox before() git show failed", "path", e.Path, "error", err)
		return ""
	}
	if res.ExitCode != 0 {
		logDebug(e.logger, "before() git show non-zero exit", "path", e.Path, "exitCode", res.ExitCode, "stderr", res.Stderr)
		return ""
	}
	return res.Stdout
}

// Diff returns a unified patch of the file against the baseline. With no
// baseline, or for a file that is untracked and not git-ignored, it is a
// synthesized add-patch of After. A git-ignored file diffs as "".
func (e *FileContent) Diff(ctx context.Context) string {
	ctx, cancel := accessorContext(ctx)
	defer cancel()
	rel := e.Rel()
	if e.baseSHA == "" {
		if e.Type == FileDelete {
			return ""
		}
		return SynthesizeAddPatch(rel, e.After(ctx))
	}
	res, err := e.handle.Exec(ctx, "git diff "+Quote(e.baseSHA)+" -- "+Quote(rel), ExecOptions{Dir: e.root, MaxOutputBytes: UnlimitedOutput})
	if err != nil {
		logWarn(e.logger, "sandbox diff() git diff failed", "path", e.Path, "error", err)
		return ""
	}
	if res.ExitCode != 0 {
		logWarn(e.logger, "sandbox diff() git diff non-zero exit", "path", e.Path, "exitCode", res.ExitCode, "stderr", res.Stderr)
		return ""
	}
	if res.Stdout != "" {
		return res.Stdout
	}
	content := e.After(ctx)
	if content == "" {
		return ""
	}
	// The ignore check and the tracked-ness probe are independent: run
	// them together, then read the answers in order.
	var (
		probe    ExecResult
		probeErr error
		wg       sync.WaitGroup
	)
	wg.Go(func() {
		probe, probeErr = e.handle.Exec(ctx, e.showCmd(), ExecOptions{Dir: e.root, MaxOutputBytes: UnlimitedOutput})
	})
	ci, err := e.handle.Exec(ctx, "git check-ignore -q -- "+Quote(rel), ExecOptions{Dir: e.root, MaxOutputBytes: UnlimitedOutput})
	wg.Wait()
	switch {
	case err != nil:
		logWarn(e.logger, "sandbox diff() check-ignore failed", "path", e.Path, "error", err)
	case ci.ExitCode == 0:
		logDebug(e.logger, "sandbox diff() withheld for git-ignored file", "path", e.Path)
		return ""
	case ci.ExitCode != 1:
		logWarn(e.logger, "sandbox diff() check-ignore non-zero exit", "path", e.Path, "exitCode", ci.ExitCode, "stderr", ci.Stderr)
	}
	if probeErr != nil {
		logWarn(e.logger, "sandbox diff() tracked-ness probe failed", "path", e.Path, "error", probeErr)
		return ""
	}
	if probe.ExitCode == 0 {
		return ""
	}
	logDebug(e.logger, "sandbox diff() tracked-ness probe non-zero exit (treating as untracked)", "path", e.Path, "exitCode", probe.ExitCode)
	return SynthesizeAddPatch(rel, content)
}

// SynthesizeAddPatch builds the patch git would print for adding a new file
// rel with the given content (mode 100644, no index line).
func SynthesizeAddPatch(rel, content string) string {
	var b strings.Builder
	b.WriteString("diff --git a/" + rel + " b/" + rel + "\nnew file mode 100644\n")
	if content == "" {
		return b.String()
	}
	body, hadNL := strings.CutSuffix(content, "\n")
	lines := strings.Split(body, "\n")
	b.Grow(len(content) + len(lines) + 64)
	b.WriteString("--- /dev/null\n+++ b/" + rel + "\n@@ -0,0 +1," + strconv.Itoa(len(lines)) + " @@\n")
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteByte('+')
		b.WriteString(l)
	}
	if hadNL {
		b.WriteByte('\n')
	} else {
		b.WriteString("\n\\ No newline at end of file\n")
	}
	return b.String()
}
