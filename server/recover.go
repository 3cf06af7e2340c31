package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/durable"
)

// ProducerLostCode is the RUN_ERROR code recovery ends a run with when its
// producer died (a server killed or partitioned mid-run).
const ProducerLostCode = "producer-lost"

// ProducerLostMessage is the message of that RUN_ERROR.
const ProducerLostMessage = "The server producing this run stopped before the run finished (producer lost); the run was ended by recovery."

// ExpiredCode is the cancel reason recorded on a detached run the reaper
// expires.
const ExpiredCode = "detached-run-expired"

// Recovery finds durable runs whose producer is gone and ends them, so that
// no reader of their log waits forever, and reaps detached runs past their
// TTL. Every replica sharing a store may run it: claims make each run's
// recovery happen once.
type Recovery struct {
	// Store holds the runs. It must be a durable.Leaser for lost-producer
	// recovery (every backend in this module is); otherwise only the
	// reaper runs.
	Store durable.Store
	// Lease is how long a producer may stay silent (no heartbeat) before
	// its run is taken over; default DefaultLease. It must be several times
	// the producers' heartbeat interval (Handler.SetHeartbeat).
	Lease time.Duration
	// Interval is the sweep period of Run; default Lease/3.
	Interval time.Duration
	// DetachedTTL, when positive, makes the reaper cancel running runs
	// detached (DetachedSince set) for longer than this; zero disables the
	// reaper.
	DetachedTTL time.Duration
	// ReleaseSandbox, when set, is called for each run recovery ended whose
	// record names a sandbox (SandboxKey): with its producer gone nothing
	// else will ever destroy it (destroyed beats unreachable). A run the
	// reaper cancels while its producer lives is not passed here: the
	// producer's own cancel path tears its sandbox down.
	ReleaseSandbox func(ctx context.Context, rec durable.RunRecord) error
	// Redrive, when set, is offered each lost-producer run whose log has
	// no terminal yet, under the claim recovery just won, before recovery
	// ends it: Handler.Redrive drives a run on whose work outlives its
	// producer (a coding agent's journal). A nil error means the run is
	// driven again (counted as Redriven); ErrBusy leaves the run for a
	// later sweep; on any other error recovery ends the run as
	// producer-lost.
	Redrive func(ctx context.Context, rec durable.RunRecord, claim durable.Claim) error
	// Logger receives what recovery did; default slog.Default().
	Logger *slog.Logger
	// Now is the clock for the reaper and finish times; default time.Now.
	Now func() time.Time
}

func (rc *Recovery) lease() time.Duration {
	if rc.Lease > 0 {
		return rc.Lease
	}
	return DefaultLease
}

func (rc *Recovery) logger() *slog.Logger {
	if rc.Logger != nil {
		return rc.Logger
	}
	return slog.Default()
}

func (rc *Recovery) now() time.Time {
	if rc.Now != nil {
		return rc.Now()
	}
	return time.Now()
}

// Run sweeps at once and then every Interval until ctx is done.
func (rc *Recovery) Run(ctx context.Context) {
	every := rc.Interval
	if every <= 0 {
		every = max(rc.lease()/3, 10*time.Millisecond)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := rc.Sweep(ctx); err != nil && ctx.Err() == nil {
			rc.logger().Warn("durable recovery sweep failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	Reclaimed int // lost-producer runs ended with RUN_ERROR producer-lost
	Finished  int // lost-producer runs whose log already had its terminal
	Expired   int // detached runs past their TTL whose cancel was recorded
	Redriven  int // lost-producer runs handed to Redrive and driven again
}

// Sweep runs one recovery pass: it reaps detached runs past DetachedTTL,
// then ends every run whose producer's lease has lapsed.
func (rc *Recovery) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	var errs []error
	if rc.DetachedTTL > 0 {
		n, err := rc.reap(ctx)
		res.Expired = n
		errs = append(errs, err)
	}
	if l, ok := rc.Store.(durable.Leaser); ok {
		stale, err := l.ListStale(ctx, rc.lease())
		errs = append(errs, err)
		for _, rec := range stale {
			if ctx.Err() != nil {
				break
			}
			finished, err := rc.reclaim(ctx, l, rec)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("run %q: %w", rec.RunID, err))
			case finished == reclaimedLost:
				res.Reclaimed++
			case finished == reclaimedFinished:
				res.Finished++
			case finished == reclaimedRedriven:
				res.Redriven++
			}
		}
	}
	return res, errors.Join(errs...)
}

