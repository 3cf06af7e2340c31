package sandbox

import (
	"context"
	"log/slog"
	"sync"
)

// A live sandbox has one watcher and one dispatcher for its sandbox-scoped
// hooks, however many runs use it: the first run that gets ready starts
// them, each run subscribes its own dispatcher (the engine's runtime, its
// sandbox.file events and diffs), and the last run to let go stops them, as
// does a destroy. Sandbox-scoped hooks therefore fire once per file event,
// and every run still sees every event that happened while it was
// subscribed.

// watchRegistry holds the shared watches of one Sandbox, by sandbox key.
type watchRegistry struct {
	mu      sync.Mutex
	watches map[string]*sharedWatch
}

// sharedWatch is the watcher of one live sandbox.
type sharedWatch struct {
	reg *watchRegistry
	key string

	refs int // guarded by reg.mu

	baseOnce sync.Once
	base     string

	startMu sync.Mutex // serializes start and stop
	watcher *Watcher
	hooks   *Dispatcher // sandbox-scoped hooks only
	stopped bool

	mu   sync.Mutex
	subs []*Dispatcher
}

// acquire returns the shared watch of key, counting one more user.
func (r *watchRegistry) acquire(key string) *sharedWatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watches == nil {
		r.watches = map[string]*sharedWatch{}
	}
	sw := r.watches[key]
	if sw == nil {
		sw = &sharedWatch{reg: r, key: key}
		r.watches[key] = sw
	}
	sw.refs++
	return sw
}

// live is the number of running shared watchers.
func (r *watchRegistry) live() int {
	r.mu.Lock()
	all := make([]*sharedWatch, 0, len(r.watches))
	for _, sw := range r.watches {
		all = append(all, sw)
	}
	r.mu.Unlock()
	n := 0
	for _, sw := range all {
		sw.startMu.Lock()
		if sw.watcher != nil && !sw.stopped {
			n++
		}
		sw.startMu.Unlock()
	}
	return n
}

// baseline returns the session baseline, captured by the first caller.
func (sw *sharedWatch) baseline(capture func() string) string {
	sw.baseOnce.Do(func() { sw.base = capture() })
	return sw.base
}

// start starts the watcher and the hooks dispatcher unless they run. ctx
// must not be a run's cancellable context: the watch outlives the run that
// started it.
func (sw *sharedWatch) start(ctx context.Context, h Handle, def *Definition, wopts WatchOptions, log *slog.Logger) error {
	sw.startMu.Lock()
	defer sw.startMu.Unlock()
	if sw.watcher != nil || sw.stopped {
		return nil
	}
	root := def.Root()
	if def.Hooks.HasFileHooks() {
		sw.hooks = NewDispatcher(ctx, DispatcherOptions{Hooks: def.Hooks, Logger: log})
	}
	hooks, base := sw.hooks, sw.base
	wopts.Root, wopts.Logger = root, log
	wopts.OnEvent = func(ev WatchEvent) {
		content := NewFileContent(h, root, base, ev, log)
		if hooks != nil {
			hooks.Dispatch(content)
		}
		sw.mu.Lock()
		subs := sw.subs
		sw.mu.Unlock()
		for _, d := range subs {
			d.Dispatch(content)
		}
	}
	w, err := WatchWorkspace(ctx, h, wopts)
	if err != nil {
		if sw.hooks != nil {
			sw.hooks.Close()
			sw.hooks = nil
		}
		return err
	}
	sw.watcher = w
	return nil
}

// mode is the watcher's mode.
func (sw *sharedWatch) mode() WatchMode {
	sw.startMu.Lock()
	defer sw.startMu.Unlock()
	if sw.watcher == nil {
		return WatchAuto
	}
	return sw.watcher.Mode()
}

// subscribe adds a run's dispatcher; it receives every later event.
func (sw *sharedWatch) subscribe(d *Dispatcher) {
	sw.mu.Lock()
	// Copy on write: the watcher iterates a snapshot without the lock.
	sw.subs = append(sw.subs[:len(sw.subs):len(sw.subs)], d)
	sw.mu.Unlock()
}

func (sw *sharedWatch) unsubscribe(d *Dispatcher) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	out := make([]*Dispatcher, 0, len(sw.subs))
	for _, s := range sw.subs {
		if s != d {
			out = append(out, s)
		}
	}
	sw.subs = out
}

// release lets one run go. Before it unsubscribes d (which may be nil), the
// workspace is reconciled, so d receives every change made before release
// was called; the last run's release drains and stops the watcher and
// waits for the sandbox-scoped hooks. It returns the watcher's stop error.
func (sw *sharedWatch) release(ctx context.Context, d *Dispatcher) error {
	sw.reg.mu.Lock()
	sw.refs--
	last := sw.refs == 0
	if last && sw.reg.watches[sw.key] == sw {
		delete(sw.reg.watches, sw.key)
	}
	sw.reg.mu.Unlock()
	var err error
	if last {
		err = sw.stop(true)
	} else {
		sw.startMu.Lock()
		w := sw.watcher
		sw.startMu.Unlock()
		if w != nil {
			err = w.Sync(ctx)
		}
	}
	if d != nil {
		sw.unsubscribe(d)
	}
	return err
}

// stop stops the watcher (after a final reconciliation when drain) and
// waits for the sandbox-scoped hooks. Later starts do nothing.
func (sw *sharedWatch) stop(drain bool) error {
	sw.startMu.Lock()
	defer sw.startMu.Unlock()
	if sw.stopped {
		return nil
	}
	sw.stopped = true
	var err error
	if sw.watcher != nil {
		if drain {
			err = sw.watcher.Drain()
		} else {
			err = sw.watcher.Stop()
		}
	}
	if sw.hooks != nil {
		sw.hooks.Close()
	}
	return err
}

// destroyed stops the watch of key, if any, because its sandbox is being
// destroyed: the runs still holding it get no more events.
func (r *watchRegistry) destroyed(key string) {
	r.mu.Lock()
	sw := r.watches[key]
	delete(r.watches, key)
	r.mu.Unlock()
	if sw != nil {
		_ = sw.stop(false)
	}
}
