package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/sandbox"
)

// These tests drive the real chat engine with a scripted adapter over the
// local-process provider: real git, real inotify.

func TestItem31WatchesWorkspaceRoot(t *testing.T) {
	e := newEnv(t)
	var created lines
	s := e.define(sandbox.Definition{Workspace: gitRepo("/repo"), Hooks: sandbox.Hooks{
		OnFileCreate: func(_ context.Context, ev chat.FileEvent) error { created.add(ev.Path); return nil },
	}})
	var emitted lines
	audit := &chat.Middleware{Name: "audit", Sandbox: chat.SandboxHooks{
		OnFile: func(_ *chat.Context, ev chat.FileEvent) error { emitted.add(ev.Type + " " + ev.Path); return nil },
	}}
	a := acting(func(ctx context.Context, h sandbox.Handle) {
		writeFile(t, ctx, h, "/repo/src/new.ts", "x\n")
		writeFile(t, ctx, h, "/elsewhere/out.txt", "not watched\n") // outside the root
	}, chattest.TextTurn("m", "done", agui.FinishStop))
	evs := mustRun(t, e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}), audit))

	want := []string{"create /repo/src/new.ts"}
	if got := created.get(); !slices.Equal(got, []string{"/repo/src/new.ts"}) {
		t.Errorf("onFileCreate got %q", got)
	}
	if got := emitted.get(); !slices.Equal(creates(got), want) || len(compact(got)) != 1 {
		t.Errorf("runtime emit got %q, want %q", got, want)
	}
	if got := fileEvents(customs(t, evs)); !slices.Equal(creates(got), want) || len(compact(got)) != 1 {
		t.Errorf("stream got %q, want %q", got, want)
	}
}

func TestItem32FileEventsSwitch(t *testing.T) {
	for _, tc := range []struct {
		name          string
		fe            sandbox.FileEvents
		files, diffs  int
		watcherLogged bool
	}{
		{"off", sandbox.FileEventsOff, 0, 0, false},
		{"default", sandbox.FileEventsOn, 1, 0, true},
		{"diff", sandbox.FileEventsWithDiff, 1, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var scoped, runScoped lines
			s := e.define(sandbox.Definition{Workspace: gitRepo("/repo"), FileEvents: tc.fe, Hooks: sandbox.Hooks{
				OnFile: func(_ context.Context, ev chat.FileEvent) error { scoped.add(ev.Path); return nil },
			}})
			audit := &chat.Middleware{Name: "audit", Sandbox: chat.SandboxHooks{
				OnFile: func(_ *chat.Context, ev chat.FileEvent) error { runScoped.add(ev.Path); return nil },
			}}
			a := acting(func(ctx context.Context, h sandbox.Handle) {
				writeFile(t, ctx, h, "/repo/README.md", "new\n")
			}, chattest.TextTurn("m", "done", agui.FinishStop))
			evs := mustRun(t, e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}), audit))

			cs := customs(t, evs)
			var files, diffs []custom
			for _, c := range cs {
				if c.Name == "sandbox.file" {
					files = append(files, c)
				} else {
					diffs = append(diffs, c)
				}
			}
			if got := compact(fileEvents(cs)); len(got) != tc.files || (tc.files > 0 && got[0] != "change /repo/README.md") {
				t.Fatalf("file events %q, want %d change of README.md", got, tc.files)
			}
			if (len(diffs) > 0) != (tc.diffs > 0) {
				t.Fatalf("got %d sandbox.file.diff, want %d", len(diffs), tc.diffs)
			}
			if tc.diffs > 0 {
				checkDiffs(t, cs)
			}
			if n := len(scoped.get()) + len(runScoped.get()); (n > 0) != (tc.files > 0) {
				t.Errorf("hooks fired %d times", n)
			}
			if logged := len(e.rec.Find(slog.LevelDebug, "sandbox watcher started")) > 0; logged != tc.watcherLogged {
				t.Errorf("watcher started logged=%v", logged)
			}
			if tc.diffs == 0 {
				return
			}
			d := diffs[0]
			patch, _ := d.Value["diff"].(string)
			if d.Value["path"] != "/repo/README.md" || !strings.Contains(patch, "diff --git a/README.md b/README.md") ||
				!strings.Contains(patch, "-old") || !strings.Contains(patch, "+new") {
				t.Errorf("diff event %+v", d.Value)
			}
			if d.Index < files[0].Index {
				t.Errorf("sandbox.file.diff at %d before its sandbox.file at %d", d.Index, files[0].Index)
			}
		})
	}
}

