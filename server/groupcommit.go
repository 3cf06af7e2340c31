package server

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

// groupCommit is a durable producer's append pipeline. Events are queued by
// add without waiting; whatever is queued is appended as one batch as soon
// as the previous append has finished, the first after lingering at most
// linger for the events right behind it. Batching thus never delays an
// event by more than one append plus linger at any token rate, and a fast
// producer still gets large batches (everything queued during one append
// is the next batch).
//
// A store that queues appends itself (durable.QueuedAppender, used when
// there is no linger) is asked by add for an append, and takes the batch
// when the append runs, on its writer (the in-memory store's runs at once,
// inside add): what queues until then goes in it,
// and a paced model's token costs no goroutine here. The completion asks
// for another append while entries are queued. Otherwise an appender
// goroutine appends the batches; it runs only while something is
// unstored, as a stream's sender does (streamWriter). Either way an idle
// run, waiting on its model, holds no goroutine here.
type groupCommit struct {
	appendBatch func([][]byte) error
	linger      time.Duration
	queue       func()                   // queues an append with the store; nil: the appender goroutine appends
	observe     func(int, time.Duration) // a queued batch's size and time from the append's queueing to its commit

	mu        sync.Mutex
	stored    *sync.Cond // broadcast after each append, and when the appending ends
	queued    [][]byte
	pending   int   // entries added and not yet stored (queued or in flight)
	err       error // the first append error; every later add and flush fails with it
	appending bool  // an append is in flight or an appender is running

	flying [][]byte  // the batch the store took and has not stored yet
	sent   time.Time // when the append in flight was queued
	spare  [][]byte  // the previous batch's slice, for the next one

	hurry chan struct{} // a flush waits: skip the linger

	unyielding int // adds since one waited or yielded
}

func newGroupCommit(appendBatch func([][]byte) error, linger time.Duration) *groupCommit {
	g := &groupCommit{appendBatch: appendBatch, linger: linger, hurry: make(chan struct{}, 1)}
	g.stored = sync.NewCond(&g.mu)
	return g
}

// queueWith makes g queue its appends with the function that newQueue
// returns for g's take and completion (nil: the store does not queue, and
// the appender goroutine stays). observe gets each batch's size and time
// from the append's queueing to its commit, as the appender's appends are
// timed from their call. It is used only without a linger, before
// the first add.
func (g *groupCommit) queueWith(newQueue func(take func() [][]byte, done func(error) bool) func(), observe func(int, time.Duration)) {
	if g.linger > 0 {
		return
	}
	g.queue = newQueue(g.take, g.queuedDone)
	g.observe = observe
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// maxUnstored bounds the entries a producer has added and not yet stored:
// past it, add waits for an append. A model that yields faster than the
// store appends is held back, as a slow client holds back a plain stream,
// instead of running ahead with every event waiting in memory (and its
// delivery latency growing with the queue).
const maxUnstored = 32

// add queues one entry, waiting while maxUnstored entries are unstored. It
// fails once an append has failed.
func (g *groupCommit) add(entry []byte) error {
	g.mu.Lock()
	if g.unyielding++; g.unyielding >= maxUnstored {
		// A store that appends at once (the in-memory one) never holds
		// its producer back, so a fast model's goroutine would run on
		// until the scheduler preempts it (10 ms) while the readers it
		// woke wait behind it: unpaced, their token p99 was twice a plain
		// stream's. Yielding as often as a SQLite store's producer waits
		// gives them their turn.
		g.unyielding = 0
		g.mu.Unlock()
		runtime.Gosched()
		g.mu.Lock()
	}
	for g.pending >= maxUnstored && g.err == nil {
		signal(g.hurry) // a lingering appender would keep it waiting
		g.stored.Wait()
		g.unyielding = 0
	}
	if err := g.err; err != nil {
		g.mu.Unlock()
		return err
	}
	g.queued = append(g.queued, entry)
	g.pending++
	if g.appending {
		g.mu.Unlock()
		return nil
	}
	g.appending = true
	g.sent = time.Now()
	g.mu.Unlock()
	if g.queue == nil {
		go g.appendQueued()
	} else {
		g.queue() // its completion may run before this returns
	}
	return nil
}

// take hands the store what is queued, as the batch of the append it is
// running.
func (g *groupCommit) take() [][]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	batch := g.queued
	g.queued, g.spare = g.spare[:0], nil
	g.flying = batch
	return batch
}

// queuedDone is the completion of a queued append: it records the outcome
// and asks for another append while entries are queued. It runs on the
// store's writer (or in add, when the store refuses at once) and does not
// block.
func (g *groupCommit) queuedDone(err error) (again bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.flying != nil {
		g.observe(len(g.flying), time.Since(g.sent))
		g.pending -= len(g.flying)
		clear(g.flying) // the store keeps no reference: let the entries go
		g.spare, g.flying = g.flying[:0], nil
	}
	if err != nil && g.err == nil {
		g.err = err
	}
	g.stored.Broadcast()
	if g.err != nil {
		// As after an appender's failed append: what was queued is
		// dropped, and every later add fails.
		g.pending -= len(g.queued)
		clear(g.queued)
		g.queued = g.queued[:0]
	}
	if len(g.queued) == 0 {
		g.appending = false
		return false
	}
	g.sent = time.Now()
	return true
}

// flush waits until everything queued so far is stored, skipping the
// linger, and returns the first append error.
func (g *groupCommit) flush() error {
	signal(g.hurry)
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.pending > 0 && g.err == nil {
		g.stored.Wait()
	}
	return g.err
}

// stop waits until what is queued is stored (or dropped after a failed
// append) and the appender has ended.
func (g *groupCommit) stop() {
	signal(g.hurry)
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.appending {
		g.stored.Wait()
	}
}

// appendQueued is the appender: it lingers once, then appends batches
// until nothing is queued.
func (g *groupCommit) appendQueued() {
	if g.linger > 0 {
		t := time.NewTimer(g.linger)
		select {
		case <-t.C:
		case <-g.hurry:
		}
		t.Stop()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for yielded := false; ; {
		if len(g.queued) == 0 {
			if yielded {
				break
			}
			// The producer woken by the last append is about to queue
			// more when it runs ahead of its model: give it the chance,
			// rather than end and have the next add start another
			// appender for a batch of one.
			yielded = true
			g.mu.Unlock()
			runtime.Gosched()
			g.mu.Lock()
			continue
		}
		yielded = false
		batch := g.queued
		g.queued = nil
		failed := g.err != nil
		g.mu.Unlock()
		var err error
		if !failed {
			err = g.safeAppend(batch)
		}
		g.mu.Lock()
		g.pending -= len(batch)
		if err != nil && g.err == nil {
			g.err = err
		}
		g.stored.Broadcast()
	}
	g.appending = false
	g.stored.Broadcast()
}

// safeAppend turns a panic of the store into the append's error, so the
// run fails alone.
func (g *groupCommit) safeAppend(batch [][]byte) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("append panicked: %v", v)
		}
	}()
	return g.appendBatch(batch)
}
