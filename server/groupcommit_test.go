package server

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// recorder is an appendBatch that records batches and can hold an append.
type recorder struct {
	mu      sync.Mutex
	batches [][]string
	entered chan struct{} // receives once per append
	release chan struct{} // an append waits for it when non-nil
	fail    error
}

func (r *recorder) append(batch [][]byte) error {
	if r.entered != nil {
		r.entered <- struct{}{}
	}
	if r.release != nil {
		<-r.release
	}
	var b []string
	for _, e := range batch {
		b = append(b, string(e))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, b)
	return r.fail
}

func TestGroupCommitBatchesWhatQueuesDuringAnAppend(t *testing.T) {
	r := &recorder{entered: make(chan struct{}, 10), release: make(chan struct{})}
	g := newGroupCommit(r.append, 0)
	defer g.stop()
	if err := g.add([]byte("e0")); err != nil {
		t.Fatal(err)
	}
	<-r.entered // the first append is in flight and held
	for i := 1; i < maxUnstored; i++ {
		if err := g.add(fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	close(r.release)
	if err := g.flush(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.batches) != 2 || len(r.batches[0]) != 1 || len(r.batches[1]) != maxUnstored-1 {
		t.Fatalf("batches %d: want [1 %d]", len(r.batches), maxUnstored-1)
	}
	for i, e := range r.batches[1] {
		if e != fmt.Sprintf("e%d", i+1) {
			t.Fatalf("entry %d is %s: order lost", i+1, e)
		}
	}
}

func TestGroupCommitFlushSkipsTheLinger(t *testing.T) {
	r := &recorder{}
	g := newGroupCommit(r.append, time.Hour)
	defer g.stop()
	_ = g.add([]byte("a"))
	_ = g.add([]byte("b"))
	r.mu.Lock()
	n := len(r.batches)
	r.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d batches appended during an hour's linger", n)
	}
	if err := g.flush(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.batches) != 1 || len(r.batches[0]) != 2 {
		t.Fatalf("batches %v", r.batches)
	}
}

func TestGroupCommitFirstErrorSticks(t *testing.T) {
	boom := errors.New("disk full")
	r := &recorder{fail: boom}
	g := newGroupCommit(r.append, 0)
	defer g.stop()
	_ = g.add([]byte("a"))
	if err := g.flush(); !errors.Is(err, boom) {
		t.Fatalf("flush: %v", err)
	}
	if err := g.add([]byte("b")); !errors.Is(err, boom) {
		t.Fatalf("add after a failed append: %v", err)
	}
}

func TestGroupCommitStopStoresWhatIsQueued(t *testing.T) {
	r := &recorder{}
	g := newGroupCommit(r.append, time.Hour)
	_ = g.add([]byte("a"))
	g.stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.batches) != 1 {
		t.Fatalf("batches %v", r.batches)
	}
}

func TestGroupCommitRecoversAStorePanic(t *testing.T) {
	g := newGroupCommit(func([][]byte) error { panic("driver bug") }, 0)
	defer g.stop()
	_ = g.add([]byte("a"))
	if err := g.flush(); err == nil {
		t.Fatal("a panicking append reported success")
	}
}

