package local_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
)

// gitRepo makes a repository with one commit and returns its file:// URL.
// It lives under /var/tmp: bubblewrap gives each command a private /tmp.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "goai-origin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", dir},
		{"-C", dir, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(dir, "README"), []byte("hi\n"), 0o644)
	exec.Command("git", "-C", dir, "add", "README").Run()
	exec.Command("git", "-C", dir, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "readme").Run()
	return "file://" + dir
}

func TestItem1EnsureClonesGit(t *testing.T) {
	ctx := context.Background()
	for _, iso := range []local.Isolation{local.IsolationNone, local.IsolationBubblewrap} {
		t.Run(iso.String(), func(t *testing.T) {
			if iso == local.IsolationBubblewrap {
				requireBwrap(t)
			}
			origin := gitRepo(t)
			// The isolated sandbox sees no host path but its own: the
			// origin is bound in read-only, as a clone source must be.
			p := local.New(local.Options{BaseDir: t.TempDir(), Isolation: iso, ReadOnlyBinds: []string{strings.TrimPrefix(origin, "file://")}})
			s, err := sandbox.Define(sandbox.Definition{ID: "repo", Provider: p, Workspace: &sandbox.Workspace{
				Source: sandbox.Source{Kind: sandbox.SourceGit, URL: origin, Ref: "main"},
				Setup:  sandbox.Serial("git log --oneline | wc -l > commits.txt"),
			}})
			if err != nil {
				t.Fatal(err)
			}
			store := &sandbox.MemoryStore{}
			rc := sandbox.RunContext{ThreadID: "t1", RunID: "r1", Store: store}
			h, out, err := s.Ensure(ctx, rc)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Destroy(ctx, rc)
			dir := h.(*local.Handle).HostDir()
			if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil || out != sandbox.OutcomeCreated {
				t.Fatalf("no .git: %v (outcome %s)", err, out)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "commits.txt")); strings.TrimSpace(string(b)) != "1" {
				t.Fatalf("depth-1 clone has %q commits", b)
			}
			rec, _ := store.Get(ctx, s.Key(rc))
			if rec.ProviderSandboxID != h.ID() {
				t.Fatalf("record %+v", rec)
			}
			// Second run resumes the same directory.
			h2, out, err := s.Ensure(ctx, sandbox.RunContext{ThreadID: "t1", RunID: "r2", Store: store})
			if err != nil || out != sandbox.OutcomeResumed || h2.ID() != h.ID() {
				t.Fatalf("second ensure: %v %s %s", err, out, h2.ID())
			}
			// Destroy removes the directory and the record.
			if err := s.Destroy(ctx, rc); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("dir kept: %v", err)
			}
		})
	}
}

func TestEnsureFailedCloneIsAnError(t *testing.T) {
	p := local.New(local.Options{BaseDir: t.TempDir()})
	s, _ := sandbox.Define(sandbox.Definition{ID: "repo", Provider: p, Workspace: &sandbox.Workspace{
		Source: sandbox.Source{Kind: sandbox.SourceGit, URL: "file:///does/not/exist.git"},
	}})
	_, _, err := s.Ensure(context.Background(), sandbox.RunContext{ThreadID: "t"})
	var ce *sandbox.CommandError
	if err == nil || !strings.Contains(err.Error(), "git clone") {
		t.Fatalf("err %v", err)
	}
	_ = ce
	// The half-made sandbox was destroyed.
	ents, _ := os.ReadDir(p.BaseDir())
	if len(ents) != 0 {
		t.Fatalf("leftover sandboxes %v", ents)
	}
}
