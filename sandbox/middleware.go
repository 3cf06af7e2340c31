package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// MiddlewareName is the name of the WithSandbox middleware.
const MiddlewareName = "sandbox"

// Capabilities of the chat capability bus.
var (
	// HandleCapability is the run's sandbox handle. WithSandbox provides
	// it; harness adapters require it (chat.CapabilityRequirer), so a
	// harness run without WithSandbox fails before any model call.
	HandleCapability = chat.NewCapability[Handle]("sandbox")
	// InstanceStoreCapability and LocksCapability are read by WithSandbox
	// when its Options leave Store or Locks nil; another middleware may
	// provide them (for example a shared, persistent store).
	InstanceStoreCapability = chat.NewCapability[InstanceStore]("sandbox-instance-store")
	LocksCapability         = chat.NewCapability[Locker]("sandbox-locks")
	// DetachableRunCapability is provided on durable runs only (Options.Runs
	// and Options.Durability both set).
	DetachableRunCapability = chat.NewCapability[*DetachableRun]("sandbox-detachable-run")
)

// Options configures WithSandbox.
type Options struct {
	// Store and Locks override the instance store and key locks; when nil
	// they come from InstanceStoreCapability and LocksCapability, and
	// otherwise the Sandbox's own in-memory ones are used.
	Store InstanceStore
	Locks Locker
	// Runs and Durability together make runs durable: an abort that is not
	// a cancel (the client went away) detaches the run instead of
	// destroying its sandbox. Setting only one of them leaves runs
	// non-durable, as upstream.
	Runs       durable.RunStore
	Durability *Durability
	// Tenant scopes the sandbox key. The default reads "userId" and
	// "orgId" strings from a map UserContext (see TenantFromUserContext).
	Tenant func(c *chat.Context) *Tenant
	// Watch tunes the watcher (Mode, Interval, Coalesce, Ignore). Root,
	// OnEvent and Logger are set by WithSandbox.
	Watch WatchOptions
}

// Durability configures durable runs.
type Durability struct {
	// NoDetach destroys the sandbox of a durable run whose client went
	// away, like any other abort (upstream detachOnDisconnect: false).
	NoDetach bool
}

// DetachableRun reports whether a durable run detached from its client.
type DetachableRun struct {
	detached atomic.Bool
	key      string
}

// Detached reports whether the run detached: its sandbox was kept and the
// run record carries DetachedSince and SandboxKey.
func (d *DetachableRun) Detached() bool { return d.detached.Load() }

// SandboxKey is the key of the run's sandbox.
func (d *DetachableRun) SandboxKey() string { return d.key }

// TenantFromUserContext reads the tenant from a map[string]any or
// map[string]string UserContext ("userId", "orgId"), or returns a *Tenant
// or Tenant UserContext as is. It returns nil when there is none.
func TenantFromUserContext(c *chat.Context) *Tenant {
	var t Tenant
	switch u := c.UserContext.(type) {
	case *Tenant:
		return u
	case Tenant:
		return &u
	case map[string]any:
		t.UserID, _ = u["userId"].(string)
		t.OrgID, _ = u["orgId"].(string)
	case map[string]string:
		t.UserID, t.OrgID = u["userId"], u["orgId"]
	}
	if t == (Tenant{}) {
		return nil
	}
	return &t
}

