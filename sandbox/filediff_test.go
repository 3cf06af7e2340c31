package sandbox_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/sandboxtest"
)

// gitFake answers git commands from a table keyed by command prefix.
func gitFake(answers map[string]step) *sandboxtest.FakeHandle {
	h := sandboxtest.NewFakeHandle()
	h.ExecFunc = func(_ context.Context, cmd string, opts sandbox.ExecOptions) (sandbox.ExecResult, error) {
		for prefix, s := range answers {
			if strings.HasPrefix(cmd, prefix) {
				return s.res, s.err
			}
		}
		return sandbox.ExecResult{ExitCode: 127, Stderr: "unexpected " + cmd}, nil
	}
	return h
}

func hookEvent(h sandbox.Handle, typ sandbox.FileEventType, path, sha string, log *slog.Logger) *sandbox.FileContent {
	return sandbox.NewFileContent(h, "/workspace", sha, sandbox.WatchEvent{Type: typ, Path: path, Timestamp: time.Now()}, log)
}

func TestItem24ExactGitCommands(t *testing.T) {
	h := gitFake(map[string]step{"git show": exit(128, ""), "git diff": ok("PATCH")})
	e := hookEvent(h, sandbox.FileChange, "/workspace/src/a.ts", "sha1", nil)
	if got := e.Before(context.Background()); got != "" {
		t.Fatalf("before %q", got)
	}
	e2 := hookEvent(h, sandbox.FileChange, "/workspace/a.ts", "sha1", nil)
	if got := e2.Diff(context.Background()); got != "PATCH" {
		t.Fatalf("diff %q", got)
	}
	want := []string{"git show 'sha1':'src/a.ts'", "git diff 'sha1' -- 'a.ts'"}
	if got := h.Execs(); !slices.Equal(got, want) {
		t.Fatalf("execs %q, want %q", got, want)
	}
	h2 := gitFake(map[string]step{"git show": ok("old\n")})
	if got := hookEvent(h2, sandbox.FileChange, "/workspace/a.ts", "sha1", nil).Before(context.Background()); got != "old\n" {
		t.Fatalf("before %q", got)
	}
}

func TestItem25After(t *testing.T) {
	h := sandboxtest.NewFakeHandle()
	h.SetFile("/workspace/a.ts", "content")
	ctx := context.Background()
	if got := hookEvent(h, sandbox.FileChange, "/workspace/a.ts", "", nil).After(ctx); got != "content" {
		t.Fatalf("after %q", got)
	}
	calls := h.FSCalls()
	if got := hookEvent(h, sandbox.FileDelete, "/workspace/a.ts", "", nil).After(ctx); got != "" || h.FSCalls() != calls {
		t.Fatalf("delete after %q, fs calls %d", got, h.FSCalls()-calls)
	}
	log, rec := sandboxtest.NewLogger()
	if got := hookEvent(h, sandbox.FileChange, "/workspace/missing", "", log).After(ctx); got != "" {
		t.Fatalf("after %q", got)
	}
	if w := rec.Find(slog.LevelWarn, "after()"); len(w) != 1 || w[0].Category != "errors" {
		t.Fatalf("logs %+v", rec.Records())
	}
}

func TestItem26NoBaselineSynthesizes(t *testing.T) {
	h := sandboxtest.NewFakeHandle()
	h.SetFile("/workspace/empty.ts", "")
	h.SetFile("/workspace/b.ts", "x\n")
	ctx := context.Background()
	if got := hookEvent(h, sandbox.FileCreate, "/workspace/empty.ts", "", nil).Diff(ctx); got != "diff --git a/empty.ts b/empty.ts\nnew file mode 100644\n" {
		t.Fatalf("empty %q", got)
	}
	if got := hookEvent(h, sandbox.FileChange, "/workspace/b.ts", "", nil).Diff(ctx); !strings.Contains(got, "+x\n") {
		t.Fatalf("change %q", got)
	}
	if got := hookEvent(h, sandbox.FileDelete, "/workspace/b.ts", "", nil).Diff(ctx); got != "" {
		t.Fatalf("delete %q", got)
	}
	if len(h.Execs()) != 0 {
		t.Fatalf("execs %v", h.Execs())
	}
}

