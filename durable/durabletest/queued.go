package durabletest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/goai-sdk/goai/durable"
)

// outcomes collects the outcomes a queued append's done receives, and
// hands out the next batches a test has lined up. done runs on the store's
// goroutine, so it never blocks: outcomes are buffered.
type outcomes struct {
	got  chan error
	next [][][]byte // the batches done returns, in turn
	// sent is every batch handed to the store, so that the test can
	// scribble over them once they are done with.
	sent [][][]byte
}

func newOutcomes(next ...[][]byte) *outcomes {
	return &outcomes{got: make(chan error, len(next)+1), next: next}
}

func (o *outcomes) done(err error) [][]byte {
	var b [][]byte
	if len(o.next) > 0 {
		b, o.next = o.next[0], o.next[1:]
		o.sent = append(o.sent, b)
	}
	o.got <- err
	return b
}

// wait returns the next outcome.
func (o *outcomes) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-o.got:
		return err
	case <-ctxT(t).Done():
		t.Fatal("a queued append got no outcome")
		return nil
	}
}

// QueuedAppends checks a store's durable.QueuedAppender: continuations, the
// outcome of every batch, and that the store keeps none of them.
func QueuedAppends(t *testing.T, newStore func(t *testing.T) durable.Store) {
	t.Run("ContinuationsInOrder", func(t *testing.T) {
		leakCheck(t)
		s := newStore(t)
		q := s.(durable.QueuedAppender)
		first := evs(0, 1)
		o := newOutcomes(evs(1, 3), evs(4, 1), evs(5, 2))
		o.sent = append(o.sent, first)
		q.AppendQueued("queued", first, durable.AppendOptions{}, o.done)
		for i := range 4 {
			if err := o.wait(t); err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
		}
		// The store keeps no batch once its done has run: scribbling over
		// every entry handed to it changes nothing stored.
		for _, b := range o.sent {
			for _, e := range b {
				for i := range e {
					e[i] = 'X'
				}
			}
		}
		equalData(t, "stored entries", datas(mustSnapshot(t, s, "queued")), evs(0, 7))
		// A tailer of the open log may be served from what the store
		// keeps in memory.
		r := startRead(t, s, "queued", durable.FromStart)
		equalData(t, "tailed entries", datas(r.take(t, 7)), evs(0, 7))
		mustClose(t, s, "queued")
		if err := r.end(t); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("SharedWithAppend", func(t *testing.T) {
		leakCheck(t)
		s := newStore(t)
		q := s.(durable.QueuedAppender)
		mustAppend(t, s, "mixed", evs(0, 2))
		o := newOutcomes()
		q.AppendQueued("mixed", evs(2, 2), durable.AppendOptions{}, o.done)
		if err := o.wait(t); err != nil {
			t.Fatal(err)
		}
		offs := mustAppend(t, s, "mixed", evs(4, 1))
		all := mustSnapshot(t, s, "mixed")
		equalData(t, "entries", datas(all), evs(0, 5))
		if offs[0] != all[4].Offset {
			t.Fatalf("Append after queued appends returned offset %q, the log has %q", offs[0], all[4].Offset)
		}
	})

	t.Run("Refusals", func(t *testing.T) {
		leakCheck(t)
		s := newStore(t)
		q := s.(durable.QueuedAppender)

		// A closed log refuses the batch and the one done returns next.
		mustAppend(t, s, "closed", evs(0, 1))
		mustClose(t, s, "closed")
		o := newOutcomes(evs(1, 1))
		q.AppendQueued("closed", evs(1, 1), durable.AppendOptions{}, o.done)
		for i := range 2 {
			if err := o.wait(t); !errors.Is(err, durable.ErrLogClosed) {
				t.Fatalf("batch %d on a closed log: %v, want ErrLogClosed", i, err)
			}
		}
		equalData(t, "closed log", datas(mustSnapshot(t, s, "closed")), evs(0, 1))

		// A bad run id is refused, before the store is involved.
		o = newOutcomes()
		q.AppendQueued("bad\nid", evs(0, 1), durable.AppendOptions{}, o.done)
		if err := o.wait(t); err == nil {
			t.Fatal("a run id with a newline was accepted")
		}

		// An append fenced with a stale epoch stores nothing.
		ctx := ctxT(t)
		mustCreate(t, s, durable.RunRecord{RunID: "fenced", ThreadID: "t", StartedAt: ms(1)})
		old, err := s.Claim(ctx, "fenced")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, "fenced"); err != nil {
			t.Fatal(err)
		}
		o = newOutcomes()
		q.AppendQueued("fenced", evs(0, 1), durable.AppendOptions{Epoch: old.Epoch}, o.done)
		var lost *durable.ClaimLostError
		if err := o.wait(t); !errors.As(err, &lost) {
			t.Fatalf("stale epoch: %v, want a *ClaimLostError", err)
		}
		if got := mustSnapshot(t, s, "fenced"); len(got) != 0 {
			t.Fatalf("a stale epoch stored %d entries", len(got))
		}
	})

	t.Run("Fence", func(t *testing.T) {
		leakCheck(t)
		s := newStore(t)
		ctx := ctxT(t)
		mustCreate(t, s, durable.RunRecord{RunID: "f", ThreadID: "t", StartedAt: ms(1)})
		claim, err := s.Claim(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		f := durable.NewFence(s, claim, testLogger(t))
		o := newOutcomes()
		queue := f.QueueAppends(o.done)
		if queue == nil {
			t.Fatal("QueueAppends returned nil for a QueuedAppender")
		}
		queue(evs(0, 2))
		if err := o.wait(t); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, "f"); err != nil {
			t.Fatal(err)
		}
		queue(evs(2, 1))
		if err := o.wait(t); !errors.Is(err, durable.ErrClaimLost) {
			t.Fatalf("after a successor's claim: %v, want ErrClaimLost", err)
		}
		// The loss latched: the next batch fails without the store.
		if f.Lost() == nil {
			t.Fatal("the fence did not latch the lost claim")
		}
		queue(evs(3, 1))
		if err := o.wait(t); !errors.Is(err, durable.ErrClaimLost) {
			t.Fatalf("after the latch: %v, want ErrClaimLost", err)
		}
		equalData(t, "entries", datas(mustSnapshot(t, s, "f")), evs(0, 2))
	})

	t.Run("ManyLogs", func(t *testing.T) {
		leakCheck(t)
		s := newStore(t)
		q := s.(durable.QueuedAppender)
		const logs, batches = 8, 20
		all := make([]*outcomes, logs)
		for l := range logs {
			var next [][][]byte
			for b := 1; b < batches; b++ {
				next = append(next, evs(b, 1))
			}
			all[l] = newOutcomes(next...)
			q.AppendQueued(fmt.Sprint("log-", l), evs(0, 1), durable.AppendOptions{}, all[l].done)
		}
		for l, o := range all {
			for b := range batches {
				if err := o.wait(t); err != nil {
					t.Fatalf("log %d batch %d: %v", l, b, err)
				}
			}
		}
		for l := range logs {
			equalData(t, fmt.Sprint("log ", l), datas(mustSnapshot(t, s, fmt.Sprint("log-", l))), evs(0, batches))
		}
	})
}
