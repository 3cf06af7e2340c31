package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/goai-sdk/goai/chat"
)

// FileHook handles one enriched file event.
type FileHook func(ctx context.Context, e chat.FileEvent) error

// Hooks are the sandbox-scoped callbacks of a Definition.
type Hooks struct {
	// OnFile fires for every file event, before the typed hook.
	OnFile       FileHook
	OnFileCreate FileHook
	OnFileChange FileHook
	OnFileDelete FileHook
	// OnReady runs after Ensure and the git baseline, before the watcher
	// starts. An error fails setup.
	OnReady func(ctx context.Context, h Handle) error
	// OnError is called with a run's error.
	OnError func(ctx context.Context, err error) error
	// OnDestroy runs after the sandbox is destroyed.
	OnDestroy func(ctx context.Context) error
}

// Typed returns the hook for the event type.
func (h *Hooks) Typed(t FileEventType) FileHook {
	switch t {
	case FileCreate:
		return h.OnFileCreate
	case FileChange:
		return h.OnFileChange
	case FileDelete:
		return h.OnFileDelete
	}
	return nil
}

// HasFileHooks reports whether any file hook is set.
func (h *Hooks) HasFileHooks() bool {
	return h.OnFile != nil || h.OnFileCreate != nil || h.OnFileChange != nil || h.OnFileDelete != nil
}

// DispatchFile runs OnFile and then the typed hook for e, in turn. A hook
// that fails or panics is logged at error level ("sandbox file hook failed")
// and the next hook still runs.
func (h *Hooks) DispatchFile(ctx context.Context, e *FileContent, logger *slog.Logger) {
	logger = orDiscard(logger)
	for _, fn := range []FileHook{h.OnFile, h.Typed(e.Type)} {
		if fn == nil {
			continue
		}
		if err := callHook(ctx, fn, e.Event()); err != nil {
			logError(logger, "sandbox file hook failed", "path", e.Path, "type", string(e.Type), "error", err)
		}
	}
}

func callHook(ctx context.Context, fn FileHook, e chat.FileEvent) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("hook panicked: %v", r)
		}
	}()
	return fn(ctx, e)
}

// Runtime is the engine's sink for file events (the chat engine implements
// it; see the WithSandbox middleware).
type Runtime interface {
	// Emit receives every enriched event, synchronously, in event order.
	Emit(ctx context.Context, e chat.FileEvent)
	// EmitFileDiff receives the diff of an event, after its Emit, even
	// when the diff is "".
	EmitFileDiff(ctx context.Context, path, diff string)
}

// DispatcherOptions configures a Dispatcher.
type DispatcherOptions struct {
	Hooks   Hooks
	Runtime Runtime // optional
	// Diff computes e.Diff for each event and passes it to
	// Runtime.EmitFileDiff.
	Diff   bool
	Logger *slog.Logger
}

// Dispatcher delivers enriched file events to the sandbox-scoped hooks and
// the runtime without ever blocking the watcher. Hooks run on one goroutine,
// in event order; diffs are computed on another, in event order. Close waits
// for everything in flight.
type Dispatcher struct {
	opts  DispatcherOptions
	ctx   context.Context
	hooks *serialQueue
	diffs *serialQueue
}

// NewDispatcher starts a dispatcher. ctx is handed to hooks and accessors;
// it should outlive the run's cancellation (the engine passes a context
// detached from the request) so teardown can drain.
func NewDispatcher(ctx context.Context, opts DispatcherOptions) *Dispatcher {
	opts.Logger = orDiscard(opts.Logger)
	return &Dispatcher{opts: opts, ctx: ctx, hooks: newSerialQueue(), diffs: newSerialQueue()}
}

// Dispatch delivers e. It returns at once.
func (d *Dispatcher) Dispatch(e *FileContent) {
	if d.opts.Hooks.HasFileHooks() {
		d.hooks.push(func() { d.opts.Hooks.DispatchFile(d.ctx, e, d.opts.Logger) })
	}
	if d.opts.Runtime != nil {
		d.opts.Runtime.Emit(d.ctx, e.Event())
		if d.opts.Diff {
			d.diffs.push(func() {
				defer func() {
					if r := recover(); r != nil {
						logWarn(d.opts.Logger, "sandbox file diff emit failed", "path", e.Path, "error", fmt.Sprint(r))
					}
				}()
				d.opts.Runtime.EmitFileDiff(d.ctx, e.Path, e.Diff(d.ctx))
			})
		}
	}
}

// Close waits for every queued hook and diff, then stops the goroutines.
// Dispatch must not be called after Close.
func (d *Dispatcher) Close() {
	d.hooks.close()
	d.diffs.close()
}

// serialQueue runs pushed functions one at a time, in order, on its own
// goroutine (started lazily). It never blocks push.
type serialQueue struct {
	mu      sync.Mutex
	items   []func()
	running bool
	closed  bool
	idle    chan struct{} // closed when the worker exits with nothing queued
}

func newSerialQueue() *serialQueue {
	idle := make(chan struct{})
	close(idle)
	return &serialQueue{idle: idle}
}

func (q *serialQueue) push(fn func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.items = append(q.items, fn)
	if !q.running {
		q.running = true
		q.idle = make(chan struct{})
		go q.work(q.idle)
	}
}

func (q *serialQueue) work(idle chan struct{}) {
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			q.running = false
			close(idle)
			q.mu.Unlock()
			return
		}
		fn := q.items[0]
		q.items[0] = nil
		q.items = q.items[1:]
		q.mu.Unlock()
		fn()
	}
}

func (q *serialQueue) close() {
	q.mu.Lock()
	q.closed = true
	idle := q.idle
	q.mu.Unlock()
	<-idle
}