func TestItem27SynthesizedPatchFormat(t *testing.T) {
	got := sandbox.SynthesizeAddPatch("a.txt", "a\nb\nc")
	want := "diff --git a/a.txt b/a.txt\nnew file mode 100644\n--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1,3 @@\n+a\n+b\n+c\n\\ No newline at end of file\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	got = sandbox.SynthesizeAddPatch("t.txt", "one\ntwo\n")
	if !strings.Contains(got, "@@ -0,0 +1,2 @@\n+one\n+two\n") || strings.Contains(got, "No newline") {
		t.Fatalf("got %q", got)
	}
	if got := sandbox.SynthesizeAddPatch("n", "\n"); !strings.HasSuffix(got, "@@ -0,0 +1,1 @@\n+\n") {
		t.Fatalf("got %q", got)
	}
}

func TestItem28UntrackedTrackedIgnored(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		ignoreRC  int
		showRC    int
		wantPatch bool
	}{
		{"untracked", 1, 128, true},
		{"tracked", 1, 0, false},
		{"ignored", 0, 128, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := gitFake(map[string]step{"git diff": ok(""), "git check-ignore": exit(tc.ignoreRC, ""), "git show": exit(tc.showRC, "")})
			h.SetFile("/workspace/n.ts", "hi\n")
			for _, typ := range []sandbox.FileEventType{sandbox.FileCreate, sandbox.FileChange} {
				got := hookEvent(h, typ, "/workspace/n.ts", "sha1", nil).Diff(ctx)
				if tc.wantPatch != strings.Contains(got, "--- /dev/null") || (!tc.wantPatch && got != "") {
					t.Fatalf("%s: diff %q", typ, got)
				}
			}
		})
	}
}

func TestItem29FailuresLogged(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, answers map[string]step, wantPatch bool, warn string) {
		t.Helper()
		h := gitFake(answers)
		h.SetFile("/workspace/n.ts", "hi\n")
		log, rec := sandboxtest.NewLogger()
		got := hookEvent(h, sandbox.FileChange, "/workspace/n.ts", "sha1", log).Diff(ctx)
		if wantPatch != strings.Contains(got, "--- /dev/null") || (!wantPatch && got != "") {
			t.Fatalf("diff %q", got)
		}
		if w := rec.Find(slog.LevelWarn, warn); len(w) != 1 || w[0].Category != "errors" {
			t.Fatalf("want warn %q: %+v", warn, rec.Records())
		}
	}
	t.Run("probe throws", func(t *testing.T) {
		check(t, map[string]step{"git diff": ok(""), "git check-ignore": exit(1, ""), "git show": throw("x")}, false, "tracked-ness")
	})
	t.Run("check-ignore throws", func(t *testing.T) {
		check(t, map[string]step{"git diff": ok(""), "git check-ignore": throw("x"), "git show": exit(128, "")}, true, "check-ignore")
	})
	t.Run("check-ignore 128", func(t *testing.T) {
		check(t, map[string]step{"git diff": ok(""), "git check-ignore": exit(128, ""), "git show": exit(128, "")}, true, "check-ignore")
	})
	t.Run("git diff non-zero", func(t *testing.T) {
		check(t, map[string]step{"git diff": exit(129, "")}, false, "git diff")
	})
	t.Run("git diff throws", func(t *testing.T) {
		check(t, map[string]step{"git diff": throw("x")}, false, "git diff")
	})
}