// reap records a cancel on every detached run past its TTL. A live
// producer sees it within its cancel poll and ends the run (and its
// sandbox); a dead one's run is ended by the lost-producer pass once its
// lease lapses. The reaper never clears DetachedSince.
func (rc *Recovery) reap(ctx context.Context) (int, error) {
	runs, err := rc.Store.ListReclaimable(ctx, rc.now(), rc.DetachedTTL)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range runs {
		if rec.CancelRequested != nil && *rec.CancelRequested {
			continue
		}
		if err := rc.Store.Update(ctx, rec.RunID, durable.RunPatch{CancelRequested: durable.Set(true)}); err != nil {
			return n, err
		}
		rc.logger().Info("durable reaper: detached run expired; cancel recorded", "runId", rec.RunID, "detachedSince", rec.DetachedSince, "ttl", rc.DetachedTTL)
		n++
	}
	return n, nil
}

type reclaimOutcome int

const (
	reclaimedNone reclaimOutcome = iota
	reclaimedLost
	reclaimedFinished
	reclaimedRedriven
)

// reclaim takes a lost producer's run over: it hands it to Redrive, or
// ends it.
func (rc *Recovery) reclaim(ctx context.Context, l durable.Leaser, rec durable.RunRecord) (reclaimOutcome, error) {
	var epoch int64
	if rec.DriverEpoch != nil {
		epoch = *rec.DriverEpoch
	}
	// Compare-and-set: fails if the producer came back to life and
	// re-claimed, or another replica's sweep got here first. Winning fences
	// the dead producer: its appends now fail.
	claim, err := l.ClaimIf(ctx, rec.RunID, epoch)
	if errors.Is(err, durable.ErrClaimNotAcquired) {
		return reclaimedNone, nil
	}
	if err != nil {
		return reclaimedNone, err
	}
	log := rc.logger().With("runId", rec.RunID, "threadId", rec.ThreadID, "epoch", claim.Epoch)
	f := durable.NewFence(rc.Store, claim, rc.logger())
	stored, err := rc.Store.Snapshot(ctx, rec.RunID)
	if err != nil {
		return reclaimedNone, err
	}
	scan := scanLog(stored)
	if !scan.terminal && rc.Redrive != nil {
		err := rc.Redrive(ctx, rec, claim)
		if err == nil {
			return reclaimedRedriven, nil
		}
		if errors.Is(err, ErrBusy) {
			// Claimed and left: its lease lapses again, and a sweep
			// with room (here later, or another replica) takes it.
			log.Info("durable recovery: no room to drive the run on now; left for a later sweep", "error", err)
			return reclaimedNone, nil
		}
		log.Warn("durable recovery: the run cannot be driven on; ending it", "error", err)
	}
	outcome, err := rc.end(ctx, f, rec, scan)
	if err != nil {
		return reclaimedNone, err
	}
	if outcome == reclaimedLost {
		log.Warn("durable recovery: producer lost; run ended with RUN_ERROR", "code", ProducerLostCode, "entries", len(stored))
	} else {
		log.Info("durable recovery: producer died after storing its terminal; record finished from the log", "status", scan.status())
	}
	if rc.ReleaseSandbox != nil && rec.SandboxKey != nil {
		if err := rc.ReleaseSandbox(ctx, rec); err != nil {
			log.Warn("durable recovery: releasing the run's sandbox failed", "sandboxKey", *rec.SandboxKey, "error", err)
		}
	}
	return outcome, nil
}