// WithSandbox returns the chat middleware (named "sandbox") that gives every
// run the sandbox s defines:
//
//   - Setup ensures the sandbox for the run's thread (or run, with
//     ReusePerRun), provides HandleCapability, takes the git baseline once,
//     calls Hooks.OnReady and, unless FileEvents is FileEventsOff, starts
//     the workspace watcher.
//   - Each file event goes to the Definition's sandbox-scoped hooks and to
//     the engine's chat.SandboxRuntime, which runs every middleware's
//     run-scoped Sandbox hooks and streams a CUSTOM "sandbox.file" event;
//     with FileEventsWithDiff a "sandbox.file.diff" event follows it.
//     Hook failures and panics are logged and isolated.
//   - OnFinish, OnAbort and OnError stop the watcher and drain it: every
//     event and diff of a change made before the hook ran is emitted
//     before it returns, so it reaches the stream.
//   - Teardown follows the lifecycle: a finished run destroys the sandbox
//     only with DestroyOnComplete, an error likewise, an abort always
//     (unless a durable run detaches). Hooks.OnDestroy follows every
//     destroy; Hooks.OnError receives the run's error.
//
// Logs go to the run's debug logger (category "sandbox" for watcher
// start/stop, dispatch and lifecycle transitions; warnings and errors under
// "errors") and to the Definition's Logger, if set.
func WithSandbox(s *Sandbox, opts Options) *chat.Middleware {
	m := &sandboxMiddleware{s: s, opts: opts, run: chat.NewCapability[*runState]("sandbox.run-state")}
	return &chat.Middleware{
		Name:             MiddlewareName,
		Provides:         []chat.CapabilityKey{HandleCapability},
		OptionalRequires: []chat.CapabilityKey{InstanceStoreCapability, LocksCapability},
		Setup:            m.setup,
		OnChunk:          m.onChunk,
		ChunkTypes:       []agui.EventType{agui.RunFinished}, // an interrupt's pause
		OnFinish:         m.onFinish,
		OnAbort:          m.onAbort,
		OnError:          m.onError,
	}
}

type sandboxMiddleware struct {
	s    *Sandbox
	opts Options
	run  *chat.Capability[*runState] // private: each run's state (chat's per-run state idiom)
}

func (m *sandboxMiddleware) durable() bool { return m.opts.Runs != nil && m.opts.Durability != nil }

func (m *sandboxMiddleware) state(c *chat.Context) *runState {
	st, _ := m.run.GetOptional(c)
	return st
}

// runState is one run's sandbox. Its fields are used by the run's hooks,
// which the engine calls one at a time, and by the deferred release after
// them.
type runState struct {
	m    *sandboxMiddleware
	rc   RunContext
	key  string
	log  *slog.Logger
	hctx context.Context // the run's values, never cancelled: hooks, accessors, teardown

	handle Handle
	shared *sharedWatch // the sandbox's watcher, shared with other runs
	disp   *Dispatcher  // this run's runtime events and diffs
	sink   *runtimeSink

	detach    *DetachableRun
	destroyed bool
	// destroyAtRelease is the phase of a destroy put off until the engine
	// has run every run-scoped hook (see onAbort).
	destroyAtRelease string
}

// runtimeSink adapts the engine's SandboxRuntime to the Dispatcher. Once
// closed (the run is over) it drops events.
type runtimeSink struct {
	rt     chat.SandboxRuntime
	closed atomic.Bool
}

func (k *runtimeSink) Emit(_ context.Context, e chat.FileEvent) {
	if k.closed.Load() {
		return
	}
	k.rt.Emit(e)
}

func (k *runtimeSink) EmitFileDiff(_ context.Context, path, diff string) {
	if k.closed.Load() {
		return
	}
	k.rt.EmitFileDiff(path, diff)
}

var _ chat.FileContent = (*FileContent)(nil)

