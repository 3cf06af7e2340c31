package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goai-sdk/goai/harness"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
)

// The workspace panel (GET /api/workspace) shows what a thread changed
// since its baseline: the commit its workspace was at when the thread's
// first run started. The baseline is kept as a ref in the workspace's
// repository, so a reload after the agent committed its work still shows
// that work, and the commit stays reachable whatever the agent does to its
// branches. The diff is harness.TreeDiff's, the one whole-tree diff against
// a baseline that the harness adapters report too.

// baselineRef names a thread's baseline ref; the thread id is hashed, so
// any id makes a valid ref name and threads sharing a workspace
// (GOAI_WORKSPACE) keep one ref each.
func baselineRef(threadID string) string {
	sum := sha256.Sum256([]byte(threadID))
	return "refs/goai/baseline/" + hex.EncodeToString(sum[:12])
}

// threadWorkspace is the directory of a thread's workspace, "" when the
// thread has none yet.
func (a *agent) threadWorkspace(threadID string) string {
	if a.shared != "" {
		return a.shared
	}
	dir := filepath.Join(a.dataDir, "workspaces", threadDirName(threadID))
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		return ""
	}
	return dir
}

// inWorkspace runs fn with a host handle on dir: git reads the workspace
// where it lives, whatever sandbox the agent's commands run in.
func (a *agent) inWorkspace(ctx context.Context, dir string, fn func(h sandbox.Handle) error) error {
	keep := false
	h, err := local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep, ScrubEnv: secretEnv(), Logger: a.logger}).Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		return err
	}
	defer h.Destroy(context.WithoutCancel(ctx))
	return fn(h)
}

// threadBaseline returns the thread's recorded baseline; without one it
// returns the workspace's HEAD (sandbox.Baseline), recorded as the
// thread's baseline when record is set. "" means no baseline (no commits):
// every file is new.
func (a *agent) threadBaseline(ctx context.Context, h sandbox.Handle, threadID string, record bool) string {
	root, ref := h.WorkspaceRoot(), baselineRef(threadID)
	res, err := h.Exec(ctx, "git rev-parse -q --verify "+sandbox.Quote(ref+"^{commit}"), sandbox.ExecOptions{Dir: root})
	if err == nil && res.ExitCode == 0 {
		return strings.TrimSpace(res.Stdout)
	}
	base := sandbox.Baseline(ctx, h, root, a.logger)
	if base == "" || !record {
		return base
	}
	res, err = h.Exec(ctx, "git update-ref "+sandbox.Quote(ref)+" "+sandbox.Quote(base), sandbox.ExecOptions{Dir: root})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("git update-ref exited %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	if err != nil {
		a.logger.Warn("recording the thread's workspace baseline failed", "threadId", threadID, "error", err)
	}
	return base
}

// recordBaseline records the thread's baseline before its first run; a
// failure is logged, and the panel then diffs against HEAD.
func (a *agent) recordBaseline(threadID string) {
	dir := a.threadWorkspace(threadID)
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := a.inWorkspace(ctx, dir, func(h sandbox.Handle) error {
		a.threadBaseline(ctx, h, threadID, true)
		return nil
	})
	if err != nil {
		a.logger.Warn("reading the thread's workspace failed", "threadId", threadID, "error", err)
	}
}

