package sandbox_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/sandboxtest"
)

func nativeFake() *sandboxtest.FakeHandle {
	h := sandboxtest.NewFakeHandle()
	h.Caps.NativeWatch = true
	return h
}

func nativeWatch(t *testing.T, h *sandboxtest.FakeHandle, c *collector, opts sandbox.WatchOptions) *sandbox.Watcher {
	t.Helper()
	opts.OnEvent = c.add
	if opts.Coalesce == 0 {
		opts.Coalesce = -1
	}
	w, err := sandbox.WatchWorkspace(context.Background(), h, opts)
	if err != nil {
		t.Fatal(err)
	}
	if w.Mode() != sandbox.WatchNative {
		t.Fatalf("mode %v", w.Mode())
	}
	return w
}

func raw(op sandbox.RawOp, p string) sandbox.RawEvent { return sandbox.RawEvent{Op: op, Path: p} }

func TestItem23NativeClassification(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := nativeFake()
	h.SetFile("/workspace/old.txt", "x")
	var c collector
	w := nativeWatch(t, h, &c, sandbox.WatchOptions{})
	// Rename old.txt -> new.txt: the old path is gone, the new one exists.
	h.RemoveFile("/workspace/old.txt")
	h.SetFile("/workspace/new.txt", "x")
	h.Emit(raw(sandbox.RawRename, "/workspace/old.txt"))
	h.Emit(raw(sandbox.RawRename, "/workspace/new.txt"))
	h.Emit(raw(sandbox.RawWrite, "/workspace/new.txt"))
	// The raw type is ignored: a "remove" for an existing path is a change.
	h.Emit(raw(sandbox.RawRemove, "/workspace/new.txt"))
	// Ignored directories.
	h.SetFile("/workspace/.git/index", "x")
	h.SetFile("/workspace/node_modules/x/y.js", "x")
	h.Emit(raw(sandbox.RawWrite, "/workspace/.git/index"))
	h.Emit(raw(sandbox.RawCreate, "/workspace/node_modules/x/y.js"))
	// An event for a path that was never known and is gone: nothing.
	h.Emit(raw(sandbox.RawRemove, "/workspace/ghost"))
	want := []string{"delete /workspace/old.txt", "create /workspace/new.txt", "change /workspace/new.txt", "change /workspace/new.txt"}
	if !waitFor(t, 2*time.Second, func() bool { return len(c.events()) >= len(want) }) {
		t.Fatalf("events %v", c.pairs())
	}
	w.Stop()
	if got := c.pairs(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestItem23ClassifyFailureWarns(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := nativeFake()
	log, rec := sandboxtest.NewLogger()
	var c collector
	w := nativeWatch(t, h, &c, sandbox.WatchOptions{Logger: log})
	h.ExistsFunc = func(string) (bool, error) { return false, errors.New("io") }
	h.Emit(raw(sandbox.RawWrite, "/workspace/a"))
	ok := waitFor(t, 2*time.Second, func() bool { return len(rec.Find(slog.LevelWarn, "classify")) == 1 })
	w.Stop()
	if !ok || len(c.events()) != 0 {
		t.Fatalf("events %v logs %+v", c.pairs(), rec.Records())
	}
}

func TestItem23ReseedAfterFailedRootSeed(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := nativeFake()
	h.SetFile("/workspace/exists.txt", "x")
	log, rec := sandboxtest.NewLogger()
	fail := true
	h.ReadDirFunc = func(name string) ([]sandbox.DirEntry, error) {
		if fail {
			return nil, errors.New("EIO")
		}
		return []sandbox.DirEntry{{Name: "exists.txt", Path: "/workspace/exists.txt", Type: sandbox.EntryFile}}, nil
	}
	var c collector
	w := nativeWatch(t, h, &c, sandbox.WatchOptions{Logger: log})
	if len(rec.Find(slog.LevelWarn, "failed to list directory while seeding")) != 1 {
		t.Fatalf("logs %+v", rec.Records())
	}
	fail = false // read by the watcher goroutine only after Emit below
	h.Emit(raw(sandbox.RawWrite, "/workspace/exists.txt"))
	waitFor(t, 2*time.Second, func() bool { return len(c.events()) == 1 })
	w.Stop()
	if got := c.pairs(); !slices.Equal(got, []string{"change /workspace/exists.txt"}) {
		t.Fatalf("events %v", got)
	}
	if len(rec.Find(slog.LevelDebug, "re-seeded after failed initial seed")) != 1 {
		t.Fatalf("logs %+v", rec.Records())
	}
}

func TestNativeCoalescing(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name     string
		coalesce time.Duration
		want     []string
	}{
		{"window", 30 * time.Millisecond, []string{"create /workspace/new.txt", "change /workspace/old.txt"}},
		{"off", -1, []string{"create /workspace/new.txt", "change /workspace/new.txt", "change /workspace/new.txt",
			"change /workspace/old.txt", "change /workspace/old.txt", "change /workspace/old.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := nativeFake()
			h.SetFile("/workspace/old.txt", "x")
			var c collector
			w := nativeWatch(t, h, &c, sandbox.WatchOptions{Coalesce: tc.coalesce})
			h.SetFile("/workspace/new.txt", "x")
			h.Emit(raw(sandbox.RawCreate, "/workspace/new.txt"))
			h.Emit(raw(sandbox.RawWrite, "/workspace/new.txt"))
			h.Emit(raw(sandbox.RawWrite, "/workspace/new.txt"))
			for range 3 {
				h.Emit(raw(sandbox.RawWrite, "/workspace/old.txt"))
			}
			waitFor(t, 2*time.Second, func() bool { return len(c.events()) >= len(tc.want) })
			time.Sleep(2 * max(tc.coalesce, 0))
			w.Stop()
			if got := c.pairs(); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNativeCreateThenDeleteWithinWindowIsSilent(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := nativeFake()
	var c collector
	w := nativeWatch(t, h, &c, sandbox.WatchOptions{Coalesce: 20 * time.Millisecond})
	h.Emit(raw(sandbox.RawCreate, "/workspace/tmp.swp"))
	h.Emit(raw(sandbox.RawRemove, "/workspace/tmp.swp"))
	time.Sleep(60 * time.Millisecond)
	w.Stop()
	if len(c.events()) != 0 {
		t.Fatalf("events %v", c.pairs())
	}
}

func TestNativeStopFlushesPending(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := nativeFake()
	var c collector
	w := nativeWatch(t, h, &c, sandbox.WatchOptions{Coalesce: time.Hour})
	h.SetFile("/workspace/a", "x")
	h.Emit(raw(sandbox.RawCreate, "/workspace/a"))
	time.Sleep(10 * time.Millisecond)
	w.Stop()
	if got := c.pairs(); !slices.Equal(got, []string{"create /workspace/a"}) {
		t.Fatalf("events %v", got)
	}
	if h.Emit(raw(sandbox.RawCreate, "/workspace/b")) {
		t.Fatal("subscription still live after Stop")
	}
}

func TestNativeOverflowRescans(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := nativeFake()
	h.SetFile("/workspace/a", "x")
	h.SetFile("/workspace/b", "x")
	var c collector
	w := nativeWatch(t, h, &c, sandbox.WatchOptions{})
	h.RemoveFile("/workspace/b")
	h.SetFile("/workspace/sub/c", "x")
	h.Emit(sandbox.RawEvent{Op: sandbox.RawOverflow})
	waitFor(t, 2*time.Second, func() bool { return len(c.events()) == 2 })
	// Later events classify against the rescanned state.
	h.Emit(raw(sandbox.RawWrite, "/workspace/sub/c"))
	waitFor(t, 2*time.Second, func() bool { return len(c.events()) == 3 })
	w.Stop()
	want := []string{"create /workspace/sub/c", "delete /workspace/b", "change /workspace/sub/c"}
	if got := c.pairs(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestNativeDirectoryGoneDeletesChildren(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := nativeFake()
	h.SetFile("/workspace/d/x", "1")
	h.SetFile("/workspace/d/y", "1")
	var c collector
	w := nativeWatch(t, h, &c, sandbox.WatchOptions{})
	h.RemoveFile("/workspace/d/x")
	h.RemoveFile("/workspace/d/y")
	h.Emit(raw(sandbox.RawRename, "/workspace/d")) // moved out of the tree
	waitFor(t, 2*time.Second, func() bool { return len(c.events()) == 2 })
	w.Stop()
	if got := c.pairs(); !slices.Equal(got, []string{"delete /workspace/d/x", "delete /workspace/d/y"}) {
		t.Fatalf("events %v", got)
	}
}

func TestNativeFailureFallsBackToPoll(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := nativeFake()
	h.SetFile("/workspace/a", "x")
	log, rec := sandboxtest.NewLogger()
	exec, done := scriptFind(ok("1\t1\t./a\n1\t1\t./b\n"), ok("1\t1\t./b\n"))
	h.ExecFunc = exec
	var c collector
	w := nativeWatch(t, h, &c, sandbox.WatchOptions{Logger: log, Interval: 5 * time.Millisecond})
	h.Emit(sandbox.RawEvent{Op: sandbox.RawFailed, Err: errors.New("ENOSPC")})
	wait(t, done)
	w.Stop()
	if got := c.pairs(); !slices.Equal(got, []string{"create /workspace/b", "delete /workspace/a"}) {
		t.Fatalf("events %v", got)
	}
	if len(rec.Find(slog.LevelWarn, "falling back to polling")) != 1 {
		t.Fatalf("logs %+v", rec.Records())
	}
}

func TestNativeWatchStartFailureFallsBackToPoll(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := nativeFake()
	h.WatchErr = errors.New("ENOSPC")
	exec, done := scriptFind(ok(""), ok("1\t1\t./a\n"))
	h.ExecFunc = exec
	var c collector
	w, err := sandbox.WatchWorkspace(context.Background(), h, sandbox.WatchOptions{OnEvent: c.add, Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if w.Mode() != sandbox.WatchPoll {
		t.Fatalf("mode %v", w.Mode())
	}
	wait(t, done)
	w.Stop()
	if got := c.pairs(); !slices.Equal(got, []string{"create /workspace/a"}) {
		t.Fatalf("events %v", got)
	}
	// Forcing native mode on a provider without it is ErrUnsupported.
	plain := sandboxtest.NewFakeHandle()
	if _, err := sandbox.WatchWorkspace(context.Background(), plain, sandbox.WatchOptions{Mode: sandbox.WatchNative, OnEvent: c.add}); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("err %v", err)
	}
}

func TestNativeContextCancelReleasesWatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := nativeFake()
	ctx, cancel := context.WithCancel(context.Background())
	var c collector
	w, err := sandbox.WatchWorkspace(ctx, h, sandbox.WatchOptions{OnEvent: c.add})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if !waitFor(t, 2*time.Second, func() bool { return !h.Emit(raw(sandbox.RawWrite, "/workspace/x")) }) {
		t.Fatal("native subscription still live after cancel")
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
}
