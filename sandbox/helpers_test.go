package sandbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// step is one scripted exec answer.
type step struct {
	res sandbox.ExecResult
	err error
}

func ok(out string) step { return step{res: sandbox.ExecResult{Stdout: out}} }
func exit(code int, out string) step {
	return step{res: sandbox.ExecResult{Stdout: out, ExitCode: code}}
}
func throw(msg string) step { return step{err: errors.New(msg)} }

// scriptFind answers the find polls in order; once the script is used up
// it closes done and blocks until the watcher's context ends.
func scriptFind(steps ...step) (func(ctx context.Context, cmd string, _ sandbox.ExecOptions) (sandbox.ExecResult, error), <-chan struct{}) {
	var mu sync.Mutex
	i := 0
	done := make(chan struct{})
	return func(ctx context.Context, cmd string, _ sandbox.ExecOptions) (sandbox.ExecResult, error) {
		mu.Lock()
		n := i
		i++
		mu.Unlock()
		if n < len(steps) {
			return steps[n].res, steps[n].err
		}
		if n == len(steps) {
			close(done)
		}
		<-ctx.Done()
		return sandbox.ExecResult{}, ctx.Err()
	}, done
}

type collector struct {
	mu  sync.Mutex
	evs []sandbox.WatchEvent
}

func (c *collector) add(e sandbox.WatchEvent) {
	c.mu.Lock()
	c.evs = append(c.evs, e)
	c.mu.Unlock()
}

func (c *collector) events() []sandbox.WatchEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sandbox.WatchEvent(nil), c.evs...)
}

// pairs renders events as "type path" strings.
func (c *collector) pairs() []string {
	var out []string
	for _, e := range c.events() {
		out = append(out, string(e.Type)+" "+e.Path)
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return cond()
}

func pollWatch(t *testing.T, h *sandboxtest.FakeHandle, c *collector, opts sandbox.WatchOptions) *sandbox.Watcher {
	t.Helper()
	opts.Mode = sandbox.WatchPoll
	if opts.Interval == 0 {
		opts.Interval = 5 * time.Millisecond
	}
	opts.OnEvent = c.add
	w, err := sandbox.WatchWorkspace(context.Background(), h, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func wait(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("script not consumed")
	}
}