func TestItem33TerminalHooksDrainInFlightDiffs(t *testing.T) {
	for _, path := range []string{"finish", "abort", "error"} {
		t.Run(path, func(t *testing.T) {
			e := newEnv(t)
			var hookDone atomic.Bool
			s := e.define(sandbox.Definition{FileEvents: sandbox.FileEventsWithDiff, Hooks: sandbox.Hooks{
				OnFile: func(ctx context.Context, ev chat.FileEvent) error {
					time.Sleep(150 * time.Millisecond) // a slow hook still in flight at the terminal
					_ = ev.Diff(ctx)
					hookDone.Store(true)
					return nil
				},
			}})
			// A middleware after WithSandbox sees the drain complete when
			// its own terminal hook runs.
			var doneAtTerminal atomic.Bool
			after := &chat.Middleware{Name: "after",
				OnFinish: func(*chat.Context, chat.FinishInfo) error { doneAtTerminal.Store(hookDone.Load()); return nil },
				OnAbort:  func(*chat.Context, chat.AbortInfo) error { doneAtTerminal.Store(hookDone.Load()); return nil },
				OnError:  func(*chat.Context, chat.ErrorInfo) error { doneAtTerminal.Store(hookDone.Load()); return nil },
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var dir string
			a := acting(func(c context.Context, h sandbox.Handle) {
				dir = hostDir(h)
				writeFile(t, c, h, "/workspace/late.txt", "late\n")
				if path == "abort" {
					cancel(chat.ErrCancelRequested)
				}
			}, chattest.TextTurn("m", "done", agui.FinishStop))
			if path == "error" {
				// The model fails after its edit.
				a.Turns, a.Err = nil, errors.New("boom")
			}
			evs, err := chattest.CollectContext(ctx, t, e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}), after))
			switch {
			case path == "abort" && !errors.Is(err, chat.ErrAborted):
				t.Fatalf("an aborted run must end with chat.ErrAborted, got %v", err)
			case path == "error" && err == nil, path == "finish" && err != nil:
				t.Fatalf("run error %v", err)
			}
			if !doneAtTerminal.Load() {
				t.Errorf("the %s hook returned before the in-flight hook settled", path)
			}
			cs := customs(t, evs)
			if got := fileEvents(cs); len(got) == 0 || got[0] != "create /workspace/late.txt" || len(compact(got)) > 2 {
				t.Errorf("stream file events %q", got)
			}
			if checkDiffs(t, cs) == 0 {
				t.Error("no sandbox.file.diff on the stream")
			}
			if destroyed := !exists(dir); destroyed != (path == "abort") {
				t.Errorf("destroyed=%v after %s", destroyed, path)
			}
		})
	}
}

func TestItem34HookFailuresAreIsolated(t *testing.T) {
	e := newEnv(t)
	var scoped lines
	s := e.define(sandbox.Definition{Hooks: sandbox.Hooks{
		OnFile: func(context.Context, chat.FileEvent) error {
			scoped.add("onFile")
			return errors.New("hook broke")
		},
		OnFileCreate: func(context.Context, chat.FileEvent) error {
			scoped.add("onFileCreate")
			panic("hook panicked")
		},
	}})
	var got [3]lines
	mk := func(i int, name string, fail func() error) *chat.Middleware {
		return &chat.Middleware{Name: name, Sandbox: chat.SandboxHooks{
			OnFile:       func(*chat.Context, chat.FileEvent) error { got[i].add("onFile"); return fail() },
			OnFileCreate: func(*chat.Context, chat.FileEvent) error { got[i].add("onFileCreate"); return nil },
		}}
	}
	mws := []*chat.Middleware{
		sandbox.WithSandbox(s, sandbox.Options{}),
		mk(0, "a", func() error { return errors.New("a failed") }),
		mk(1, "b", func() error { panic("b panicked") }),
		mk(2, "c", func() error { return nil }),
	}
	a := acting(func(ctx context.Context, h sandbox.Handle) {
		writeFile(t, ctx, h, "/workspace/x.txt", "x")
	}, chattest.TextTurn("m", "done", agui.FinishStop))
	evs := mustRun(t, e.opts(a, mws...))
	if chattest.LastIndex(evs, agui.RunFinished) < 0 {
		t.Fatal("the run did not finish")
	}
	if g := scoped.get(); len(g) < 2 || !slices.Equal(g[:2], []string{"onFile", "onFileCreate"}) {
		t.Errorf("sandbox-scoped hooks ran %q", g)
	}
	if n := len(e.rec.Find(slog.LevelError, "sandbox file hook failed")); n != len(scoped.get()) {
		t.Errorf("%d error records for %d failing sandbox-scoped hooks", n, len(scoped.get()))
	}
	for i := range got {
		if g := got[i].get(); len(g) < 2 || !slices.Equal(g[:2], []string{"onFile", "onFileCreate"}) {
			t.Errorf("middleware %d run-scoped hooks ran %q", i, g)
		}
	}
	if len(creates(fileEvents(customs(t, evs)))) != 1 {
		t.Error("the sandbox.file event is missing")
	}
}

