package sandbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
	"github.com/goai-sdk/goai/sandbox"
)

// countingProvider wraps a provider and counts what its handles are asked
// to watch: native subscriptions (started and still running) and `find`
// polls.
type countingProvider struct {
	sandbox.Provider
	watches    atomic.Int64 // native Watch calls
	liveSubs   atomic.Int64 // native subscriptions not yet stopped
	maxLive    atomic.Int64
	findPolls  atomic.Int64
	otherExecs atomic.Int64
}

func (p *countingProvider) wrap(h sandbox.Handle, err error) (sandbox.Handle, error) {
	if err != nil || h == nil {
		return h, err
	}
	return &watchCountingHandle{Handle: h, p: p}, nil
}

func (p *countingProvider) Create(ctx context.Context, o sandbox.CreateOptions) (sandbox.Handle, error) {
	return p.wrap(p.Provider.Create(ctx, o))
}

func (p *countingProvider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	return p.wrap(p.Provider.Resume(ctx, id))
}

type watchCountingHandle struct {
	sandbox.Handle
	p *countingProvider
}

func (h *watchCountingHandle) Exec(ctx context.Context, cmd string, o sandbox.ExecOptions) (sandbox.ExecResult, error) {
	if strings.HasPrefix(cmd, "find . -type f") {
		h.p.findPolls.Add(1)
	} else {
		h.p.otherExecs.Add(1)
	}
	return h.Handle.Exec(ctx, cmd, o)
}

func (h *watchCountingHandle) FS() sandbox.FS { return countingFS{h.Handle.FS(), h.p} }

type countingFS struct {
	sandbox.FS
	p *countingProvider
}

func (f countingFS) Lstat(ctx context.Context, name string) (*sandbox.FileInfo, error) {
	return f.FS.(sandbox.Lstater).Lstat(ctx, name)
}

func (f countingFS) Watch(ctx context.Context, root string, o sandbox.NativeWatchOptions, fn func(sandbox.RawEvent)) (sandbox.Subscription, error) {
	sub, err := f.FS.(sandbox.NativeWatcher).Watch(ctx, root, o, fn)
	if err != nil {
		return nil, err
	}
	f.p.watches.Add(1)
	n := f.p.liveSubs.Add(1)
	for {
		m := f.p.maxLive.Load()
		if n <= m || f.p.maxLive.CompareAndSwap(m, n) {
			break
		}
	}
	return &countingSub{Subscription: sub, p: f.p}, nil
}

type countingSub struct {
	sandbox.Subscription
	p    *countingProvider
	once sync.Once
}

func (s *countingSub) Stop() error {
	s.once.Do(func() { s.p.liveSubs.Add(-1) })
	return s.Subscription.Stop()
}

// barrier releases everyone once n have arrived.
type barrier struct {
	n       int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) arrive(t *testing.T) {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-time.After(2 * time.Minute):
		t.Error("barrier: not every run arrived")
	}
}

// runConcurrently runs n runs of one thread at once; each run's model turn
// calls during(i, h) and the runs are in their turn together.
func runConcurrently(t *testing.T, e *env, n int, s *sandbox.Sandbox, mws func(i int) []*chat.Middleware, during func(i int, h sandbox.Handle)) [][]custom {
	t.Helper()
	b := newBarrier(n)
	out := make([][]custom, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a := acting(func(ctx context.Context, h sandbox.Handle) {
				b.arrive(t)
				during(i, h)
			}, chattest.TextTurn("m", "done", agui.FinishStop))
			opts := e.opts(a, append([]*chat.Middleware{sandbox.WithSandbox(s, sandbox.Options{Watch: sandbox.WatchOptions{Mode: sandbox.WatchPoll, Interval: 20 * time.Millisecond}})}, mws(i)...)...)
			opts.RunID = fmt.Sprintf("run-%d", i)
			evs, err := chattest.Collect(t, opts)
			if err != nil {
				t.Errorf("run %d: %v", i, err)
				return
			}
			out[i] = customs(t, evs)
		})
	}
	wg.Wait()
	return out
}