// changedFiles lists the files of a thread's workspace that differ from
// the thread's baseline, with their diffs. A thread with no workspace yet
// has none.
func (a *agent) changedFiles(ctx context.Context, threadID string) ([]WorkspaceFile, error) {
	dir := a.threadWorkspace(threadID)
	if dir == "" {
		return []WorkspaceFile{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var patch string
	err := a.inWorkspace(ctx, dir, func(h sandbox.Handle) error {
		var err error
		patch, err = harness.TreeDiff(ctx, h, h.WorkspaceRoot(), a.threadBaseline(ctx, h, threadID, false))
		return err
	})
	if err != nil {
		return nil, err
	}
	return splitPatch(patch), nil
}

// splitPatch cuts a whole-tree patch into its files (at most
// maxWorkspaceFiles, each diff cut at maxWorkspaceDiff), sorted by path. A
// renamed file is a change of its new path.
func splitPatch(patch string) []WorkspaceFile {
	files := []WorkspaceFile{}
	for len(patch) > 0 && len(files) < maxWorkspaceFiles {
		// A file's patch starts with "diff --git "; content lines start
		// with ' ', '+' or '-', so the marker cannot occur inside one.
		end := strings.Index(patch, "\ndiff --git ")
		chunk := patch
		if end >= 0 {
			chunk, patch = patch[:end+1], patch[end+1:]
		} else {
			patch = ""
		}
		if f, ok := patchFile(chunk); ok {
			files = append(files, f)
		}
	}
	slices.SortFunc(files, func(x, y WorkspaceFile) int { return strings.Compare(x.Path, y.Path) })
	return files
}

// patchFile reads one file's patch: its path (from the rename lines or
// the "diff --git" header) and whether it creates, changes or deletes.
func patchFile(chunk string) (WorkspaceFile, bool) {
	header, rest, _ := strings.Cut(chunk, "\n")
	names, ok := strings.CutPrefix(header, "diff --git ")
	if !ok {
		return WorkspaceFile{}, false
	}
	// The extended header ends where the hunks (or "---") begin.
	ext := rest
	if i := strings.Index(ext, "\n--- "); i >= 0 {
		ext = ext[:i]
	}
	oldPath, newPath, ok := headerPaths(names)
	if to, found := headerLine(ext, "rename to "); found {
		newPath = to
	}
	if !ok && newPath == "" {
		return WorkspaceFile{}, false
	}
	f := WorkspaceFile{Path: newPath, Status: "change", Diff: chunk}
	switch {
	case strings.HasPrefix(ext, "new file mode ") || strings.Contains(ext, "\nnew file mode "):
		f.Status = "create"
	case strings.HasPrefix(ext, "deleted file mode ") || strings.Contains(ext, "\ndeleted file mode "):
		f.Status, f.Path = "delete", oldPath
	}
	f.Path = "/workspace/" + f.Path
	if len(f.Diff) > maxWorkspaceDiff {
		f.Diff = f.Diff[:maxWorkspaceDiff] + "\n[diff cut at 64 KiB]\n"
	}
	return f, true
}

// headerLine returns the path on the extended-header line starting with
// prefix, unquoted.
func headerLine(ext, prefix string) (string, bool) {
	for line := range strings.SplitSeq(ext, "\n") {
		if p, ok := strings.CutPrefix(line, prefix); ok {
			return unquotePath(p), true
		}
	}
	return "", false
}

// headerPaths splits the two paths of a "diff --git" header and drops
// their "a/" and "b/" prefixes. git quotes a path with special characters
// C-style; an unquoted pair of the same path splits in the middle.
func headerPaths(names string) (oldPath, newPath string, ok bool) {
	if strings.HasPrefix(names, `"`) {
		q, err := strconv.QuotedPrefix(names)
		if err != nil {
			return "", "", false
		}
		oldPath, newPath = unquotePath(q), unquotePath(strings.TrimSpace(names[len(q):]))
	} else {
		n := (len(names) - 1) / 2
		if n <= 0 || names[n] != ' ' {
			return "", "", false
		}
		oldPath, newPath = names[:n], unquotePath(names[n+1:])
	}
	return dropPrefix(oldPath), dropPrefix(newPath), true
}

func unquotePath(p string) string {
	if s, err := strconv.Unquote(p); err == nil && strings.HasPrefix(p, `"`) {
		return s
	}
	return p
}

// dropPrefix removes the one-letter side prefix git puts on header paths
// ("a/", "b/", or diff.mnemonicPrefix's "c/", "i/", "w/", "o/").
func dropPrefix(p string) string {
	if len(p) > 2 && p[1] == '/' && strings.IndexByte("abciwo", p[0]) >= 0 {
		return p[2:]
	}
	return p
}