func TestItem35BaselineLogs(t *testing.T) {
	t.Run("git repository", func(t *testing.T) {
		e := newEnv(t)
		mustRun(t, e.opts(chattest.NewAdapter(chattest.TextTurn("m", "x", agui.FinishStop)),
			sandbox.WithSandbox(e.define(sandbox.Definition{Workspace: gitRepo("/repo")}), sandbox.Options{})))
		if len(e.rec.Find(slog.LevelDebug, "sandbox git baseline captured")) != 1 {
			t.Error("no baseline captured record")
		}
	})
	t.Run("not a repository", func(t *testing.T) {
		e := newEnv(t)
		mustRun(t, e.opts(chattest.NewAdapter(chattest.TextTurn("m", "x", agui.FinishStop)),
			sandbox.WithSandbox(e.define(sandbox.Definition{}), sandbox.Options{})))
		recs := e.rec.Find(slog.LevelDebug, "baseline unavailable")
		if len(recs) != 1 || recs[0].Category != chat.CatSandbox {
			t.Errorf("records %+v", recs)
		}
		if n := e.rec.Count(slog.LevelWarn); n != 0 {
			t.Errorf("%d warnings", n)
		}
	})
	t.Run("exec throws", func(t *testing.T) {
		e := newEnv(t)
		fp := &faultProvider{Provider: e.provider, baselineErr: errors.New("exec failed")}
		mustRun(t, e.opts(chattest.NewAdapter(chattest.TextTurn("m", "x", agui.FinishStop)),
			sandbox.WithSandbox(e.define(sandbox.Definition{Provider: fp}), sandbox.Options{})))
		if recs := e.rec.Find(slog.LevelWarn, "baseline"); len(recs) != 1 {
			t.Errorf("warn records %+v", recs)
		}
	})
}

func TestItem36AbortDestroysWhenWatcherStopFails(t *testing.T) {
	e := newEnv(t)
	fp := &faultProvider{Provider: e.provider, stopErr: errors.New("stop failed")}
	var destroys atomic.Int32
	s := e.define(sandbox.Definition{Provider: fp, Hooks: sandbox.Hooks{
		OnDestroy: func(context.Context) error { destroys.Add(1); return nil },
	}})
	var dir string
	a := acting(func(_ context.Context, h sandbox.Handle) { dir = hostDir(h) }, chattest.TextTurn("m", "x", agui.FinishStop))
	for range chat.Stream(context.Background(), e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}))) {
		break // the client went away: abort
	}
	if len(e.rec.Find(slog.LevelWarn, "sandbox watcher stop failed")) != 1 {
		t.Error("the stop failure was not logged")
	}
	if dir == "" || exists(dir) || destroys.Load() != 1 {
		t.Errorf("not destroyed: dir exists=%v onDestroy=%d", exists(dir), destroys.Load())
	}
}