// Two runs on one sandbox: the sandbox-scoped hooks fire once per file
// event, and each run still gets its run-scoped hooks and its sandbox.file
// events.
func TestSharedWatcherSandboxHooksOncePerEvent(t *testing.T) {
	e := newEnv(t)
	var scoped atomic.Int64
	s := e.define(sandbox.Definition{Hooks: sandbox.Hooks{
		OnFile: func(context.Context, chat.FileEvent) error { scoped.Add(1); return nil },
	}})
	var runSeen [2]atomic.Int64
	const files = 3
	got := runConcurrently(t, e, 2, s, func(i int) []*chat.Middleware {
		return []*chat.Middleware{{Name: "audit", Sandbox: chat.SandboxHooks{
			OnFile: func(*chat.Context, chat.FileEvent) error { runSeen[i].Add(1); return nil },
		}}}
	}, func(i int, h sandbox.Handle) {
		if i == 0 {
			for f := range files {
				writeFile(t, context.Background(), h, fmt.Sprintf("/workspace/f%d.txt", f), "x\n")
			}
		}
		// Both runs stay until each has seen every file.
		waitFor(t, time.Minute, func() bool { return runSeen[0].Load() >= files && runSeen[1].Load() >= files })
	})
	for i, cs := range got {
		if n := len(fileEvents(cs)); n != files {
			t.Errorf("run %d streamed %d sandbox.file events, want %d: %v", i, n, files, fileEvents(cs))
		}
		if n := runSeen[i].Load(); n != files {
			t.Errorf("run %d: run-scoped hook fired %d times, want %d", i, n, files)
		}
	}
	if n := scoped.Load(); n != files {
		t.Errorf("sandbox-scoped hook fired %d times for %d file events", n, files)
	}
	if n := s.LiveWatchers(); n != 0 {
		t.Errorf("%d watchers left running after the runs", n)
	}
}

// Ten runs sharing one sandbox share one watcher (one native
// subscription), which stops with the last run.
func TestSharedWatcherTenRunsOneWatcher(t *testing.T) {
	e := newEnv(t)
	cp := &countingProvider{Provider: e.provider}
	s := e.define(sandbox.Definition{Provider: cp})
	const runs = 10
	var during [runs]int
	b, b2 := newBarrier(runs), newBarrier(runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			a := acting(func(ctx context.Context, h sandbox.Handle) {
				b.arrive(t)
				during[i] = s.LiveWatchers()
				b2.arrive(t)
			}, chattest.TextTurn("m", "done", agui.FinishStop))
			opts := e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}))
			opts.RunID = fmt.Sprintf("run-%d", i)
			if _, err := chattest.Collect(t, opts); err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i, n := range during {
		if n != 1 {
			t.Errorf("run %d saw %d live watchers, want 1", i, n)
		}
	}
	if n := cp.watches.Load(); n != 1 {
		t.Errorf("%d native watches started for %d runs, want 1", n, runs)
	}
	if n := cp.maxLive.Load(); n != 1 {
		t.Errorf("at most %d native watches ran at once, want 1", n)
	}
	if n := cp.liveSubs.Load(); n != 0 || s.LiveWatchers() != 0 {
		t.Errorf("%d subscriptions and %d watchers left after the runs", n, s.LiveWatchers())
	}
	t.Logf("watchers with %d runs sharing one sandbox: %d (native subscriptions started: %d)", runs, during[0], cp.watches.Load())
}

// fileEvents:false starts no watcher: no native subscription, no find
// poll, nothing live.
func TestFileEventsOffStartsNoWatcher(t *testing.T) {
	e := newEnv(t)
	cp := &countingProvider{Provider: e.provider}
	s := e.define(sandbox.Definition{Provider: cp, FileEvents: sandbox.FileEventsOff})
	var live int
	a := acting(func(ctx context.Context, h sandbox.Handle) {
		writeFile(t, ctx, h, "/workspace/a.txt", "x\n")
		live = s.LiveWatchers()
	}, chattest.TextTurn("m", "done", agui.FinishStop))
	evs := mustRun(t, e.opts(a, sandbox.WithSandbox(s, sandbox.Options{Watch: sandbox.WatchOptions{Mode: sandbox.WatchPoll, Interval: time.Millisecond}})))
	if cp.watches.Load() != 0 || cp.findPolls.Load() != 0 || live != 0 {
		t.Fatalf("fileEvents off: %d native watches, %d find polls, %d live watchers", cp.watches.Load(), cp.findPolls.Load(), live)
	}
	if cp.otherExecs.Load() == 0 {
		t.Fatal("the counting provider saw no exec at all (the baseline should run): is it wired?")
	}
	if n := len(fileEvents(customs(t, evs))); n != 0 {
		t.Fatalf("%d sandbox.file events", n)
	}
}
