// Package tail is the read side shared by the SQL backends: Read resolves
// the start of a read, then pages through a run's log and parks on the
// store's wake-ups until the log is closed and delivered. A backend
// supplies one query (the log's state plus a page of entries, in one
// snapshot); tailers woken together share it through package flight.
package tail

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/internal/flight"
	"github.com/goai-sdk/goai/durable/internal/notify"
)

// State is one consistent view of a log: whether it exists, its tail,
// whether it is closed, and a page of the entries after some seq. States
// are shared between coalesced readers and must not be modified.
type State struct {
	Exists  bool
	Last    int64
	Closed  bool
	Entries []durable.Entry
}

type key struct {
	run   string
	after int64
	limit int
}

// Reader reads logs for one store. Set the fields before the first Read.
type Reader struct {
	// CachedTails promises that Recent holds the tail of every log it
	// holds: each append reaches it, or the store forgets the log (Forget,
	// Clear) before it wakes the log's tailers. A read starting at the
	// cached tail of an open log then waits for a wake-up without a query.
	// A store that other processes may append to unseen leaves it false.
	CachedTails bool
	// Scheme is the offset scheme of the store (durable.FormatOffset).
	Scheme string
	// Page is how many entries one query fetches.
	Page int
	// Poll, if positive, makes parked readers re-query at this interval
	// (for logs written by another process that cannot wake them).
	Poll time.Duration
	// FirstChunkDeadline bounds a sentinel read's wait for a run's first
	// entry; negative: until ctx ends.
	FirstChunkDeadline time.Duration
	// Hub is woken by the store after each commit of runID.
	Hub *notify.Hub
	// Closed reports a store that was shut down.
	Closed func() bool
	// Query returns runID's state and up to limit entries after seq after,
	// in one snapshot; limit 0 asks for the state only.
	Query func(ctx context.Context, runID string, after int64, limit int) (*State, error)
	// Recent, if set, holds the entries the store appended lately; tailers
	// read them from there instead of querying.
	Recent *Recent

	flight flight.Group[key, *State]
}

// errQuiet ends a read without an error: its context is done.
var errQuiet = errors.New("quiet")

func (t *Reader) fetch(ctx context.Context, runID string, after int64, limit int, tok flight.Token) (*State, error) {
	return t.flight.Do(ctx, key{runID, after, limit}, tok, func(ctx context.Context) (*State, error) {
		return t.Query(ctx, runID, after, limit)
	})
}

// Read implements durable.Log.Read.
func (t *Reader) Read(ctx context.Context, runID, after string) iter.Seq2[durable.Entry, error] {
	return durable.Entries(ctx, t.ReadBatches(ctx, runID, after))
}

// ReadBatches implements durable.BatchReader: a batch is what the cache
// of recent entries holds after the read's position, or one page.
func (t *Reader) ReadBatches(ctx context.Context, runID, after string) iter.Seq2[[]durable.Entry, error] {
	return func(yield func([]durable.Entry, error) bool) {
		// The read's one subscription: a paced read waits once per token,
		// and a wait on it allocates nothing.
		sub := t.Hub.Subscribe(runID)
		defer sub.Close()
		// The read's end interrupts its waits, so that a wait is a receive
		// from the subscription alone rather than a select of it and
		// ctx.Done(), once per token when paced (park).
		defer context.AfterFunc(ctx, sub.Interrupt)()
		pos, err := t.start(ctx, runID, after, sub)
		if err != nil {
			if err != errQuiet && ctx.Err() == nil {
				yield(nil, err)
			}
			return
		}
		// After a round that read the cache, the next round's wait
		// compares generations: the same one means nothing woke the read
		// in between (no append, close or notification), so with nothing
		// new cached it parks without a query.
		var heldGen uint64
		holding := false
		// The cache's entries are copied into the read's own batch (the
		// cache writes over its slots), valid until the loop body returns.
		var batch []durable.Entry
		for first := true; ; first = false {
			w, cached, atTail := t.Recent.waitAfter(sub, runID, pos, batch[:0])
			batch = cached
			// A read that starts at the cached tail of a log appended
			// here (a reconnect, a stream taken over from net/http) parks
			// without a query too, if nothing appends unseen
			// (CachedTails): whatever is appended next wakes it.
			quiet := holding && w.Gen != 0 && w.Gen == heldGen || first && atTail && t.CachedTails
			holding = false
			if t.Closed() {
				yield(nil, durable.ErrStoreClosed)
				return
			}
			if len(cached) > 0 {
				if ctx.Err() != nil || !yield(cached, nil) {
					return
				}
				pos += int64(len(cached))
				heldGen, holding = w.Gen, true
				continue
			}
			if t.Recent.ended(runID, pos) {
				return
			}
			if quiet {
				if !t.park(ctx, w.C, nil) {
					return
				}
				continue
			}
			st, err := t.fetch(ctx, runID, pos, t.Page, t.flight.Token(genToken(w)))
			if err == nil && (!st.Exists || (pos < st.Last && len(st.Entries) == 0)) {
				err = fmt.Errorf("%w: run %q was pruned during the read", durable.ErrRunNotFound, runID)
			}
			if err != nil {
				if ctx.Err() == nil {
					yield(nil, err)
				}
				return
			}
			if len(st.Entries) > 0 {
				if ctx.Err() != nil || !yield(st.Entries, nil) {
					return
				}
				pos += int64(len(st.Entries))
			}
			switch {
			case pos < st.Last:
				continue // more pages
			case st.Closed:
				return
			}
			if !t.park(ctx, w.C, nil) {
				return
			}
		}
	}
}