func TestItem37AbortDestroysUnlessDurableRunDetaches(t *testing.T) {
	type how int
	const (
		disconnect how = iota // the consumer stops reading
		cancelRun             // an explicit cancel request
	)
	for _, tc := range []struct {
		name        string
		runs        bool
		durability  *sandbox.Durability
		how         how
		storeCancel bool // the run store already records a cancel
		failWrite   bool
		detach      bool
	}{
		{name: "no durability"},
		{name: "runs only", runs: true},
		{name: "durability only", durability: &sandbox.Durability{}},
		{name: "durable disconnect", runs: true, durability: &sandbox.Durability{}, detach: true},
		{name: "durable cancel", runs: true, durability: &sandbox.Durability{}, how: cancelRun},
		{name: "durable cancel in store", runs: true, durability: &sandbox.Durability{}, storeCancel: true},
		{name: "no detach on disconnect", runs: true, durability: &sandbox.Durability{NoDetach: true}},
		{name: "detach write fails", runs: true, durability: &sandbox.Durability{}, failWrite: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var destroys atomic.Int32
			s := e.define(sandbox.Definition{Hooks: sandbox.Hooks{
				OnDestroy: func(context.Context) error { destroys.Add(1); return nil },
			}})
			mem := durable.NewMemory(nil)
			opts := sandbox.Options{Durability: tc.durability}
			if tc.runs {
				opts.Runs = mem
				if tc.failWrite {
					opts.Runs = failingRuns{mem}
				}
			}
			if tc.storeCancel {
				if _, err := mem.CreateOrResume(context.Background(), durable.RunRecord{
					RunID: "run-1", ThreadID: "thread-1", StartedAt: time.Now(), CancelRequested: durable.Ptr(true)}); err != nil {
					t.Fatal(err)
				}
			}
			var detachable *sandbox.DetachableRun
			probe := &chat.Middleware{Name: "probe", Setup: func(c *chat.Context) error {
				detachable, _ = sandbox.DetachableRunCapability.GetOptional(c)
				return nil
			}}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var dir string
			a := acting(func(_ context.Context, h sandbox.Handle) {
				dir = hostDir(h)
				if tc.how == cancelRun {
					cancel(chat.ErrCancelRequested)
				}
			}, chattest.TextTurn("m", "x", agui.FinishStop))
			for range chat.Stream(ctx, e.opts(a, sandbox.WithSandbox(s, opts), probe)) {
				if tc.how == disconnect {
					break
				}
			}
			destroyed := !exists(dir) && destroys.Load() == 1
			if destroyed == tc.detach {
				t.Fatalf("destroyed=%v (dir exists=%v, onDestroy=%d), want detach=%v", destroyed, exists(dir), destroys.Load(), tc.detach)
			}
			if durableRun := tc.runs && tc.durability != nil; (detachable != nil) != durableRun {
				t.Errorf("DetachableRun provided=%v on a durable=%v run", detachable != nil, durableRun)
			}
			rec, err := mem.Get(context.Background(), "run-1")
			if !tc.detach {
				if err == nil && rec.DetachedSince != nil {
					t.Errorf("detach recorded: %+v", rec)
				}
				if tc.failWrite && len(e.rec.Find(slog.LevelWarn, "sandbox detach record write failed")) != 1 {
					t.Error("the failed detach write was not logged")
				}
				return
			}
			key := s.Key(sandbox.RunContext{ThreadID: "thread-1", RunID: "run-1"})
			if err != nil || rec.DetachedSince == nil || rec.SandboxKey == nil || *rec.SandboxKey != key {
				t.Fatalf("record %+v (%v), want detached with key %s", rec, err, key)
			}
			if !detachable.Detached() || detachable.SandboxKey() != key {
				t.Errorf("DetachableRun detached=%v key=%q", detachable.Detached(), detachable.SandboxKey())
			}
		})
	}
}

// ---- the seed's examples ----

