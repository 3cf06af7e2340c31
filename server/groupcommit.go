package server

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

// groupCommit is a durable producer's append pipeline. Events are queued by
// add without waiting; an appender goroutine appends whatever is queued as
// one batch as soon as the previous append has finished, and, when it
// starts, after lingering at most linger for the events right behind the
// first. Batching thus never delays an event by more than one append plus
// linger at any token rate, and a fast producer still gets large batches
// (everything queued during one append is the next batch).
//
// The appender runs only while something is unstored, as a stream's sender
// does (streamWriter): an idle run, waiting on its model, holds no
// goroutine here.
type groupCommit struct {
	appendBatch func([][]byte) error
	linger      time.Duration

	mu        sync.Mutex
	stored    *sync.Cond // broadcast after each append, and when the appender ends
	queued    [][]byte
	pending   int   // entries added and not yet stored (queued or in flight)
	err       error // the first append error; every later add and flush fails with it
	appending bool  // an appender is running

	hurry chan struct{} // a flush waits: skip the linger
}

func newGroupCommit(appendBatch func([][]byte) error, linger time.Duration) *groupCommit {
	g := &groupCommit{appendBatch: appendBatch, linger: linger, hurry: make(chan struct{}, 1)}
	g.stored = sync.NewCond(&g.mu)
	return g
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
	defer g.mu.Unlock()
	for g.pending >= maxUnstored && g.err == nil {
		signal(g.hurry) // a lingering appender would keep it waiting
		g.stored.Wait()
	}
	if g.err != nil {
		return g.err
	}
	g.queued = append(g.queued, entry)
	g.pending++
	if !g.appending {
		g.appending = true
		go g.appendQueued()
	}
	return nil
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
