package server

import (
	"context"
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

	// cancels, when the store can list cancel requests in one query, is
	// polled by one goroutine for every run produced here (pollCancels),
	// instead of each producer reading its own record: at 2,000 idle runs
	// those reads were two thirds of the server's CPU. The poller runs
	// while any run is produced here.
	cancels   durable.CancelLister
	pollEvery time.Duration
	logger    *slog.Logger
	recovered func(v any, attrs ...any) error // Handler.recovered
	polling   bool
	idle      chan struct{} // wakes the poller when the last run is done
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
	if p.cancels != nil && !p.polling {
		if p.idle == nil {
			p.idle = make(chan struct{}, 1)
		}
		p.polling = true
		p.wg.Add(1)
		go p.pollCancels()
	}
	return true, nil
}

// pollCancels stops the runs produced here whose cancel another replica
// (or the reaper) recorded, one query per pollEvery, until no run is
// produced here. Cancels sent to this server stop its producers at once
// (stop).
func (p *producers) pollCancels() {
	defer p.wg.Done()
	t := time.NewTicker(p.pollEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.idle:
		}
		ids := p.pollIDs()
		if ids == nil {
			return
		}
		p.pollOnce(ids)
	}
}

// pollIDs returns the runs produced here, or nil (and marks the poller
// gone) when there are none.
func (p *producers) pollIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cancel) == 0 {
		p.polling = false
		return nil
	}
	ids := make([]string, 0, len(p.cancel))
	for id := range p.cancel {
		ids = append(ids, id)
	}
	return ids
}

// pollOnce asks the store once; a failure or a panic of the store is
// logged and the next tick asks again.
func (p *producers) pollOnce(ids []string) {
	defer func() {
		if v := recover(); v != nil {
			_ = p.recovered(v, "component", "cancel poller")
		}
	}()
	// Bounded, so that a store that hangs does not end the polling.
	ctx, cancel := context.WithTimeout(context.Background(), 10*p.pollEvery)
	defer cancel()
	got, err := p.cancels.CancelRequested(ctx, ids)
	if err != nil {
		p.logger.Warn("polling for cancel requests failed", "runs", len(ids), "error", err)
		return
	}
	for _, id := range got {
		p.stop(id, chat.ErrCancelRequested)
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
	if len(p.cancel) == 0 && p.polling {
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