// Sandbox-scoped hooks: a catch-all logging "[type] path", the typed
// variants and the lifecycle callbacks.
func TestSeedSandboxScopedHooks(t *testing.T) {
	e := newEnv(t)
	var out lines
	var readyID string
	s := e.define(sandbox.Definition{
		Lifecycle: sandbox.Lifecycle{DestroyOnComplete: true},
		Hooks: sandbox.Hooks{
			OnFile: func(_ context.Context, ev chat.FileEvent) error {
				out.add(fmt.Sprintf("[%s] %s", ev.Type, ev.Path))
				return nil
			},
			OnFileCreate: func(_ context.Context, ev chat.FileEvent) error { out.add("created " + ev.Path); return nil },
			OnFileChange: func(_ context.Context, ev chat.FileEvent) error { out.add("changed " + ev.Path); return nil },
			OnFileDelete: func(_ context.Context, ev chat.FileEvent) error { out.add("deleted " + ev.Path); return nil },
			OnReady: func(_ context.Context, h sandbox.Handle) error {
				readyID = h.ID()
				out.add("sandbox ready")
				return nil
			},
			OnError:   func(context.Context, error) error { out.add("sandbox error"); return nil },
			OnDestroy: func(context.Context) error { out.add("sandbox destroyed"); return nil },
		},
	})
	a := acting(func(ctx context.Context, h sandbox.Handle) {
		if h.ID() != readyID {
			t.Errorf("onReady got %q, the run %q", readyID, h.ID())
		}
		writeFile(t, ctx, h, "/workspace/notes.txt", "one\n")
		time.Sleep(250 * time.Millisecond)
		writeFile(t, ctx, h, "/workspace/notes.txt", "one\ntwo\n")
		time.Sleep(250 * time.Millisecond)
		if err := h.FS().RemoveAll(ctx, "/workspace/notes.txt"); err != nil {
			t.Error(err)
		}
	}, chattest.TextTurn("m", "done", agui.FinishStop))
	mustRun(t, e.opts(a, sandbox.WithSandbox(s, sandbox.Options{})))
	want := []string{
		"sandbox ready",
		"[create] /workspace/notes.txt", "created /workspace/notes.txt",
		"[change] /workspace/notes.txt", "changed /workspace/notes.txt",
		"[delete] /workspace/notes.txt", "deleted /workspace/notes.txt",
		"sandbox destroyed",
	}
	if got := out.get(); !slices.Equal(compactPairs(got), want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// Run-scoped hooks (defineChatMiddleware's sandbox group): the catch-all
// logger and the audit hook receiving the run id.
func TestSeedRunScopedAuditHook(t *testing.T) {
	e := newEnv(t)
	var logged, db lines
	audit := &chat.Middleware{Name: "audit", Sandbox: chat.SandboxHooks{
		OnFile: func(c *chat.Context, ev chat.FileEvent) error {
			logged.add(fmt.Sprintf("%s [%s] %s", c.RunID, ev.Type, ev.Path))
			return nil
		},
		OnFileCreate: func(c *chat.Context, ev chat.FileEvent) error {
			db.add(fmt.Sprintf("run=%s event=%s %s", c.RunID, ev.Type, ev.Path))
			return nil
		},
	}}
	a := acting(func(ctx context.Context, h sandbox.Handle) {
		writeFile(t, ctx, h, "/workspace/a.txt", "a")
	}, chattest.TextTurn("m", "done", agui.FinishStop))
	opts := e.opts(a, sandbox.WithSandbox(e.define(sandbox.Definition{}), sandbox.Options{}), audit)
	opts.RunID = "run-audit-7"
	mustRun(t, opts)
	if got := logged.get(); len(got) == 0 || got[0] != "run-audit-7 [create] /workspace/a.txt" {
		t.Errorf("logger got %q", got)
	}
	if got := db.get(); !slices.Equal(got, []string{"run=run-audit-7 event=create /workspace/a.txt"}) {
		t.Errorf("audit got %q", got)
	}
}

// Reading content and diffs: a sandbox-scoped onFileChange printing the
// patch and a run-scoped onFileChange recording before and after.
func TestSeedDiffHooks(t *testing.T) {
	e := newEnv(t)
	var printed, db lines
	s := e.define(sandbox.Definition{Workspace: gitRepo("/repo"), Hooks: sandbox.Hooks{
		OnFileChange: func(ctx context.Context, ev chat.FileEvent) error {
			printed.add(fmt.Sprintf("%s changed:\n%s", ev.Path, ev.Diff(ctx)))
			return nil
		},
	}})
	audit := &chat.Middleware{Name: "audit", Sandbox: chat.SandboxHooks{
		OnFileChange: func(c *chat.Context, ev chat.FileEvent) error {
			db.add(fmt.Sprintf("run=%s path=%s before=%q after=%q", c.RunID, ev.Path, ev.Before(c), ev.After(c)))
			return nil
		},
	}}
	a := acting(func(ctx context.Context, h sandbox.Handle) {
		writeFile(t, ctx, h, "/repo/README.md", "new\n")
	}, chattest.TextTurn("m", "done", agui.FinishStop))
	mustRun(t, e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}), audit))
	p := compact(printed.get())
	if len(p) != 1 || !strings.HasPrefix(p[0], "/repo/README.md changed:\ndiff --git a/README.md b/README.md\n") ||
		!strings.Contains(p[0], "\n-old\n+new\n") {
		t.Errorf("printed %q", p)
	}
	if got := compact(db.get()); !slices.Equal(got, []string{`run=run-1 path=/repo/README.md before="old\n" after="new\n"`}) {
		t.Errorf("audit got %q", got)
	}
}

