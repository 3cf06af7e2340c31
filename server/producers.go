package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// Producer liveness defaults. A producer refreshes its lease every
// DefaultHeartbeat; recovery ([Recovery]) treats a run whose producer has
// been silent for DefaultLease as lost. DefaultLease is several heartbeats,
// so a slow store or a GC pause does not cost a healthy run its claim.
const (
	DefaultHeartbeat = 2 * time.Second
	DefaultLease     = 15 * time.Second
)

// producers tracks the runs this process is producing.
type producers struct {
	mu     sync.Mutex
	cancel map[string]context.CancelCauseFunc
	// ready is closed once a run's producer has either stored its first
	// entry or given up, so a duplicate request never reads the log before
	// it exists (and answers 404).
	ready map[string]chan struct{}
	// readers counts the clients reading each locally produced run;
	// stamped marks the runs this process stamped detached.
	readers map[string]int
	stamped map[string]bool
	wg      sync.WaitGroup

	heartbeat time.Duration // 0: DefaultHeartbeat

	// One goroutine per handler (keep) keeps every local producer alive in
	// the store and stops the ones whose cancel was recorded elsewhere,
	// while any run is produced here. Per-producer goroutines doing this
	// cost a goroutine and a store write per run per heartbeat: at 10,000
	// idle runs, 5,000 writes a second and a tenth of each idle run's
	// memory.
	store     durable.Store
	leases    map[string]*producer // launched producers whose lease keep renews
	pollEvery time.Duration
	logger    *slog.Logger
	recovered func(v any, attrs ...any) error // Handler.recovered
	keeping   bool
	idle      chan struct{} // wakes the keeper when the last run is done
}

// SetHeartbeat sets how often this handler's durable producers refresh
// their lease (default DefaultHeartbeat). It must be well under the lease
// recovery uses ([Recovery].Lease), and be called before serving.
func (h *Handler) SetHeartbeat(d time.Duration) { h.prod.heartbeat = d }

func (p *producers) heartbeatEvery() time.Duration {
	if p.heartbeat > 0 {
		return p.heartbeat
	}
	return DefaultHeartbeat
}

// add registers runID's producer; when one is already registered it
// returns false and the channel closed once that producer is ready.
func (p *producers) add(runID string, cancel context.CancelCauseFunc) (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel == nil {
		p.cancel = map[string]context.CancelCauseFunc{}
		p.ready = map[string]chan struct{}{}
	}
	if _, dup := p.cancel[runID]; dup {
		return false, p.ready[runID]
	}
	p.cancel[runID] = cancel
	p.ready[runID] = make(chan struct{})
	p.wg.Add(1)
	if !p.keeping {
		if p.idle == nil {
			p.idle = make(chan struct{}, 1)
		}
		p.keeping = true
		p.wg.Add(1)
		go p.keep()
	}
	return true, nil
}

// keepLease has the keeper renew pr's lease from now until its run is done.
func (p *producers) keepLease(pr *producer) {
	if pr.leaser == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leases == nil {
		p.leases = map[string]*producer{}
	}
	p.leases[pr.runID] = pr
}

// keep runs until no run is produced here. Every pollEvery (or every
// heartbeat, when that is shorter) it stops the runs whose cancel another
// replica or the reaper recorded (cancels sent to this server stop its
// producers at once: stop); every heartbeat it renews the leases of the
// launched producers, and stops those whose claim a successor took.
func (p *producers) keep() {
	defer p.wg.Done()
	beat := p.heartbeatEvery()
	t := time.NewTicker(min(p.pollEvery, beat))
	defer t.Stop()
	lastBeat := time.Now()
	for {
		var now time.Time
		select {
		case now = <-t.C:
		case <-p.idle:
		}
		due := now.Sub(lastBeat) >= beat
		ids, held := p.keptRuns(due)
		if ids == nil {
			return
		}
		p.pollCancels(ids)
		if due {
			// A renewal that failed is tried again at the next
			// heartbeat: the lease is several heartbeats long.
			p.renew(held)
			lastBeat = now
		}
	}
}

// keptRuns returns the runs produced here (nil, marking the keeper gone,
// when there are none) and, when beat, the launched producers holding a
// lease.
func (p *producers) keptRuns(beat bool) (ids []string, held []*producer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cancel) == 0 {
		p.keeping = false
		return nil, nil
	}
	ids = make([]string, 0, len(p.cancel))
	for id := range p.cancel {
		ids = append(ids, id)
	}
	if beat {
		held = make([]*producer, 0, len(p.leases))
		for _, pr := range p.leases {
			held = append(held, pr)
		}
	}
	return ids, held
}