func TestItem30PathOnlyHookIsFree(t *testing.T) {
	h := sandboxtest.NewFakeHandle()
	h.SetFile("/workspace/a", "x")
	var seen []string
	d := sandbox.NewDispatcher(context.Background(), sandbox.DispatcherOptions{Hooks: sandbox.Hooks{
		OnFile: func(_ context.Context, e chat.FileEvent) error {
			seen = append(seen, string(e.Type)+" "+e.Path)
			return nil
		},
		OnFileCreate: func(_ context.Context, e chat.FileEvent) error {
			seen = append(seen, "typed "+e.Path)
			return nil
		},
	}})
	d.Dispatch(hookEvent(h, sandbox.FileCreate, "/workspace/a", "sha1", nil))
	d.Close()
	if !slices.Equal(seen, []string{"create /workspace/a", "typed /workspace/a"}) {
		t.Fatalf("seen %v", seen)
	}
	if len(h.Execs()) != 0 || h.FSCalls() != 0 {
		t.Fatalf("execs %v fs calls %d", h.Execs(), h.FSCalls())
	}
}

func TestItem35BaselineLogging(t *testing.T) {
	ctx := context.Background()
	h := gitFake(map[string]step{"git rev-parse HEAD": exit(128, "")})
	log, rec := sandboxtest.NewLogger()
	if got := sandbox.Baseline(ctx, h, "/workspace", log); got != "" {
		t.Fatal(got)
	}
	if len(rec.Find(slog.LevelDebug, "baseline unavailable")) != 1 || rec.Count(slog.LevelWarn) != 0 {
		t.Fatalf("logs %+v", rec.Records())
	}
	h = gitFake(map[string]step{"git rev-parse HEAD": throw("x")})
	log, rec = sandboxtest.NewLogger()
	sandbox.Baseline(ctx, h, "/workspace", log)
	if w := rec.Find(slog.LevelWarn, "baseline"); len(w) != 1 || w[0].Category != "errors" {
		t.Fatalf("logs %+v", rec.Records())
	}
	h = gitFake(map[string]step{"git rev-parse HEAD": ok("abc123\n")})
	if got := sandbox.Baseline(ctx, h, "/workspace", nil); got != "abc123" {
		t.Fatal(got)
	}
}

// fakeRuntime records what the dispatcher emits.
type fakeRuntime struct {
	emitted []string
	diffs   []string
	block   chan struct{}
}

func (r *fakeRuntime) Emit(_ context.Context, e chat.FileEvent) {
	r.emitted = append(r.emitted, string(e.Type)+" "+e.Path)
}

func (r *fakeRuntime) EmitFileDiff(_ context.Context, path, diff string) {
	if r.block != nil {
		<-r.block
	}
	r.diffs = append(r.diffs, path+"="+diff)
}