// A tool that writes files during the run puts sandbox.file and
// sandbox.file.diff events on the stream, in order, each diff after its
// file event.
func TestToolWritesStreamFileEvents(t *testing.T) {
	e := newEnv(t)
	s := e.define(sandbox.Definition{FileEvents: sandbox.FileEventsWithDiff})
	type in struct {
		Files []string `json:"files"`
	}
	tool := chat.NewTool("write_files", "writes files", func(ctx context.Context, x in) (string, error) {
		call, _ := chat.ToolCallFrom(ctx)
		h, err := sandbox.HandleCapability.Get(call.Run)
		if err != nil {
			return "", err
		}
		for _, f := range x.Files {
			writeFile(t, ctx, h, f, "content of "+f+"\n")
			time.Sleep(150 * time.Millisecond)
		}
		return "ok", nil
	})
	a := chattest.NewAdapter(
		chattest.ToolTurn("call-1", "write_files", `{"files":["/workspace/a.txt","/workspace/b.txt"]}`),
		chattest.TextTurn("m", "done", agui.FinishStop),
	)
	opts := e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}))
	opts.Tools = []*chat.Tool{tool}
	evs := mustRun(t, opts)

	cs := customs(t, evs)
	if got := creates(fileEvents(cs)); !slices.Equal(got, []string{"create /workspace/a.txt", "create /workspace/b.txt"}) {
		t.Fatalf("file events %q", got)
	}
	start := chattest.Index(evs, agui.ToolCallStart)
	fileAt := map[string]int{}
	for _, c := range cs {
		if c.Index < start {
			t.Errorf("%s at %d before the tool call at %d", c.Name, c.Index, start)
		}
		path := c.Value["path"].(string)
		switch c.Name {
		case "sandbox.file":
			if len(c.Value) != 3 || (c.Value["type"] != "create" && c.Value["type"] != "change") {
				t.Errorf("sandbox.file value %v, want exactly {type, path, timestamp}", c.Value)
			}
			if ts, ok := c.Value["timestamp"].(float64); !ok || ts <= 0 {
				t.Errorf("timestamp %v", c.Value["timestamp"])
			}
			fileAt[path] = c.Index
		case "sandbox.file.diff":
			at, ok := fileAt[path]
			if !ok || at > c.Index {
				t.Errorf("diff of %s before its sandbox.file", path)
			}
			if len(c.Value) != 2 || !strings.Contains(c.Value["diff"].(string), "+content of "+path) {
				t.Errorf("diff value %v", c.Value)
			}
		}
	}
	if n := len(fileEvents(cs)); checkDiffs(t, cs) != n {
		t.Errorf("%d file events, %d events in all", n, len(cs))
	}
}

// Files written right before the model finishes reach the stream before
// the run ends, and on the wire (default AG-UI profile) before its
// terminal event.
func TestBurstBeforeFinishReachesStream(t *testing.T) {
	e := newEnv(t)
	s := e.define(sandbox.Definition{FileEvents: sandbox.FileEventsWithDiff})
	const n = 25
	a := acting(func(ctx context.Context, h sandbox.Handle) {
		for i := range n {
			writeFile(t, ctx, h, fmt.Sprintf("/workspace/burst/f%02d.txt", i), "x\n")
		}
	}, chattest.TextTurn("m", "done", agui.FinishStop))
	var wire []agui.Event
	w := agui.NewWriter(nil, agui.WriterOptions{Emit: func(ev *agui.Event, _ []byte) error { wire = append(wire, *ev); return nil }})
	for ev, err := range chat.Stream(context.Background(), e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}))) {
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(&ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cs := customs(t, wire)
	created := creates(fileEvents(cs))
	slices.Sort(created)
	if len(slices.Compact(created)) != n || len(created) != n {
		t.Fatalf("%d creates on the wire, want %d distinct: %q", len(created), n, created)
	}
	checkDiffs(t, cs)
	if last := wire[len(wire)-1]; last.Type != agui.RunFinished || cs[len(cs)-1].Index > len(wire)-1 {
		t.Errorf("the wire does not end with the terminal RUN_FINISHED after the file events: last %s", last.Type)
	}
}

func TestHarnessRequiresSandbox(t *testing.T) {
	e := newEnv(t)
	a := harness{acting(nil, chattest.TextTurn("m", "x", agui.FinishStop))}
	_, err := chattest.Collect(t, e.opts(a))
	if err == nil || !strings.Contains(err.Error(), `requires capability "sandbox"`) || len(a.Requests()) != 0 {
		t.Fatalf("err %v after %d model calls", err, len(a.Requests()))
	}
	var got sandbox.Handle
	b := harness{acting(func(_ context.Context, h sandbox.Handle) { got = h }, chattest.TextTurn("m", "x", agui.FinishStop))}
	mustRun(t, e.opts(b, sandbox.WithSandbox(e.define(sandbox.Definition{}), sandbox.Options{})))
	if got == nil {
		t.Fatal("the harness got no handle")
	}
}

func TestLifecycleReuseAndDestroy(t *testing.T) {
	runOnce := func(t *testing.T, e *env, s *sandbox.Sandbox, runID string) string {
		var id string
		a := acting(func(_ context.Context, h sandbox.Handle) { id = hostDir(h) }, chattest.TextTurn("m", "x", agui.FinishStop))
		opts := e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}))
		opts.RunID = runID
		mustRun(t, opts)
		return id
	}
	t.Run("per thread", func(t *testing.T) {
		e := newEnv(t)
		s := e.define(sandbox.Definition{})
		first, second := runOnce(t, e, s, "run-1"), runOnce(t, e, s, "run-2")
		if first != second || !exists(first) {
			t.Errorf("runs of one thread got %s and %s (kept=%v)", first, second, exists(first))
		}
		var outcomes []string
		for _, r := range e.rec.Find(slog.LevelDebug, "sandbox ensured") {
			outcomes = append(outcomes, r.Attrs["outcome"])
		}
		if !slices.Equal(outcomes, []string{"created", "resumed"}) {
			t.Errorf("outcomes %q", outcomes)
		}
	})
	t.Run("per run", func(t *testing.T) {
		e := newEnv(t)
		s := e.define(sandbox.Definition{Lifecycle: sandbox.Lifecycle{Reuse: sandbox.ReusePerRun}})
		if first, second := runOnce(t, e, s, "run-1"), runOnce(t, e, s, "run-2"); first == second {
			t.Errorf("two runs shared %s", first)
		}
	})
	t.Run("destroy on complete", func(t *testing.T) {
		e := newEnv(t)
		var destroys atomic.Int32
		s := e.define(sandbox.Definition{Lifecycle: sandbox.Lifecycle{DestroyOnComplete: true},
			Hooks: sandbox.Hooks{OnDestroy: func(context.Context) error { destroys.Add(1); return nil }}})
		if dir := runOnce(t, e, s, "run-1"); exists(dir) || destroys.Load() != 1 {
			t.Errorf("not destroyed: exists=%v onDestroy=%d", exists(dir), destroys.Load())
		}
		if len(e.rec.Find(slog.LevelDebug, "sandbox destroyed")) != 1 {
			t.Error("destroy not logged")
		}
	})
	t.Run("error keeps the sandbox without destroy on complete", func(t *testing.T) {
		e := newEnv(t)
		var gotErr error
		s := e.define(sandbox.Definition{Hooks: sandbox.Hooks{OnError: func(_ context.Context, err error) error { gotErr = err; return nil }}})
		var dir string
		a := acting(func(_ context.Context, h sandbox.Handle) { dir = hostDir(h) })
		a.Err = errors.New("model down")
		if _, err := chattest.Collect(t, e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}))); err == nil {
			t.Fatal("no run error")
		}
		if gotErr == nil || !strings.Contains(gotErr.Error(), "model down") || !exists(dir) {
			t.Errorf("onError got %v, kept=%v", gotErr, exists(dir))
		}
	})
}

