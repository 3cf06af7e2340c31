package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/goai-sdk/goai/durable"
)

// ReclaimOutcome is what Reclaim did with a run's sandbox.
type ReclaimOutcome string

const (
	// ReclaimNoSandboxKey: the run record names no sandbox.
	ReclaimNoSandboxKey ReclaimOutcome = "no-sandbox-key"
	// ReclaimNotFound: the instance store has no record for the key.
	ReclaimNotFound ReclaimOutcome = "not-found"
	// ReclaimProviderMismatch: the record belongs to another provider;
	// nothing was touched.
	ReclaimProviderMismatch ReclaimOutcome = "provider-mismatch"
	// ReclaimDestroyed: the sandbox was destroyed and its record deleted.
	ReclaimDestroyed ReclaimOutcome = "destroyed"
	// ReclaimDestroyFailed: the provider failed to destroy the sandbox;
	// the record was deleted all the same (nothing would ever retry it).
	ReclaimDestroyFailed ReclaimOutcome = "destroy-failed"
)

// Reclaim releases the sandbox recorded under key in store through p, for
// a run whose producer is gone (a reclaimed or expired run): it destroys
// the sandbox and then always deletes the record. A record of another
// provider is left alone. The error is the provider's destroy error (with
// ReclaimDestroyFailed) or a store failure. It runs under a fresh
// DestroyTimeout, keeping only ctx's values.
func Reclaim(ctx context.Context, store InstanceStore, p Provider, key string) (ReclaimOutcome, error) {
	if key == "" {
		return ReclaimNoSandboxKey, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DestroyTimeout)
	defer cancel()
	rec, err := store.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("sandbox: reclaim %s: store get: %w", key, err)
	}
	if rec == nil {
		return ReclaimNotFound, nil
	}
	if rec.Provider != p.Name() {
		return ReclaimProviderMismatch, nil
	}
	destroyErr := p.Destroy(ctx, rec.ProviderSandboxID)
	if err := store.Delete(ctx, key); err != nil {
		return "", errors.Join(destroyErr, fmt.Errorf("sandbox: reclaim %s: store delete: %w", key, err))
	}
	if destroyErr != nil {
		return ReclaimDestroyFailed, fmt.Errorf("sandbox: reclaim %s: destroy %q: %w", key, rec.ProviderSandboxID, destroyErr)
	}
	return ReclaimDestroyed, nil
}

// ReclaimRun is Reclaim for a durable run record (its SandboxKey) with the
// Sandbox's provider and its instance store (store, when not nil, replaces
// the Sandbox's own in-memory one, as RunContext.Store does). Its
// signature, without the outcome, is what server.Recovery.ReleaseSandbox
// takes:
//
//	Recovery{ReleaseSandbox: func(ctx context.Context, rec durable.RunRecord) error {
//		_, err := s.ReclaimRun(ctx, rec, store)
//		return err
//	}}
//
// Hooks.OnDestroy runs after a destroy.
func (s *Sandbox) ReclaimRun(ctx context.Context, rec durable.RunRecord, store InstanceStore) (ReclaimOutcome, error) {
	if rec.SandboxKey == nil || *rec.SandboxKey == "" {
		return ReclaimNoSandboxKey, nil
	}
	if store == nil {
		store = &s.store
	}
	key := *rec.SandboxKey
	s.watches.destroyed(key)
	out, err := Reclaim(ctx, store, s.def.Provider, key)
	logDebug(s.logger, "sandbox reclaimed", "runId", rec.RunID, "key", key, "outcome", string(out))
	if out == ReclaimDestroyed {
		if fn := s.def.Hooks.OnDestroy; fn != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DestroyTimeout)
			defer cancel()
			if herr := safeCall(func() error { return fn(dctx) }); herr != nil {
				err = errors.Join(err, fmt.Errorf("sandbox: onDestroy: %w", herr))
			}
		}
	}
	return out, err
}
