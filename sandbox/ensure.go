package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Sandbox is a defined sandbox: a Definition plus the in-memory store and
// locks used when a RunContext supplies none. Unlike TanStack's
// process-global fallback, the fallback is per Sandbox, so two definitions
// never collide.
type Sandbox struct {
	def    Definition
	store  MemoryStore
	locks  MemoryLocks
	logger *slog.Logger
	now    func() time.Time

	watches watchRegistry // the live sandboxes' shared watchers
}

// Define returns a Sandbox for def. It creates nothing.
func Define(def Definition) (*Sandbox, error) {
	if def.ID == "" {
		return nil, errors.New("sandbox: Definition.ID is required")
	}
	if def.Provider == nil {
		return nil, errors.New("sandbox: Definition.Provider is required")
	}
	return &Sandbox{def: def, logger: orDiscard(def.Logger), now: time.Now}, nil
}

// LiveWatchers is the number of workspace watchers running for this
// definition's live sandboxes: one per sandbox with file events on and a
// run using it, however many runs share it.
func (s *Sandbox) LiveWatchers() int { return s.watches.live() }

// Definition returns the definition.
func (s *Sandbox) Definition() *Definition { return &s.def }

// Key is the compound key of the sandbox for rc: it changes with the thread
// (and run under ReusePerRun), id, provider, tenant and workspace, but not
// with secret values.
func (s *Sandbox) Key(rc RunContext) string {
	thread := rc.ThreadID
	if s.def.Lifecycle.Reuse == ReusePerRun {
		thread += ":" + rc.RunID
	}
	var tenant any
	if rc.Tenant != nil {
		t := map[string]any{}
		if rc.Tenant.UserID != "" {
			t["userId"] = rc.Tenant.UserID
		}
		if rc.Tenant.OrgID != "" {
			t["orgId"] = rc.Tenant.OrgID
		}
		tenant = t
	}
	return fnv64(canonical(map[string]any{
		"threadId":      thread,
		"sandboxId":     s.def.ID,
		"providerName":  s.def.Provider.Name(),
		"workspaceHash": workspaceHash(s.def.Workspace),
		"tenant":        tenant,
	}))
}

func (s *Sandbox) storeLocks(rc RunContext) (InstanceStore, Locker) {
	var st InstanceStore = &s.store
	var lk Locker = &s.locks
	if rc.Store != nil {
		st = rc.Store
	}
	if rc.Locks != nil {
		lk = rc.Locks
	}
	return st, lk
}

// Outcome says how Ensure obtained the handle.
type Outcome string

const (
	OutcomeCreated        Outcome = "created"
	OutcomeResumed        Outcome = "resumed"
	OutcomeNativeRestored Outcome = "native-restored"
)

func (s *Sandbox) tooOld(rec *Record) bool {
	max := s.def.Lifecycle.SnapshotMaxAge
	return max > 0 && s.now().Sub(rec.UpdatedAt) > max
}

func (s *Sandbox) secrets() map[string]string {
	if s.def.Workspace == nil || len(s.def.Workspace.Secrets) == 0 {
		return nil
	}
	return s.def.Workspace.Secrets
}

func (s *Sandbox) reapplySecrets(h Handle) error {
	if sec := s.secrets(); sec != nil {
		if err := h.SetEnv(sec); err != nil {
			return fmt.Errorf("sandbox: re-apply secrets: %w", err)
		}
	}
	return nil
}

