package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
	"github.com/goai-sdk/goai/sandbox/sandboxtest"
)

func localHandle(t *testing.T) *local.Handle {
	t.Helper()
	p := local.New(local.Options{BaseDir: t.TempDir()})
	h, err := p.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Destroy(context.Background()) })
	return h.(*local.Handle)
}

// countingHandle wraps a handle, counts Spawn and Exec, and can hide
// writable stdin.
type countingHandle struct {
	sandbox.Handle
	noStdin bool
	spawns  atomic.Int32
	execs   atomic.Int32
}

func (c *countingHandle) Capabilities() sandbox.Capabilities {
	caps := c.Handle.Capabilities()
	if c.noStdin {
		caps.WritableStdin = false
	}
	return caps
}

func (c *countingHandle) Spawn(ctx context.Context, cmd string, o sandbox.ExecOptions) (sandbox.Process, error) {
	c.spawns.Add(1)
	return c.Handle.Spawn(ctx, cmd, o)
}

func (c *countingHandle) Exec(ctx context.Context, cmd string, o sandbox.ExecOptions) (sandbox.ExecResult, error) {
	c.execs.Add(1)
	return c.Handle.Exec(ctx, cmd, o)
}

func read(t *testing.T, h *local.Handle, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.HostDir(), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestItem13SetupSerialAndParallel(t *testing.T) {
	ctx := context.Background()
	for _, noStdin := range []bool{false, true} {
		name := "persistent-shell"
		if noStdin {
			name = "exec-backed" // item 14
		}
		t.Run(name, func(t *testing.T) {
			lh := localHandle(t)
			h := &countingHandle{Handle: lh, noStdin: noStdin}
			// The parallel commands meet: each marks that it started and
			// waits for the other's mark, so they only both succeed when
			// they run at the same time (run one after the other, the first
			// gives up waiting and the step fails).
			meet := func(me, other string) string {
				return "touch ." + me + "; i=0; while [ ! -e ." + other + " ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; test -e ." + other
			}
			p1 := meet("p1", "p2") + " && pwd > p1.txt"
			p2 := meet("p2", "p1") + " && echo $GREETING > p2.txt"
			ws := &sandbox.Workspace{Setup: append(sandbox.Serial("mkdir -p sub && cd sub", "export GREETING=hello", "echo $GREETING > serial.txt"),
				sandbox.Parallel(p1, p2),
				sandbox.SetupStep{Commands: []string{"echo last > last.txt"}})}
			res, err := sandbox.Bootstrap(ctx, h, ws, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"mkdir -p sub && cd sub", "export GREETING=hello", "echo $GREETING > serial.txt",
				p1, p2, "echo last > last.txt"}
			if !slices.Equal(res.RanSetup, want) {
				t.Fatalf("ranSetup %v", res.RanSetup)
			}
			if got := read(t, lh, "sub/serial.txt"); got != "hello\n" {
				t.Fatalf("serial.txt %q", got)
			}
			if got := read(t, lh, "sub/p1.txt"); strings.TrimSpace(got) != filepath.Join(lh.HostDir(), "sub") {
				t.Fatalf("p1 %q", got)
			}
			if got := read(t, lh, "sub/p2.txt"); got != "hello\n" {
				t.Fatalf("p2 %q", got)
			}
			read(t, lh, "sub/last.txt")
			if noStdin && h.spawns.Load() != 0 {
				t.Fatal("exec-backed shell spawned")
			}
			if !noStdin && h.spawns.Load() != 1 {
				t.Fatalf("persistent shell spawns %d", h.spawns.Load())
			}
			_, err = sandbox.Bootstrap(ctx, h, &sandbox.Workspace{Setup: sandbox.Serial("echo out; exit 7")}, nil)
			var se *sandbox.SetupError
			if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), "setup step failed: echo out; exit 7 (exit 7)") || !strings.Contains(se.Output, "out") {
				t.Fatalf("err %v", err)
			}
			_, err = sandbox.Bootstrap(ctx, h, &sandbox.Workspace{Setup: []sandbox.SetupStep{sandbox.Parallel("true", "exit 3", "exit 4")}}, nil)
			if !errors.As(err, &se) || se.ExitCode != 3 {
				t.Fatalf("parallel err %v", err)
			}
		})
	}
}

func TestItem14ExecBackedShellExitCode(t *testing.T) {
	lh := localHandle(t)
	h := &countingHandle{Handle: lh, noStdin: true}
	_, err := sandbox.Bootstrap(context.Background(), h, &sandbox.Workspace{Setup: sandbox.Serial("cd /", "pwd > /dev/null; false")}, nil)
	var se *sandbox.SetupError
	if !errors.As(err, &se) || se.ExitCode != 1 || h.spawns.Load() != 0 {
		t.Fatalf("err %v spawns %d", err, h.spawns.Load())
	}
}

