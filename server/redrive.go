package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// ErrNotRedrivable reports a run a successor cannot drive on: nothing was
// kept to rebuild it from, or its adapter cannot attach to the work in
// flight (see chat.Attacher). Recovery ends such a run as producer-lost.
var ErrNotRedrivable = errors.New("server: the run cannot be taken over")

// ErrBusy reports that this server takes no run over now: it is draining,
// or runs Config.MaxRuns runs already. Recovery leaves such a run alone; its
// lease lapses again and a later sweep (here or on another replica) takes
// it.
var ErrBusy = errors.New("server: draining or at its run limit; the run is left for a later sweep")

// requestKeeper returns the store that keeps cr's request for a takeover:
// one that keeps requests, for a run whose work can be attached to again.
func (h *Handler) requestKeeper(cr *chatRequest) (durable.RequestStore, bool) {
	rs, ok := h.cfg.Store.(durable.RequestStore)
	return rs, ok && chat.CanAttach(&cr.opts)
}

// keepRequest stores, in rs, the request of a run a successor could take
// over, for Redrive.
func keepRequest(ctx context.Context, rs durable.RequestStore, runID string, cr *chatRequest) error {
	if err := rs.SaveRequest(ctx, runID, cr.body); err != nil {
		return fmt.Errorf("storing the run's request: %w", err)
	}
	return nil
}

// Redrive drives on a durable run whose producer died (a server killed
// mid-run), under claim, which the caller (Recovery) won. The run's options
// are rebuilt from its stored request, and the engine runs again with
// chat.Options.Attach: the adapter re-reads the work the dead producer
// started (a coding agent's journal) from its start instead of starting it
// again. What the log already holds is not appended again (see aligner);
// the rest is, up to the run's end. Redrive returns once the producer is
// running; an error means nothing was started and the claim is the
// caller's to settle (ErrNotRedrivable: the run cannot be taken over;
// ErrBusy: not now).
func (h *Handler) Redrive(ctx context.Context, rec durable.RunRecord, claim durable.Claim) error {
	if h.draining.Load() || h.cfg.MaxRuns > 0 && h.activeRuns() >= h.cfg.MaxRuns {
		return ErrBusy
	}
	store := h.cfg.Store
	opts, err := h.storedOptions(ctx, rec)
	if err != nil {
		return err
	}
	stored, err := store.Snapshot(ctx, rec.RunID)
	if err != nil {
		return fmt.Errorf("reading the run's log: %w", err)
	}
	pctx, cancel := context.WithCancelCause(context.Background())
	if added, _ := h.prod.add(rec.RunID, cancel); !added {
		cancel(nil)
		return fmt.Errorf("%w: this server already drives it", ErrNotRedrivable)
	}
	p := h.newProducer(pctx, cancel, rec.RunID, rec.ThreadID, Principal(rec.Owner))
	p.align = newAligner(stored)
	p.fence = durable.NewFence(store, claim, h.cfg.Logger)
	p.leaser, _ = store.(durable.Leaser)
	p.commits = p.newCommits()
	// The writer starts as the dead producer's did, with the run.accepted
	// marker, which shapes what follows (the RUN_STARTED it implies); the
	// aligner drops the marker and that RUN_STARTED, already stored.
	if err := p.accept(); err != nil {
		p.commits.stop()
		h.prod.done(rec.RunID)
		cancel(nil)
		return fmt.Errorf("replaying the run's start: %w", err)
	}
	h.cfg.Logger.Info("durable run taken over: re-driving it from its stored request", "runId", rec.RunID, "threadId", rec.ThreadID, "epoch", claim.Epoch, "stored", len(stored))
	p.launch(opts)
	return nil
}

// storedOptions rebuilds a run's engine options from its stored request,
// on the record's thread and run ids, in attach mode.
func (h *Handler) storedOptions(ctx context.Context, rec durable.RunRecord) (chat.Options, error) {
	rs, ok := h.cfg.Store.(durable.RequestStore)
	if !ok {
		return chat.Options{}, fmt.Errorf("%w: the store keeps no requests", ErrNotRedrivable)
	}
	body, err := rs.LoadRequest(ctx, rec.RunID)
	if errors.Is(err, durable.ErrRunNotFound) {
		return chat.Options{}, fmt.Errorf("%w: no request was kept for it (its model cannot be attached to)", ErrNotRedrivable)
	}
	if err != nil {
		return chat.Options{}, fmt.Errorf("loading the run's request: %w", err)
	}
	in, err := agui.ParseRunInput(body)
	if err != nil {
		return chat.Options{}, fmt.Errorf("%w: its stored request: %v", ErrNotRedrivable, err)
	}
	in.ThreadID, in.RunID = rec.ThreadID, rec.RunID
	opts, err := h.engineOptions(nil, in)
	if err != nil {
		return chat.Options{}, fmt.Errorf("%w: rebuilding its options: %v", ErrNotRedrivable, err)
	}
	if !chat.CanAttach(&opts) {
		return chat.Options{}, fmt.Errorf("%w: its model cannot be attached to", ErrNotRedrivable)
	}
	opts.RunID, opts.Attach = rec.RunID, true
	return opts, nil
}