func (m *sandboxMiddleware) setup(c *chat.Context) error {
	st := &runState{m: m, log: newRunLogger(c.Logger(), m.s.def.Logger), hctx: context.WithoutCancel(c)}
	// Provided before Ensure: the terminal hooks must find the run
	// however far setup got.
	m.run.Provide(c, st)
	c.Defer(func(context.Context) error {
		// Normally drained by a terminal hook (or the pause); this only
		// stops what nothing else did, without emitting: the run is over.
		if st.sink != nil {
			st.sink.closed.Store(true)
		}
		st.drain("release")
		if st.destroyAtRelease != "" {
			if err := st.destroy(st.destroyAtRelease); err != nil {
				logWarn(st.log, "sandbox destroy failed", "phase", st.destroyAtRelease, "error", err)
			}
		}
		return nil
	})

	st.rc = RunContext{ThreadID: c.ThreadID, RunID: c.RunID, Store: m.opts.Store, Locks: m.opts.Locks, Adapter: c.Provider}
	if st.rc.Store == nil {
		st.rc.Store, _ = InstanceStoreCapability.GetOptional(c)
	}
	if st.rc.Locks == nil {
		st.rc.Locks, _ = LocksCapability.GetOptional(c)
	}
	tenant := m.opts.Tenant
	if tenant == nil {
		tenant = TenantFromUserContext
	}
	st.rc.Tenant = tenant(c)
	st.key = m.s.Key(st.rc)

	if m.durable() {
		st.detach = &DetachableRun{key: st.key}
		ctx, cancel := context.WithTimeout(st.hctx, DestroyTimeout)
		_, err := m.opts.Runs.CreateOrResume(ctx, durable.RunRecord{RunID: c.RunID, ThreadID: c.ThreadID, StartedAt: time.Now()})
		cancel()
		if err != nil {
			logWarn(st.log, "sandbox run record pre-create failed", "runId", c.RunID, "error", err)
		}
		DetachableRunCapability.Provide(c, st.detach)
		if !m.opts.Durability.NoDetach {
			// The client may leave while the run goes on (durable delivery):
			// record the detach now, as bookkeeping only; nothing is
			// destroyed and the run finishes its work.
			if d, ok := chat.RunDisconnectCapability.GetOptional(c); ok {
				runID := c.RunID
				d.Subscribe(func(ctx context.Context) error {
					if st.cancelled(runID, chat.AbortInfo{}) {
						return nil
					}
					wctx, cancel := context.WithTimeout(ctx, DestroyTimeout)
					defer cancel()
					if err := m.opts.Runs.Update(wctx, runID, durable.RunPatch{
						DetachedSince: durable.Set(time.Now()),
						SandboxKey:    durable.Set(st.key),
					}); err != nil {
						return fmt.Errorf("sandbox: recording the detach of run %s: %w", runID, err)
					}
					st.detach.detached.Store(true)
					logDebug(st.log, "sandbox run detached on disconnect", "runId", runID, "key", st.key)
					return nil
				})
			}
		}
	}

	logDebug(st.log, "sandbox ensuring", "id", m.s.def.ID, "key", st.key, "threadId", c.ThreadID, "runId", c.RunID)
	h, outcome, err := m.s.Ensure(c, st.rc)
	if err != nil {
		return err
	}
	st.handle = h
	logDebug(st.log, "sandbox ensured", "outcome", string(outcome), "sandbox", h.ID(), "key", st.key)
	if err := st.ready(c); err != nil {
		st.drain("setup")
		if derr := st.destroy("setup"); derr != nil {
			logWarn(st.log, "sandbox destroy after setup failure failed", "error", derr)
		}
		return err
	}
	return nil
}

// ready is setup after Ensure; a failure destroys the sandbox.
func (st *runState) ready(c *chat.Context) error {
	m, def := st.m, &st.m.s.def
	HandleCapability.Provide(c, st.handle)
	if m.durable() {
		if _, inMemory := st.rc.Locks.(*MemoryLocks); st.rc.Locks == nil || inMemory {
			logWarn(st.log, "sandbox durability is wired over an InMemoryLockStore: a second process can drive the same run; use a shared Locker")
		}
	}
	root := def.Root()
	if !def.FileEvents.Enabled() {
		Baseline(c, st.handle, root, st.log)
		if err := st.onReady(c); err != nil {
			return err
		}
		logDebug(st.log, "sandbox file events off: no watcher", "root", root)
		return nil
	}
	// One watcher per live sandbox: the first run takes the session
	// baseline and starts it, later runs subscribe to it.
	st.shared = m.s.watches.acquire(st.key)
	st.shared.baseline(func() string { return Baseline(c, st.handle, root, st.log) })
	if err := st.onReady(c); err != nil {
		return err
	}
	if rt, err := chat.SandboxRuntimeCapability.Get(c); err == nil {
		st.sink = &runtimeSink{rt: rt}
		st.disp = NewDispatcher(st.hctx, DispatcherOptions{Runtime: st.sink, Diff: def.FileEvents.Diff(), Logger: st.log})
		st.shared.subscribe(st.disp)
	}
	// The watch outlives this run when others share it: its context is
	// the sandbox's, not the run's.
	if err := st.shared.start(context.WithoutCancel(st.hctx), st.handle, def, m.opts.Watch, st.log); err != nil {
		return fmt.Errorf("sandbox: watch: %w", err)
	}
	logDebug(st.log, "sandbox watcher started", "root", root, "diff", def.FileEvents.Diff(), "mode", st.shared.mode().String())
	return nil
}