// Item 31 (sandbox-scoped half): events for a workspace rooted at /repo
// reach OnFileCreate and the runtime with the path. The WithSandbox wiring
// itself is the chat engine's.
func TestItem31DispatchToHookAndRuntime(t *testing.T) {
	h := sandboxtest.NewFakeHandle()
	h.Caps.NativeWatch = true
	rt := &fakeRuntime{}
	created := make(chan string, 1)
	d := sandbox.NewDispatcher(context.Background(), sandbox.DispatcherOptions{
		Runtime: rt,
		Hooks: sandbox.Hooks{OnFileCreate: func(_ context.Context, e chat.FileEvent) error {
			created <- e.Path
			return nil
		}},
	})
	w, err := sandbox.WatchWorkspace(context.Background(), h, sandbox.WatchOptions{Root: "/repo", Coalesce: -1, OnEvent: func(ev sandbox.WatchEvent) {
		d.Dispatch(sandbox.NewFileContent(h, "/repo", "", ev, nil))
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.SetFile("/repo/new.ts", "x")
	h.Emit(raw(sandbox.RawCreate, "/repo/new.ts"))
	select {
	case p := <-created:
		if p != "/repo/new.ts" {
			t.Fatal(p)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no create hook")
	}
	w.Stop()
	d.Close()
	if !slices.Equal(rt.emitted, []string{"create /repo/new.ts"}) {
		t.Fatalf("emitted %v", rt.emitted)
	}
}

// Item 32 (dispatcher half): diffs are emitted only when asked, including
// an empty one, and after the matching Emit.
func TestItem32DiffEmission(t *testing.T) {
	h := gitFake(map[string]step{"git diff": ok("PATCH")})
	for _, diff := range []bool{false, true} {
		rt := &fakeRuntime{}
		d := sandbox.NewDispatcher(context.Background(), sandbox.DispatcherOptions{Runtime: rt, Diff: diff})
		d.Dispatch(hookEvent(h, sandbox.FileChange, "/workspace/a", "sha1", nil))
		d.Close()
		want := []string(nil)
		if diff {
			want = []string{"/workspace/a=PATCH"}
		}
		if !slices.Equal(rt.diffs, want) || len(rt.emitted) != 1 {
			t.Fatalf("diff=%v: diffs %v emitted %v", diff, rt.diffs, rt.emitted)
		}
	}
	if !sandbox.FileEventsOn.Enabled() || sandbox.FileEventsOn.Diff() || sandbox.FileEventsOff.Enabled() || !sandbox.FileEventsWithDiff.Diff() {
		t.Fatal("FileEvents resolution")
	}
	// An empty diff is still emitted.
	h2 := gitFake(map[string]step{"git diff": exit(1, "")})
	rt := &fakeRuntime{}
	d := sandbox.NewDispatcher(context.Background(), sandbox.DispatcherOptions{Runtime: rt, Diff: true})
	d.Dispatch(hookEvent(h2, sandbox.FileChange, "/workspace/a", "sha1", nil))
	d.Close()
	if !slices.Equal(rt.diffs, []string{"/workspace/a="}) {
		t.Fatalf("diffs %v", rt.diffs)
	}
}

// Item 33 (dispatcher half): Close returns only after in-flight diffs have
// been emitted.
func TestItem33CloseWaitsForDiffs(t *testing.T) {
	h := gitFake(map[string]step{"git diff": ok("P")})
	rt := &fakeRuntime{block: make(chan struct{})}
	d := sandbox.NewDispatcher(context.Background(), sandbox.DispatcherOptions{Runtime: rt, Diff: true})
	d.Dispatch(hookEvent(h, sandbox.FileChange, "/workspace/a", "sha1", nil))
	d.Dispatch(hookEvent(h, sandbox.FileChange, "/workspace/b", "sha1", nil))
	closed := make(chan struct{})
	go func() { d.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned with diffs in flight")
	case <-time.After(20 * time.Millisecond):
	}
	close(rt.block)
	<-closed
	if !slices.Equal(rt.diffs, []string{"/workspace/a=P", "/workspace/b=P"}) {
		t.Fatalf("diffs %v", rt.diffs)
	}
}

// Item 34 (sandbox-scoped half): a failing or panicking hook is logged at
// error level with "hook failed" and the next hook still runs.
func TestItem34HookFailureIsolated(t *testing.T) {
	h := sandboxtest.NewFakeHandle()
	log, rec := sandboxtest.NewLogger()
	var ran []string
	d := sandbox.NewDispatcher(context.Background(), sandbox.DispatcherOptions{Logger: log, Hooks: sandbox.Hooks{
		OnFile: func(context.Context, chat.FileEvent) error {
			ran = append(ran, "onFile")
			return errors.New("boom")
		},
		OnFileChange: func(context.Context, chat.FileEvent) error { ran = append(ran, "onFileChange"); panic("bang") },
	}})
	d.Dispatch(hookEvent(h, sandbox.FileChange, "/workspace/a", "", nil))
	d.Dispatch(hookEvent(h, sandbox.FileChange, "/workspace/b", "", nil))
	d.Close()
	if len(ran) != 4 {
		t.Fatalf("ran %v", ran)
	}
	errs := rec.Find(slog.LevelError, "hook failed")
	if len(errs) != 4 || errs[0].Attrs["path"] != "/workspace/a" || errs[0].Attrs["type"] != "change" || errs[0].Category != "errors" {
		t.Fatalf("logs %+v", rec.Records())
	}
}