// timeout bounds one store call of the keeper, so that a store that hangs
// does not end the keeping.
func (p *producers) timeout() time.Duration { return 10 * min(p.pollEvery, p.heartbeatEvery()) }

// pollCancels asks the store which of ids have a cancel recorded and stops
// those: in one query when the store can list them, else one read per run.
// A failure or a panic of the store is logged and the next tick asks
// again.
func (p *producers) pollCancels(ids []string) {
	defer func() {
		if v := recover(); v != nil {
			_ = p.recovered(v, "component", "cancel poller")
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	if cl, ok := p.store.(durable.CancelLister); ok {
		got, err := cl.CancelRequested(ctx, ids)
		if err != nil {
			p.logger.Warn("polling for cancel requests failed", "runs", len(ids), "error", err)
			return
		}
		for _, id := range got {
			p.stop(id, chat.ErrCancelRequested)
		}
		return
	}
	for _, id := range ids {
		rec, err := p.store.Get(ctx, id)
		if err == nil && rec.CancelRequested != nil && *rec.CancelRequested {
			p.stop(id, chat.ErrCancelRequested)
		}
	}
}

// renew refreshes the leases of held, in one call when the store can, and
// stops the producers whose claim a successor took: the store refuses
// their next append, which latches the loss in their fence; they stop now.
// A failure or a panic of the store is logged.
func (p *producers) renew(held []*producer) {
	defer func() {
		if v := recover(); v != nil {
			_ = p.recovered(v, "component", "lease keeper")
		}
	}()
	if len(held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	if bl, isBatch := p.store.(durable.BatchLeaser); isBatch {
		claims := make([]durable.Claim, len(held))
		byRun := make(map[string]*producer, len(held))
		for i, pr := range held {
			claims[i] = pr.fence.Claim()
			byRun[pr.runID] = pr
		}
		lost, err := bl.HeartbeatAll(ctx, claims)
		if err != nil {
			p.logger.Warn("durable heartbeats failed", "runs", len(held), "error", err)
			return
		}
		for _, id := range lost {
			// The producer whose claim was refused, not whichever now
			// produces the run here (a redrive after it ended).
			if pr := byRun[id]; pr != nil {
				pr.cancel(fmt.Errorf("%w: run %q: its lease renewal was refused", durable.ErrClaimLost, id))
			}
		}
		return
	}
	for _, pr := range held {
		err := pr.leaser.Heartbeat(ctx, pr.fence.Claim())
		switch {
		case errors.Is(err, durable.ErrClaimLost):
			pr.cancel(err)
		case err != nil:
			p.logger.Warn("durable heartbeat failed", "runId", pr.runID, "error", err)
		}
	}
}

// markReady releases the duplicates of runID waiting in add.
func (p *producers) markReady(runID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.ready[runID]; ok {
		select {
		case <-c:
		default:
			close(c)
		}
	}
}

func (p *producers) done(runID string) {
	p.markReady(runID)
	p.mu.Lock()
	delete(p.cancel, runID)
	delete(p.ready, runID)
	delete(p.readers, runID)
	delete(p.stamped, runID)
	delete(p.leases, runID)
	if len(p.cancel) == 0 && p.keeping {
		select {
		case p.idle <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
	p.wg.Done()
}

// attach counts a reader of runID and reports whether the run, produced
// here, was stamped detached and must be un-stamped: a client is back.
func (p *producers) attach(runID string) (unstamp bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, local := p.cancel[runID]; !local {
		return false
	}
	if p.readers == nil {
		p.readers, p.stamped = map[string]int{}, map[string]bool{}
	}
	p.readers[runID]++
	unstamp = p.stamped[runID]
	delete(p.stamped, runID)
	return unstamp
}

// detach uncounts a reader of runID and reports whether it was the last
// reader of a run still produced here: the run is now detached.
func (p *producers) detach(runID string) (last bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.readers[runID]
	if !ok {
		return false
	}
	if n <= 1 {
		delete(p.readers, runID)
		_, local := p.cancel[runID]
		if local {
			p.stamped[runID] = true
		}
		return local
	}
	p.readers[runID] = n - 1
	return false
}

func (p *producers) stop(runID string, cause error) bool {
	p.mu.Lock()
	c, ok := p.cancel[runID]
	p.mu.Unlock()
	if ok {
		c(cause)
	}
	return ok
}

func (p *producers) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.cancel)
}