// end terminalizes a lost producer's run under fence f: a log that already
// holds its terminal is closed and recorded as it says; otherwise a
// RUN_ERROR producer-lost is appended first.
func (rc *Recovery) end(ctx context.Context, f *durable.Fence, rec durable.RunRecord, scan logScan) (reclaimOutcome, error) {
	outcome, err := reclaimedFinished, error(nil)
	if !scan.terminal {
		outcome, err = rc.appendLost(ctx, f, rec, scan)
		if err != nil {
			return reclaimedNone, err
		}
	}
	patch := durable.RunPatch{FinishedAt: durable.Set(rc.now())}
	if outcome == reclaimedLost {
		patch.Status = durable.Set(durable.StatusFailed)
		patch.Error = durable.Set(durable.RunError{Message: ProducerLostMessage, Code: ProducerLostCode})
	} else {
		// The log's own terminal is the truth.
		patch.Status = durable.Set(scan.status())
		if scan.err != nil {
			patch.Error = durable.Set(*scan.err)
		}
		if scan.interrupted {
			patch.FinishedAt = durable.Clear[time.Time]()
		}
	}
	if err := f.Close(ctx); err != nil {
		return reclaimedNone, err
	}
	if err := f.Update(ctx, patch); err != nil {
		return reclaimedNone, err
	}
	if lost := f.Lost(); lost != nil {
		return reclaimedNone, lost
	}
	return outcome, nil
}

// appendLost appends RUN_ERROR producer-lost (after a RUN_STARTED if the
// log has none). A log its producer closed before dying keeps its own
// terminal: reclaimedFinished, with scan updated from what is stored.
func (rc *Recovery) appendLost(ctx context.Context, f *durable.Fence, rec durable.RunRecord, scan logScan) (reclaimOutcome, error) {
	var batch [][]byte
	if !scan.started {
		rs := agui.Event{Type: agui.RunStarted, ThreadID: rec.ThreadID, RunID: rec.RunID, Timestamp: rc.now().UnixMilli()}
		batch = append(batch, agui.AppendWire(nil, &rs))
	}
	re := agui.Event{Type: agui.RunError, Message: ProducerLostMessage, Code: ProducerLostCode, Timestamp: rc.now().UnixMilli()}
	batch = append(batch, agui.AppendWire(nil, &re))
	_, err := f.Append(ctx, batch)
	switch {
	case errors.Is(err, durable.ErrLogClosed):
		return reclaimedFinished, nil
	case err != nil:
		return reclaimedNone, err
	}
	return reclaimedLost, nil
}

// logScan is what recovery needs to know about a stored log.
type logScan struct {
	started     bool
	terminal    bool
	err         *durable.RunError
	interrupted bool
}

func (s logScan) status() durable.RunStatus {
	switch {
	case s.interrupted:
		return durable.StatusInterrupted
	case s.err != nil && (s.err.Code == "cancelled" || s.err.Code == "aborted"):
		return durable.StatusAborted
	case s.err != nil || !s.terminal:
		return durable.StatusFailed
	}
	return durable.StatusCompleted
}

func scanLog(entries []durable.Entry) logScan {
	var s logScan
	for _, e := range entries {
		if !bytes.Contains(e.Data, []byte(`"RUN_`)) {
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Code    string `json:"code"`
			Outcome *struct {
				Type string `json:"type"`
			} `json:"outcome"`
		}
		if json.Unmarshal(e.Data, &ev) != nil {
			continue
		}
		switch ev.Type {
		case string(agui.RunStarted):
			s.started = true
		case string(agui.RunFinished):
			s.terminal, s.err = true, nil
			s.interrupted = ev.Outcome != nil && ev.Outcome.Type == "interrupt"
		case string(agui.RunError):
			s.terminal, s.interrupted = true, false
			s.err = &durable.RunError{Message: ev.Message, Code: ev.Code}
		}
	}
	return s
}