func TestGroupCommitAddWaitsWhileTooMuchIsUnstored(t *testing.T) {
	for _, linger := range []time.Duration{0, time.Hour} {
		r := &recorder{entered: make(chan struct{}, maxUnstored+2), release: make(chan struct{})}
		g := newGroupCommit(r.append, linger)
		for i := range maxUnstored {
			if err := g.add(fmt.Appendf(nil, "e%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		added := make(chan error)
		go func() { added <- g.add([]byte("over")) }()
		<-r.entered // the appender took a batch (even while lingering) and is held
		select {
		case err := <-added:
			t.Fatalf("add past %d unstored entries returned (%v) before any was stored", maxUnstored, err)
		case <-time.After(100 * time.Millisecond): // watching for something that must not happen
		}
		close(r.release)
		if err := <-added; err != nil {
			t.Fatal(err)
		}
		if err := g.flush(); err != nil {
			t.Fatal(err)
		}
		g.stop()
		r.mu.Lock()
		var all []string
		for _, b := range r.batches {
			all = append(all, b...)
		}
		r.mu.Unlock()
		if len(all) != maxUnstored+1 || all[maxUnstored] != "over" || all[maxUnstored-1] != fmt.Sprintf("e%d", maxUnstored-1) {
			t.Fatalf("linger %v: stored %v", linger, all)
		}
	}
}

// An idle run holds no appender: it ends once the queue is stored, and the
// next add starts another.
func TestGroupCommitAppenderEndsWhenIdle(t *testing.T) {
	before := goleak.IgnoreCurrent()
	r := &recorder{}
	g := newGroupCommit(r.append, 0)
	for i := range 3 {
		if err := g.add(fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
		if err := g.flush(); err != nil {
			t.Fatal(err)
		}
		// goleak.Find retries until the appender has returned.
		if err := goleak.Find(before); err != nil {
			t.Fatalf("after add %d, with everything stored: %v", i, err)
		}
	}
	g.stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	if fmt.Sprint(r.batches) != "[[e0] [e1] [e2]]" {
		t.Fatalf("batches %v", r.batches)
	}
}

// storeQueue is a store's queue for a groupCommit in queued mode: it holds
// the batch in flight until the test completes it, as a store's writer
// would, on another goroutine.
type storeQueue struct {
	done     func(error) [][]byte
	flying   chan [][]byte // the batch handed over, when queue is called
	batches  [][]string    // completed batches, as they were when completed
	observed int           // entries reported to the metrics
}

func newQueuedCommit(t *testing.T) (*groupCommit, *storeQueue) {
	q := &storeQueue{flying: make(chan [][]byte, 1)}
	g := newGroupCommit(func([][]byte) error {
		t.Error("the appender goroutine ran with a queueing store")
		return nil
	}, 0)
	g.queueWith(func(done func(error) [][]byte) func([][]byte) {
		q.done = done
		return func(batch [][]byte) { q.flying <- batch }
	}, func(n int, _ time.Duration) { q.observed += n })
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		if len(q.flying) != 0 {
			t.Error("a batch was left in flight")
		}
	})
	return g, q
}

// complete finishes the batch in flight with err, on a goroutine of its
// own as the store's writer would, and returns the next batch done handed
// back.
func (q *storeQueue) complete(t *testing.T, err error) [][]byte {
	t.Helper()
	var batch [][]byte
	select {
	case batch = <-q.flying:
	case <-time.After(10 * time.Second):
		t.Fatal("no batch in flight")
	}
	var b []string
	for _, e := range batch {
		b = append(b, string(e))
	}
	q.batches = append(q.batches, b)
	next := make(chan [][]byte)
	go func() { next <- q.done(err) }()
	n := <-next
	if n != nil {
		q.flying <- n
	}
	return n
}

func TestGroupCommitQueuedBatchesWhatQueuesDuringAnAppend(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g, q := newQueuedCommit(t)
	if err := g.add([]byte("e0")); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < maxUnstored; i++ {
		if err := g.add(fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if next := q.complete(t, nil); len(next) != maxUnstored-1 {
		t.Fatalf("the first completion handed back %d entries, want the %d queued meanwhile", len(next), maxUnstored-1)
	}
	if next := q.complete(t, nil); next != nil {
		t.Fatalf("the last completion handed back %d entries", len(next))
	}
	if err := g.flush(); err != nil {
		t.Fatal(err)
	}
	// The next add starts a batch again, in the slice of an earlier one:
	// what that batch held must not show through.
	if err := g.add([]byte("later")); err != nil {
		t.Fatal(err)
	}
	q.complete(t, nil)
	g.stop()
	if len(q.batches) != 3 || len(q.batches[0]) != 1 || len(q.batches[1]) != maxUnstored-1 || fmt.Sprint(q.batches[2]) != "[later]" {
		t.Fatalf("batches %v", q.batches)
	}
	for i, e := range q.batches[1] {
		if e != fmt.Sprintf("e%d", i+1) {
			t.Fatalf("entry %d is %s: order lost", i+1, e)
		}
	}
	if q.observed != maxUnstored+1 {
		t.Fatalf("metrics saw %d entries appended, want %d", q.observed, maxUnstored+1)
	}
}

func TestGroupCommitQueuedFirstErrorSticks(t *testing.T) {
	boom := errors.New("disk full")
	g, q := newQueuedCommit(t)
	_ = g.add([]byte("a"))
	_ = g.add([]byte("b")) // queued behind the batch in flight
	if next := q.complete(t, boom); next != nil {
		t.Fatalf("a failed append handed back %d more entries", len(next))
	}
	if err := g.flush(); !errors.Is(err, boom) {
		t.Fatalf("flush: %v", err)
	}
	if err := g.add([]byte("c")); !errors.Is(err, boom) {
		t.Fatalf("add after a failed append: %v", err)
	}
	g.stop()
	if fmt.Sprint(q.batches) != "[[a]]" {
		t.Fatalf("batches %v", q.batches)
	}
}

func TestGroupCommitQueuedAddWaitsWhileTooMuchIsUnstored(t *testing.T) {
	g, q := newQueuedCommit(t)
	for i := range maxUnstored {
		if err := g.add(fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	added := make(chan error)
	go func() { added <- g.add([]byte("over")) }()
	select {
	case err := <-added:
		t.Fatalf("add past %d unstored entries returned (%v) before any was stored", maxUnstored, err)
	case <-time.After(100 * time.Millisecond): // watching for something that must not happen
	}
	q.complete(t, nil) // e0; e1... are handed back
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	for q.complete(t, nil) != nil {
	}
	if err := g.flush(); err != nil {
		t.Fatal(err)
	}
	g.stop()
	var all []string
	for _, b := range q.batches {
		all = append(all, b...)
	}
	if len(all) != maxUnstored+1 || all[maxUnstored] != "over" {
		t.Fatalf("stored %v", all)
	}
}

// With a linger, batches wait on a timer, which only the appender
// goroutine has: a store's queue is not used.
func TestGroupCommitLingerKeepsTheAppender(t *testing.T) {
	r := &recorder{}
	g := newGroupCommit(r.append, time.Hour)
	g.queueWith(func(func(error) [][]byte) func([][]byte) {
		t.Fatal("queue asked for with a linger")
		return nil
	}, nil)
	_ = g.add([]byte("a"))
	g.stop()
	if fmt.Sprint(r.batches) != "[[a]]" {
		t.Fatalf("batches %v", r.batches)
	}
}