// Ensure returns the sandbox for rc: it resumes the recorded one, else
// restores its snapshot, else creates (and bootstraps) a new one, all under
// the per-key lock "sandbox:<key>".
func (s *Sandbox) Ensure(ctx context.Context, rc RunContext) (Handle, Outcome, error) {
	key := s.Key(rc)
	store, locks := s.storeLocks(rc)
	p := s.def.Provider
	var (
		h   Handle
		out Outcome
	)
	err := locks.WithLock(ctx, "sandbox:"+key, func(ctx context.Context) error {
		caps := p.Capabilities()
		snap := s.def.Lifecycle.Snapshot
		if snap == SnapshotDefault {
			snap = SnapshotNone
			if caps.Snapshots {
				snap = SnapshotAfterSetup
			}
		}
		rec, err := store.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("sandbox: store get: %w", err)
		}
		if rec != nil && !s.tooOld(rec) {
			rh, err := p.Resume(ctx, rec.ProviderSandboxID)
			if err != nil {
				return fmt.Errorf("sandbox: resume %q: %w", rec.ProviderSandboxID, err)
			}
			if rh != nil {
				if err := s.reapplySecrets(rh); err != nil {
					return err
				}
				r := *rec
				r.LatestRunID, r.UpdatedAt = rc.RunID, s.now()
				if err := store.Upsert(ctx, r); err != nil {
					return fmt.Errorf("sandbox: store upsert: %w", err)
				}
				h, out = rh, OutcomeResumed
				return nil
			}
			if rr, ok := p.(SnapshotRestorer); ok && rec.LatestSnapshotID != "" && caps.Snapshots {
				rh, err := rr.RestoreSnapshot(ctx, RestoreOptions{SnapshotID: rec.LatestSnapshotID, Workspace: s.def.Workspace, Env: s.secrets()})
				if err != nil {
					return fmt.Errorf("sandbox: restore snapshot %q: %w", rec.LatestSnapshotID, err)
				}
				if err := s.reapplySecrets(rh); err != nil {
					return err
				}
				r := *rec
				r.ProviderSandboxID, r.LatestRunID, r.UpdatedAt = rh.ID(), rc.RunID, s.now()
				if err := store.Upsert(ctx, r); err != nil {
					return fmt.Errorf("sandbox: store upsert: %w", err)
				}
				h, out = rh, OutcomeNativeRestored
				return nil
			}
		}
		nh, err := p.Create(ctx, CreateOptions{ID: key, Workspace: s.def.Workspace, Env: s.secrets(), Adapter: rc.Adapter})
		if err != nil {
			return fmt.Errorf("sandbox: create: %w", err)
		}
		if s.def.Workspace != nil {
			if _, err := Bootstrap(ctx, nh, s.def.Workspace, s.logger); err != nil {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				_ = nh.Destroy(dctx)
				cancel()
				return err
			}
		}
		r := Record{Key: key, Provider: p.Name(), ProviderSandboxID: nh.ID(), ThreadID: rc.ThreadID, LatestRunID: rc.RunID}
		if sn, ok := nh.(Snapshotter); ok && snap == SnapshotAfterSetup && caps.Snapshots {
			id, err := sn.Snapshot(ctx, "after-setup")
			if err != nil {
				return fmt.Errorf("sandbox: snapshot: %w", err)
			}
			r.LatestSnapshotID = id.ID
		}
		r.UpdatedAt = s.now()
		if err := store.Upsert(ctx, r); err != nil {
			return fmt.Errorf("sandbox: store upsert: %w", err)
		}
		h, out = nh, OutcomeCreated
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	logDebug(s.logger, "sandbox ensured", "key", key, "outcome", string(out), "id", h.ID())
	return h, out, nil
}

// EnsureExisting only resumes: it returns (nil, nil) when there is no
// record, the record is too old, or the sandbox is gone.
func (s *Sandbox) EnsureExisting(ctx context.Context, rc RunContext) (Handle, error) {
	key := s.Key(rc)
	store, locks := s.storeLocks(rc)
	var h Handle
	err := locks.WithLock(ctx, "sandbox:"+key, func(ctx context.Context) error {
		rec, err := store.Get(ctx, key)
		if err != nil || rec == nil || s.tooOld(rec) {
			return err
		}
		rh, err := s.def.Provider.Resume(ctx, rec.ProviderSandboxID)
		if err != nil || rh == nil {
			return err
		}
		if err := s.reapplySecrets(rh); err != nil {
			return err
		}
		h = rh
		return nil
	})
	return h, err
}

// Fork gives to (usually a new thread) a copy of the live sandbox of from:
// it snapshots from's sandbox and restores the snapshot into a new sandbox
// recorded under to's key, so Ensure(to) resumes it. It fails with an
// *UnsupportedCapabilityError when the provider cannot snapshot and
// restore, and when to already has a sandbox.
func (s *Sandbox) Fork(ctx context.Context, from, to RunContext) (Handle, error) {
	p := s.def.Provider
	rr, ok := p.(SnapshotRestorer)
	if !ok {
		return nil, &UnsupportedCapabilityError{Provider: p.Name(), Capability: "fork"}
	}
	src, err := s.EnsureExisting(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("sandbox: fork: %w", err)
	}
	if src == nil {
		return nil, fmt.Errorf("sandbox: fork: thread %q has no live sandbox", from.ThreadID)
	}
	sn, ok := src.(Snapshotter)
	if !ok {
		return nil, &UnsupportedCapabilityError{Provider: p.Name(), Capability: "fork"}
	}
	snap, err := sn.Snapshot(ctx, "fork")
	if err != nil {
		return nil, fmt.Errorf("sandbox: fork: %w", err)
	}
	key := s.Key(to)
	store, locks := s.storeLocks(to)
	var h Handle
	err = locks.WithLock(ctx, "sandbox:"+key, func(ctx context.Context) error {
		rec, err := store.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("sandbox: store get: %w", err)
		}
		if rec != nil {
			return fmt.Errorf("sandbox: fork: thread %q already has a sandbox", to.ThreadID)
		}
		nh, err := rr.RestoreSnapshot(ctx, RestoreOptions{SnapshotID: snap.ID, Workspace: s.def.Workspace, Env: s.secrets()})
		if err != nil {
			return fmt.Errorf("sandbox: fork: restore %q: %w", snap.ID, err)
		}
		if err := s.reapplySecrets(nh); err != nil {
			return err
		}
		if err := store.Upsert(ctx, Record{Key: key, Provider: p.Name(), ProviderSandboxID: nh.ID(), LatestSnapshotID: snap.ID,
			ThreadID: to.ThreadID, LatestRunID: to.RunID, UpdatedAt: s.now()}); err != nil {
			return fmt.Errorf("sandbox: store upsert: %w", err)
		}
		h = nh
		return nil
	})
	if err != nil {
		return nil, err
	}
	logDebug(s.logger, "sandbox forked", "from", from.ThreadID, "to", to.ThreadID, "snapshot", snap.ID, "id", h.ID())
	return h, nil
}

