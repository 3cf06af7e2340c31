package durable

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
)

// Fence is the writer side of one claimed run: it fences appends and
// terminal record writes with the claim's epoch (fenceDurability and
// fenceRunStore upstream, docs/durable.md §5.2), with the check made by the store in the
// same transaction as the write.
//
// The first refusal latches: every later Append fails with the same
// *ClaimLostError without touching the store, so a recovery RUN_ERROR cannot
// slip through. Close, and the store's reads, are never fenced (a fenced
// close would park tailers forever).
type Fence struct {
	store  Store
	claim  Claim
	logger *slog.Logger

	// lost is the latched refusal: an atomic, since every queued append
	// (each paced token) asks for it.
	lost atomic.Pointer[ClaimLostError]
}

// NewFence returns the fenced writer for claim. A nil logger means
// slog.Default().
func NewFence(store Store, claim Claim, logger *slog.Logger) *Fence {
	if logger == nil {
		logger = slog.Default()
	}
	return &Fence{store: store, claim: claim, logger: logger}
}

// Claim returns the claim the fence holds.
func (f *Fence) Claim() Claim { return f.claim }

// Lost returns the *ClaimLostError once the claim is known to be lost, else
// nil.
func (f *Fence) Lost() error {
	if lost := f.lost.Load(); lost != nil {
		return lost
	}
	return nil
}

func (f *Fence) latch(err error) error {
	var lost *ClaimLostError
	if !errors.As(err, &lost) {
		return err
	}
	if f.lost.CompareAndSwap(nil, lost) {
		f.logger.Warn("durable: run claim lost", "run_id", f.claim.RunID, "held_epoch", lost.Held, "observed_epoch", lost.Observed)
	}
	return f.lost.Load()
}

// Append appends batch to the run's log if the claim still holds.
func (f *Fence) Append(ctx context.Context, batch [][]byte) ([]string, error) {
	return f.AppendWith(ctx, batch, Producer{})
}

// AppendWith is Append with a producer tuple for idempotent retries.
func (f *Fence) AppendWith(ctx context.Context, batch [][]byte, p Producer) ([]string, error) {
	if err := f.Lost(); err != nil {
		return nil, err
	}
	offs, err := f.store.AppendWith(ctx, f.claim.RunID, batch, AppendOptions{Producer: p, Epoch: f.claim.Epoch})
	if err != nil {
		return nil, f.latch(err)
	}
	return offs, nil
}

// QueueAppends returns a function that queues an append to the claimed
// run's log (QueuedAppender.AppendQueued), fenced as Append is, with take
// and done; nil when the store does not queue appends.
func (f *Fence) QueueAppends(take func() [][]byte, done func(error) bool) func() {
	q, ok := f.store.(QueuedAppender)
	if !ok {
		return nil
	}
	latched := func(err error) bool {
		if err != nil {
			err = f.latch(err)
		}
		return done(err)
	}
	opts := AppendOptions{Epoch: f.claim.Epoch}
	return func() {
		if err := f.Lost(); err != nil {
			done(err)
			return
		}
		q.AppendQueued(f.claim.RunID, opts, take, latched)
	}
}

// Close closes the run's log, unfenced.
func (f *Fence) Close(ctx context.Context) error {
	return f.store.Close(ctx, f.claim.RunID)
}

// Update writes patch to the run's record. A patch that sets a terminal
// status is fenced: after the claim is lost it is dropped (logged, nil
// error), so a loser can never finalize the winner's run. Other writes pass
// through.
func (f *Fence) Update(ctx context.Context, patch RunPatch) error {
	s, ok := patch.Status.IsSet()
	if !ok || !s.Terminal() {
		return f.store.Update(ctx, f.claim.RunID, patch)
	}
	if err := f.Lost(); err != nil {
		f.logger.Warn("durable: dropped terminal run update from a lost claim", "run_id", f.claim.RunID, "status", s)
		return nil
	}
	patch.IfEpoch = f.claim.Epoch
	err := f.store.Update(ctx, f.claim.RunID, patch)
	if errors.Is(err, ErrClaimLost) {
		f.latch(err)
		f.logger.Warn("durable: dropped terminal run update from a lost claim", "run_id", f.claim.RunID, "status", s)
		return nil
	}
	return err
}