// genToken is what identifies w's wake-up for the single-flight group: the
// generation of a subscription's wait, none on a closed hub.
func genToken(w notify.Waiter) any {
	if w.Gen == 0 {
		return nil
	}
	return w.Gen
}

// park waits for a wake-up (or the poll interval); false means ctx is done
// or deadline passed.
//
// A tailer of a live log spends its time here: without a poll interval or
// a deadline it waits on its subscription's channel alone, which its
// read's end interrupts (ReadBatches), and which keeps the stacks of
// waiting readers small.
func (t *Reader) park(ctx context.Context, wake <-chan struct{}, deadline <-chan time.Time) bool {
	if t.Poll > 0 || deadline != nil {
		return t.parkTimed(ctx, wake, deadline)
	}
	// A wait takes out any token left before it (Sub.Wait), an interrupt's
	// too: ctx is looked at after the wait began, and an interrupt after
	// this look leaves a token the receive gets.
	if ctx.Err() != nil {
		return false
	}
	<-wake
	return ctx.Err() == nil
}

// parkTimed is park with a poll interval or a deadline.
func (t *Reader) parkTimed(ctx context.Context, wake <-chan struct{}, deadline <-chan time.Time) bool {
	var poll <-chan time.Time
	if t.Poll > 0 {
		tm := time.NewTimer(t.Poll)
		defer tm.Stop()
		poll = tm.C
	}
	select {
	case <-wake:
		return true
	case <-poll:
		return true
	case <-deadline:
		return false
	case <-ctx.Done():
		return false
	}
}

// start resolves after to the seq a read continues from; sub is the
// read's subscription to runID.
func (t *Reader) start(ctx context.Context, runID, after string, sub *notify.Sub) (int64, error) {
	if err := durable.CheckRunID(runID); err != nil {
		return 0, err
	}
	if t.Closed() {
		return 0, durable.ErrStoreClosed
	}
	if after != durable.FromStart && after != durable.Now {
		seq, err := durable.ParseOffset(t.Scheme, runID, after)
		if err != nil {
			return 0, err
		}
		if t.Recent.holds(runID, seq) {
			// A resume of a log appended here lately (a stream taken over
			// from net/http continues so after its first entries).
			return seq, nil
		}
		st, err := t.Query(ctx, runID, 0, 0)
		switch {
		case err != nil:
			return 0, err
		case !st.Exists:
			return 0, fmt.Errorf("%w: run %q (unknown or expired)", durable.ErrRunNotFound, runID)
		case seq > st.Last:
			return 0, durable.FutureOffsetError(runID, after)
		}
		return seq, nil
	}
	if after == durable.FromStart && t.Recent.fromStart(runID) {
		return 0, nil
	}
	var deadline <-chan time.Time
	if t.FirstChunkDeadline > 0 {
		tm := time.NewTimer(t.FirstChunkDeadline)
		defer tm.Stop()
		deadline = tm.C
	}
	start := int64(-1)
	for {
		w := sub.Wait()
		st, err := t.fetch(ctx, runID, 0, 0, t.flight.Token(genToken(w)))
		if err != nil {
			return 0, err
		}
		if start < 0 {
			start = 0
			if after == durable.Now {
				start = st.Last
			}
		}
		if st.Exists && (st.Last > 0 || st.Closed) {
			return start, nil
		}
		if t.Closed() {
			return 0, durable.ErrStoreClosed
		}
		if !t.park(ctx, w.C, deadline) {
			if ctx.Err() != nil {
				return 0, errQuiet
			}
			return 0, fmt.Errorf("%w: run %q produced no data within %v", durable.ErrRunNotFound, runID, t.FirstChunkDeadline)
		}
	}
}