// Record returns the instance record of key from store, or from the
// Sandbox's own in-memory store when store is nil; nil when there is none.
// A sweeper uses it to tell live sandboxes from leftovers.
func (s *Sandbox) Record(ctx context.Context, key string, store InstanceStore) (*Record, error) {
	if store == nil {
		store = &s.store
	}
	return store.Get(ctx, key)
}

// DestroyTimeout bounds Destroy.
const DestroyTimeout = 60 * time.Second

// Destroy destroys the recorded sandbox, if any, and deletes its record. It
// runs under a fresh context (ctx's values, its own 60 s deadline): the
// caller's context is often the cancelled one that triggered teardown. If
// the provider fails, the record is kept.
func (s *Sandbox) Destroy(ctx context.Context, rc RunContext) error {
	key := s.Key(rc)
	store, _ := s.storeLocks(rc)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DestroyTimeout)
	defer cancel()
	rec, err := store.Get(dctx, key)
	if err != nil {
		return fmt.Errorf("sandbox: store get: %w", err)
	}
	if rec == nil {
		return nil
	}
	if err := s.def.Provider.Destroy(dctx, rec.ProviderSandboxID); err != nil {
		return fmt.Errorf("sandbox: destroy %q: %w", rec.ProviderSandboxID, err)
	}
	if err := store.Delete(dctx, key); err != nil {
		return fmt.Errorf("sandbox: store delete: %w", err)
	}
	return nil
}