func TestOnReadyFailureDestroysAndReportsError(t *testing.T) {
	e := newEnv(t)
	var dir string
	var gotErr error
	var destroys atomic.Int32
	s := e.define(sandbox.Definition{Hooks: sandbox.Hooks{
		OnReady:   func(_ context.Context, h sandbox.Handle) error { dir = hostDir(h); return errors.New("not ready") },
		OnError:   func(_ context.Context, err error) error { gotErr = err; return nil },
		OnDestroy: func(context.Context) error { destroys.Add(1); return nil },
	}})
	a := chattest.NewAdapter(chattest.TextTurn("m", "x", agui.FinishStop))
	_, err := chattest.Collect(t, e.opts(a, sandbox.WithSandbox(s, sandbox.Options{})))
	if err == nil || !strings.Contains(err.Error(), "not ready") || len(a.Requests()) != 0 {
		t.Fatalf("err %v after %d model calls", err, len(a.Requests()))
	}
	if dir == "" || exists(dir) || destroys.Load() != 1 {
		t.Errorf("not destroyed once: exists=%v onDestroy=%d", exists(dir), destroys.Load())
	}
	if gotErr == nil || !strings.Contains(gotErr.Error(), "not ready") {
		t.Errorf("onError got %v", gotErr)
	}
}

// A run that pauses on an interrupt gets no terminal hook: the watcher is
// drained at the interrupt terminal and the sandbox is kept.
func TestPauseDrainsWatcher(t *testing.T) {
	e := newEnv(t)
	s := e.define(sandbox.Definition{})
	pause := &chat.Middleware{Name: "pause", OnInterruptBoundary: func(c *chat.Context) ([]chat.InterruptRequest, error) {
		if c.Phase == chat.PhaseAfterModel {
			return []chat.InterruptRequest{{Reason: "review", Message: "check the edits"}}, nil
		}
		return nil, nil
	}}
	var dir string
	a := acting(func(ctx context.Context, h sandbox.Handle) {
		dir = hostDir(h)
		writeFile(t, ctx, h, "/workspace/draft.txt", "draft")
	}, chattest.TextTurn("m", "x", agui.FinishStop))
	evs := mustRun(t, e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}), pause))
	if got := creates(fileEvents(customs(t, evs))); !slices.Equal(got, []string{"create /workspace/draft.txt"}) {
		t.Errorf("file events %q", got)
	}
	stopped := e.rec.Find(slog.LevelDebug, "sandbox watcher stopped")
	if len(stopped) != 1 || stopped[0].Attrs["phase"] != "pause" || !exists(dir) {
		t.Errorf("stopped records %+v, kept=%v", stopped, exists(dir))
	}
}