func TestItem15AgentsFile(t *testing.T) {
	ctx := context.Background()
	lh := localHandle(t)
	_, err := sandbox.Bootstrap(ctx, lh, &sandbox.Workspace{Instructions: "Be nice.\n", Scripts: map[string]string{"test": "go test ./...", "build": "go build"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "Be nice.\n\n## Workspace scripts\n\n- build → go build\n- test → go test ./..."
	if got := read(t, lh, "AGENTS.md"); got != want {
		t.Fatalf("AGENTS.md %q", got)
	}
	for _, l := range []string{"CLAUDE.md", "GEMINI.md"} {
		if target, err := os.Readlink(filepath.Join(lh.HostDir(), l)); err != nil || target != "AGENTS.md" {
			t.Fatalf("%s: %q %v", l, target, err)
		}
	}
	// Only scripts: the file still has the section.
	lh2 := localHandle(t)
	sandbox.Bootstrap(ctx, lh2, &sandbox.Workspace{Scripts: map[string]string{"lint": "vet"}}, nil)
	if got := read(t, lh2, "AGENTS.md"); !strings.Contains(got, "## Workspace scripts") {
		t.Fatalf("AGENTS.md %q", got)
	}
	// ln failing: copies are written.
	fh := sandboxtest.NewFakeHandle()
	fh.ExecFunc = func(context.Context, string, sandbox.ExecOptions) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{ExitCode: 1}, nil
	}
	sandbox.Bootstrap(ctx, fh, &sandbox.Workspace{Instructions: "hi"}, nil)
	for _, l := range []string{"CLAUDE.md", "GEMINI.md"} {
		b, err := fh.FS().ReadFile(ctx, "/workspace/"+l)
		if err != nil || string(b) != "hi" {
			t.Fatalf("%s copy %q %v", l, b, err)
		}
	}
	if got := fh.Execs(); !slices.Equal(got, []string{"ln -s 'AGENTS.md' 'CLAUDE.md'", "ln -s 'AGENTS.md' 'GEMINI.md'"}) {
		t.Fatalf("execs %q", got)
	}
}

func TestBootstrapLocalSourceCopiesDirectory(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "d"), 0o755)
	os.WriteFile(filepath.Join(src, "d", "x.sh"), []byte("#!/bin/sh\necho x\n"), 0o755)
	lh := localHandle(t)
	if _, err := sandbox.Bootstrap(context.Background(), lh, &sandbox.Workspace{Source: sandbox.Source{Kind: sandbox.SourceLocal, Path: src}}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := lh.Exec(context.Background(), "./d/x.sh", sandbox.ExecOptions{})
	if err != nil || res.Stdout != "x\n" {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestBootstrapGitCloneChecksExitCode(t *testing.T) {
	lh := localHandle(t)
	_, err := sandbox.Bootstrap(context.Background(), lh, &sandbox.Workspace{Source: sandbox.Source{Kind: sandbox.SourceGit, URL: "file:///nonexistent/repo.git"}}, nil)
	var ce *sandbox.CommandError
	if !errors.As(err, &ce) || ce.ExitCode == 0 {
		t.Fatalf("err %v", err)
	}
	fh := sandboxtest.NewFakeHandle()
	var env map[string]string
	fh.ExecFunc = func(_ context.Context, cmd string, o sandbox.ExecOptions) (sandbox.ExecResult, error) {
		env = o.Env
		return sandbox.ExecResult{}, nil
	}
	err = sandbox.GitClone(context.Background(), fh, "/workspace", sandbox.Source{URL: "https://x/r.git", Auth: &sandbox.GitAuth{Token: "tok123"}})
	cmd := fh.Execs()[0]
	if err != nil || strings.Contains(cmd, "tok123") || env["GIT_ASKPASS_TOKEN"] != "tok123" || !strings.Contains(cmd, "${GIT_ASKPASS_TOKEN}") ||
		!strings.Contains(cmd, "--depth 1 --single-branch -- 'https://x/r.git' .") {
		t.Fatalf("cmd %q env %v err %v", cmd, env, err)
	}
	if err := sandbox.GitClone(context.Background(), fh, "/workspace", sandbox.Source{URL: "--upload-pack=evil"}); err == nil || !strings.Contains(err.Error(), "argument-injection") {
		t.Fatalf("err %v", err)
	}
}