func (st *runState) onReady(c *chat.Context) error {
	if fn := st.m.s.def.Hooks.OnReady; fn != nil {
		if err := safeCall(func() error { return fn(c, st.handle) }); err != nil {
			return fmt.Errorf("sandbox: onReady: %w", err)
		}
	}
	logDebug(st.log, "sandbox ready", "sandbox", st.handle.ID())
	return nil
}

// drain lets the run go of the sandbox's watcher: every change made
// before it was called is delivered to the run (its hooks, events and
// diffs), and the last run to let go stops the watcher. It is idempotent.
func (st *runState) drain(phase string) {
	if st.shared != nil {
		ctx, cancel := context.WithTimeout(st.hctx, DrainTimeout)
		if err := st.shared.release(ctx, st.disp); err != nil {
			logWarn(st.log, "sandbox watcher stop failed", "phase", phase, "error", err)
		}
		cancel()
		st.shared = nil
	}
	if st.disp != nil {
		st.disp.Close()
		st.disp = nil
		logDebug(st.log, "sandbox watcher stopped", "phase", phase)
	}
}

// destroy destroys the run's sandbox once and then calls OnDestroy.
func (st *runState) destroy(phase string) error {
	if st.handle == nil || st.destroyed {
		return nil
	}
	st.m.s.watches.destroyed(st.key)
	if err := st.m.s.Destroy(st.hctx, st.rc); err != nil {
		return err
	}
	st.destroyed = true
	logDebug(st.log, "sandbox destroyed", "phase", phase, "sandbox", st.handle.ID())
	if fn := st.m.s.def.Hooks.OnDestroy; fn != nil {
		if err := safeCall(func() error { return fn(st.hctx) }); err != nil {
			return fmt.Errorf("sandbox: onDestroy: %w", err)
		}
	}
	return nil
}

// onChunk drains the watcher when the run pauses on an interrupt: no
// terminal hook follows, and the resumed run starts its own watcher.
func (m *sandboxMiddleware) onChunk(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
	if ev.Type == agui.RunFinished && ev.Outcome != nil && ev.Outcome.Type == "interrupt" {
		if st := m.state(c); st != nil {
			st.drain("pause")
		}
	}
	return chat.Pass, nil
}

func (m *sandboxMiddleware) onFinish(c *chat.Context, _ chat.FinishInfo) error {
	st := m.state(c)
	if st == nil || st.handle == nil {
		return nil
	}
	st.drain("finish")
	destroy := m.s.def.Lifecycle.DestroyOnComplete
	err := st.afterRunSnapshot(c.RunID)
	if err == nil && destroy {
		err = st.destroy("finish")
	}
	if err != nil && destroy && !st.destroyed {
		if derr := st.destroy("finish"); derr != nil {
			logWarn(st.log, "sandbox destroy after terminal failure failed", "error", derr)
		}
	}
	if !destroy {
		logDebug(st.log, "sandbox kept", "phase", "finish", "sandbox", st.handle.ID())
	}
	return err
}

