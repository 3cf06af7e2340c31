package durabletest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// producer is the caller's side of a queued append: take hands out the
// batches lined up, in turn, and done collects the outcomes, asking for
// another round while batches are left. Both run on the store's
// goroutine, so they never block: outcomes are buffered.
type producer struct {
	lined [][][]byte // what take hands out, in turn
	sent  [][][]byte // what take handed out
	got   chan error
}

func newProducer(batches ...[][]byte) *producer {
	return &producer{lined: batches, got: make(chan error, len(batches)+1)}
}

func (p *producer) take() [][]byte {
	b := p.lined[0]
	p.lined = p.lined[1:]
	p.sent = append(p.sent, b)
	return b
}

func (p *producer) done(err error) bool {
	again := err == nil && len(p.lined) > 0
	p.got <- err
	return again
}

// wait returns the next outcome.
func (p *producer) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.got:
		return err
	case <-ctxT(t).Done():
		t.Fatal("a queued append got no outcome")
		return nil
	}
}

// QueuedAppends checks a store's durable.QueuedAppender: continuations, the
// outcome of every batch, and that the store keeps none of the batch slices.
func QueuedAppends(t *testing.T, newStore func(t *testing.T) durable.Store) {
	t.Run("ContinuationsInOrder", func(t *testing.T) {
		leakCheck(t)
		s := newStore(t)
		q := s.(durable.QueuedAppender)
		p := newProducer(evs(0, 1), evs(1, 3), evs(4, 1), evs(5, 2))
		q.AppendQueued("queued", durable.AppendOptions{}, p.take, p.done)
		for i := range 4 {
			if err := p.wait(t); err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
		}
		if len(p.lined) != 0 {
			t.Fatalf("%d batches never taken", len(p.lined))
		}
		// The store keeps no batch slice once its done has run (the entries'
		// bytes are handed over): reusing every slice handed to it changes
		// nothing stored.
		for _, b := range p.sent {
			for i := range b {
				b[i] = []byte("X")
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
		p := newProducer(evs(2, 2))
		q.AppendQueued("mixed", durable.AppendOptions{}, p.take, p.done)
		if err := p.wait(t); err != nil {
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

		// A closed log refuses the batch, and the append is not queued
		// again whatever done says.
		mustAppend(t, s, "closed", evs(0, 1))
		mustClose(t, s, "closed")
		p := newProducer(evs(1, 1), evs(2, 1))
		insist := func(err error) bool { p.got <- err; return true }
		q.AppendQueued("closed", durable.AppendOptions{}, p.take, insist)
		if err := p.wait(t); !errors.Is(err, durable.ErrLogClosed) {
			t.Fatalf("a closed log: %v, want ErrLogClosed", err)
		}
		equalData(t, "closed log", datas(mustSnapshot(t, s, "closed")), evs(0, 1))

		// A bad run id is refused at once, before anything is taken.
		p = newProducer(evs(0, 1))
		q.AppendQueued("bad\nid", durable.AppendOptions{}, p.take, p.done)
		if err := p.wait(t); err == nil {
			t.Fatal("a run id with a newline was accepted")
		}
		if len(p.sent) != 0 {
			t.Fatal("a refused append took its batch")
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
		p = newProducer(evs(0, 1))
		q.AppendQueued("fenced", durable.AppendOptions{Epoch: old.Epoch}, p.take, insist)
		var lost *durable.ClaimLostError
		if err := p.wait(t); !errors.As(err, &lost) {
			t.Fatalf("stale epoch: %v, want a *ClaimLostError", err)
		}
		if got := mustSnapshot(t, s, "fenced"); len(got) != 0 {
			t.Fatalf("a stale epoch stored %d entries", len(got))
		}
		// The store ignores a done that asks again after the error.
		select {
		case err := <-p.got:
			t.Fatalf("another outcome after a refusal: %v", err)
		case <-time.After(quiet):
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
		p := newProducer(evs(0, 2), evs(2, 1), evs(3, 1))
		once := func(err error) bool { p.got <- err; return false } // a round per queue()
		queue := f.QueueAppends(p.take, once)
		if queue == nil {
			t.Fatal("QueueAppends returned nil for a QueuedAppender")
		}
		queue()
		if err := p.wait(t); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, "f"); err != nil {
			t.Fatal(err)
		}
		queue()
		if err := p.wait(t); !errors.Is(err, durable.ErrClaimLost) {
			t.Fatalf("after a successor's claim: %v, want ErrClaimLost", err)
		}
		// The loss latched: the next append fails without the store.
		if f.Lost() == nil {
			t.Fatal("the fence did not latch the lost claim")
		}
		queue()
		if err := p.wait(t); !errors.Is(err, durable.ErrClaimLost) {
			t.Fatalf("after the latch: %v, want ErrClaimLost", err)
		}
		if len(p.sent) != 2 {
			t.Fatalf("%d batches taken, want 2 (none after the latch)", len(p.sent))
		}
		equalData(t, "entries", datas(mustSnapshot(t, s, "f")), evs(0, 2))
	})

	t.Run("ManyLogs", func(t *testing.T) {
		leakCheck(t)
		s := newStore(t)
		q := s.(durable.QueuedAppender)
		const logs, batches = 8, 20
		all := make([]*producer, logs)
		for l := range logs {
			var lined [][][]byte
			for b := range batches {
				lined = append(lined, evs(b, 1))
			}
			all[l] = newProducer(lined...)
			q.AppendQueued(fmt.Sprint("log-", l), durable.AppendOptions{}, all[l].take, all[l].done)
		}
		for l, p := range all {
			for b := range batches {
				if err := p.wait(t); err != nil {
					t.Fatalf("log %d batch %d: %v", l, b, err)
				}
			}
		}
		for l := range logs {
			equalData(t, fmt.Sprint("log ", l), datas(mustSnapshot(t, s, fmt.Sprint("log-", l))), evs(0, batches))
		}
	})
}