func TestDebugSandboxCategory(t *testing.T) {
	e := newEnv(t)
	s := e.define(sandbox.Definition{Lifecycle: sandbox.Lifecycle{DestroyOnComplete: true}})
	a := acting(func(ctx context.Context, h sandbox.Handle) {
		writeFile(t, ctx, h, "/workspace/a.txt", "a")
	}, chattest.TextTurn("m", "x", agui.FinishStop))
	opts := e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}))
	opts.Debug = &chat.Debug{Categories: map[string]bool{
		chat.CatRequest: false, chat.CatProvider: false, chat.CatOutput: false, chat.CatMiddleware: false,
		chat.CatTools: false, chat.CatAgentLoop: false, chat.CatConfig: false,
	}, Logger: e.log}
	mustRun(t, opts)
	var msgs []string
	for _, r := range e.rec.Records() {
		if r.Category == chat.CatSandbox {
			_, m, _ := strings.Cut(r.Message, "📦 [tanstack-ai:sandbox] 📦 ")
			msgs = append(msgs, m)
		}
	}
	for _, want := range []string{"sandbox ensured", "sandbox ready", "sandbox watcher started",
		"file create /workspace/a.txt", "sandbox watcher stopped", "sandbox destroyed"} {
		if !slices.ContainsFunc(msgs, func(m string) bool { return strings.HasPrefix(m, want) }) {
			t.Errorf("no %q record in %q", want, msgs)
		}
	}

	// With the sandbox category off, nothing is logged under it.
	e2 := newEnv(t)
	opts2 := e2.opts(chattest.NewAdapter(chattest.TextTurn("m", "x", agui.FinishStop)), sandbox.WithSandbox(e2.define(sandbox.Definition{}), sandbox.Options{}))
	opts2.Debug = &chat.Debug{Logger: e2.log}
	mustRun(t, opts2)
	if n := len(e2.rec.Records()); n != 0 {
		t.Errorf("%d records with only errors on: %+v", n, e2.rec.Records())
	}
}

// compactPairs drops a repeated "[type] path" line together with the typed
// hook's line that follows it.
func compactPairs(l []string) []string {
	var out []string
	for i := 0; i < len(l); i++ {
		if strings.HasPrefix(l[i], "[") && i+1 < len(l) && len(out) >= 2 && out[len(out)-2] == l[i] && out[len(out)-1] == l[i+1] {
			i++
			continue
		}
		out = append(out, l[i])
	}
	return out
}

func TestTenantFromUserContextScopesTheSandbox(t *testing.T) {
	e := newEnv(t)
	s := e.define(sandbox.Definition{})
	dirFor := func(uc any) string {
		var dir string
		a := acting(func(_ context.Context, h sandbox.Handle) { dir = hostDir(h) }, chattest.TextTurn("m", "x", agui.FinishStop))
		opts := e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}))
		opts.UserContext = uc
		mustRun(t, opts)
		return dir
	}
	alice := dirFor(map[string]any{"userId": "alice"})
	if bob := dirFor(map[string]string{"userId": "bob"}); bob == alice {
		t.Error("two tenants shared a sandbox")
	}
	if again := dirFor(&sandbox.Tenant{UserID: "alice"}); again != alice {
		t.Error("one tenant got two sandboxes")
	}
}

// A disconnect during the run records the detach (detachedSince and the
// sandbox key) while the run keeps going to its normal finish.
func TestDisconnectRecordsDetachWhileRunContinues(t *testing.T) {
	e := newEnv(t)
	runs := durable.NewMemory(nil)
	s := e.define(sandbox.Definition{})
	disc := chat.NewRunDisconnect()
	a := acting(func(context.Context, sandbox.Handle) { disc.Notify() }, chattest.TextTurn("m", "done", agui.FinishStop))
	opts := e.opts(a, sandbox.WithSandbox(s, sandbox.Options{Runs: runs, Durability: &sandbox.Durability{}}))
	opts.Disconnect = disc
	evs := mustRun(t, opts)
	if evs[len(evs)-1].Type != agui.RunFinished {
		t.Fatalf("the run did not finish normally: %s", evs[len(evs)-1].Type)
	}
	rec, err := runs.Get(context.Background(), "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.DetachedSince == nil || rec.SandboxKey == nil || *rec.SandboxKey == "" {
		t.Fatalf("detach not recorded: %+v", rec)
	}
}
