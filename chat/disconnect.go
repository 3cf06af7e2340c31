package chat

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
)

// RunDisconnect tells a run that its client went away (docs/durable.md §2). A
// disconnect is a notification, not a cancel: the run keeps going, and
// listeners do bookkeeping only (record a detach, release a lease).
//
// The transport owns the notifier and calls Notify the moment a response
// write fails; the engine provides it to middleware as
// RunDisconnectCapability before any Setup runs.
type RunDisconnect struct {
	mu           sync.Mutex
	disconnected bool
	finished     bool
	listeners    []func(context.Context) error
	wg           sync.WaitGroup
	ctx          context.Context
	log          *Logger
}

// RunDisconnectCapability is the run's disconnect notifier.
var RunDisconnectCapability = NewCapability[*RunDisconnect]("run-disconnect")

// NewRunDisconnect returns a notifier for one run.
func NewRunDisconnect() *RunDisconnect { return &RunDisconnect{ctx: context.Background()} }

// Notify reports the disconnect. It is idempotent, never blocks on
// listeners, and is ignored once the run has reached a terminal hook.
func (d *RunDisconnect) Notify() {
	d.mu.Lock()
	if d.disconnected || d.finished {
		d.mu.Unlock()
		return
	}
	d.disconnected = true
	ls := append([]func(context.Context) error(nil), d.listeners...)
	d.mu.Unlock()
	for _, fn := range ls {
		d.start(fn)
	}
}

// Disconnected reports whether Notify was called before the run finished.
func (d *RunDisconnect) Disconnected() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.disconnected
}

// Subscribe registers a listener. Subscribing after the disconnect calls
// the listener at once (the usual case when a slow Setup is still running).
// Listeners run on their own goroutine; errors and panics are logged, and
// the run waits for every listener before it ends.
func (d *RunDisconnect) Subscribe(fn func(ctx context.Context) error) {
	d.mu.Lock()
	if d.finished {
		d.mu.Unlock()
		return
	}
	d.listeners = append(d.listeners, fn)
	now := d.disconnected
	d.mu.Unlock()
	if now {
		d.start(fn)
	}
}

func (d *RunDisconnect) start(fn func(context.Context) error) {
	d.wg.Go(func() {
		defer func() {
			if p := recover(); p != nil {
				// Isolated, like its errors: bookkeeping must not fail the run.
				d.log.Log(CatErrors, fmt.Sprintf("run disconnect listener panicked: %v", p), slog.String("stack", string(debug.Stack())))
			}
		}()
		if err := fn(d.ctx); err != nil {
			d.log.Log(CatErrors, "run disconnect listener failed: "+err.Error())
		}
	})
}

// attach binds the notifier to a run.
func (d *RunDisconnect) attach(ctx context.Context, log *Logger) {
	d.mu.Lock()
	d.ctx, d.log = ctx, log
	d.mu.Unlock()
}

// terminal marks the run finished: later notifications are ignored.
func (d *RunDisconnect) terminal() {
	d.mu.Lock()
	d.finished = true
	d.mu.Unlock()
}

// wait blocks until every started listener returned.
func (d *RunDisconnect) wait() { d.wg.Wait() }
