package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
}

func writeIn(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The panel diffs against the thread's baseline, not HEAD: what the agent
// committed stays visible, next to what it left uncommitted.
func TestChangedFilesKeepCommittedWork(t *testing.T) {
	a := &agent{dataDir: t.TempDir(), logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	const thread = "thread/../odd id"
	ctx := context.Background()
	if files, err := a.changedFiles(ctx, thread); err != nil || len(files) != 0 {
		t.Fatalf("no workspace yet: %v %v", files, err)
	}
	dir, err := a.workspaceDir(thread)
	if err != nil {
		t.Fatal(err)
	}
	writeIn(t, dir, "old.txt", "one\n")
	writeIn(t, dir, "gone.txt", "bye\n")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-qm", "the user's files")

	a.recordBaseline(thread) // the thread's first run starts here

	writeIn(t, dir, "old.txt", "one\ntwo\n")
	if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	writeIn(t, dir, "src/ü space.txt", "new\n")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-qm", "the agent's work")
	writeIn(t, dir, "notes.txt", "uncommitted\n")
	a.recordBaseline(thread) // a later run keeps the first baseline

	files, err := a.changedFiles(ctx, thread)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Status+" "+f.Path)
	}
	want := "delete /workspace/gone.txt|create /workspace/notes.txt|change /workspace/old.txt|create /workspace/src/ü space.txt"
	if strings.Join(got, "|") != want {
		t.Fatalf("files\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	for _, f := range files {
		if !strings.HasPrefix(f.Diff, "diff --git ") {
			t.Errorf("%s: diff %q", f.Path, f.Diff)
		}
	}
	if !strings.Contains(files[2].Diff, "+two\n") || !strings.Contains(files[0].Diff, "-bye\n") || !strings.Contains(files[3].Diff, "+new\n") {
		t.Errorf("diffs %+v", files)
	}
}

func TestSplitPatch(t *testing.T) {
	patch := "diff --git a/b b b/b b\nindex 1..2 100644\n--- a/b b\n+++ b/b b\n@@ -1 +1 @@\n-x\n+diff --git a/x b/x\n" +
		"diff --git a/old name b/new name\nsimilarity index 90%\nrename from old name\nrename to new name\n" +
		"diff --git \"a/caf\\303\\251\" \"b/caf\\303\\251\"\ndeleted file mode 100644\n--- \"a/caf\\303\\251\"\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n" +
		"diff --git a/a.txt b/a.txt\nnew file mode 100644\n--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+new file mode 1\n"
	var got []string
	for _, f := range splitPatch(patch) {
		got = append(got, f.Status+" "+f.Path+" "+f.Diff[:strings.Index(f.Diff, "\n")])
	}
	want := []string{
		"create /workspace/a.txt diff --git a/a.txt b/a.txt",
		"change /workspace/b b diff --git a/b b b/b b",
		"delete /workspace/café diff --git \"a/caf\\303\\251\" \"b/caf\\303\\251\"",
		"change /workspace/new name diff --git a/old name b/new name",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("files\n got %q\nwant %q", got, want)
	}
}