// afterRunSnapshot takes the "after-run-<runId>" snapshot of
// SnapshotAfterRun and records it.
func (st *runState) afterRunSnapshot(runID string) error {
	s := st.m.s
	if s.def.Lifecycle.Snapshot != SnapshotAfterRun {
		return nil
	}
	sn, ok := st.handle.(Snapshotter)
	if !ok || !st.handle.Capabilities().Snapshots {
		logWarn(st.log, "sandbox after-run snapshot skipped: the provider has no snapshots", "provider", st.handle.Provider())
		return nil
	}
	ctx, cancel := context.WithTimeout(st.hctx, DestroyTimeout)
	defer cancel()
	snap, err := sn.Snapshot(ctx, "after-run-"+runID)
	if err != nil {
		return fmt.Errorf("sandbox: after-run snapshot: %w", err)
	}
	store, _ := s.storeLocks(st.rc)
	rec, err := store.Get(ctx, st.key)
	if err != nil {
		return fmt.Errorf("sandbox: store get: %w", err)
	}
	if rec == nil {
		return nil
	}
	rec.LatestSnapshotID, rec.UpdatedAt = snap.ID, s.now()
	if err := store.Upsert(ctx, *rec); err != nil {
		return fmt.Errorf("sandbox: store upsert: %w", err)
	}
	logDebug(st.log, "sandbox snapshot taken", "phase", "after-run", "snapshot", snap.ID)
	return nil
}

func (m *sandboxMiddleware) onAbort(c *chat.Context, info chat.AbortInfo) error {
	st := m.state(c)
	if st == nil {
		return nil
	}
	st.drain("abort")
	if st.handle == nil {
		return nil
	}
	if m.durable() && !m.opts.Durability.NoDetach && !st.cancelled(c.RunID, info) {
		ctx, cancel := context.WithTimeout(st.hctx, DestroyTimeout)
		err := m.opts.Runs.Update(ctx, c.RunID, durable.RunPatch{
			DetachedSince: durable.Set(time.Now()),
			SandboxKey:    durable.Set(st.key),
		})
		cancel()
		if err == nil {
			st.detach.detached.Store(true)
			logDebug(st.log, "sandbox run detached", "runId", c.RunID, "key", st.key)
			return nil
		}
		logWarn(st.log, "sandbox detach record write failed", "runId", c.RunID, "error", err)
	}
	// Run-scoped hooks may still be reading content (the accessors outlive
	// the run's cancellation): the engine runs them to the end before the
	// run's deferred release, which destroys the sandbox.
	st.destroyAtRelease = "abort"
	return nil
}

// cancelled reports whether an abort was a user's cancel, which never
// detaches: from the abort itself or from the run store (a failed read
// counts as not cancelled).
func (st *runState) cancelled(runID string, info chat.AbortInfo) bool {
	if info.CancelRequested {
		return true
	}
	ctx, cancel := context.WithTimeout(st.hctx, DestroyTimeout)
	defer cancel()
	rec, err := st.m.opts.Runs.Get(ctx, runID)
	return err == nil && rec.CancelRequested != nil && *rec.CancelRequested
}

func (m *sandboxMiddleware) onError(c *chat.Context, info chat.ErrorInfo) error {
	st := m.state(c)
	if st == nil {
		return nil
	}
	st.drain("error")
	var errs []error
	if fn := m.s.def.Hooks.OnError; fn != nil {
		if err := safeCall(func() error { return fn(st.hctx, info.Err) }); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: onError: %w", err))
		}
	}
	// Unlike upstream, a failing OnError does not skip the destroy.
	if m.s.def.Lifecycle.DestroyOnComplete {
		errs = append(errs, st.destroy("error"))
	} else if st.handle != nil && !st.destroyed {
		logDebug(st.log, "sandbox kept", "phase", "error", "sandbox", st.handle.ID())
	}
	return errors.Join(errs...)
}

// safeCall runs a lifecycle hook, turning a panic into an error so the
// middleware can still clean up.
func safeCall(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}
