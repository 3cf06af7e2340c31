package server

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
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

// storeQueue is a store's queue for a groupCommit in queued mode: the
// test runs the store's writer, taking a batch and completing the append.
type storeQueue struct {
	take     func() [][]byte
	done     func(error) bool
	asked    chan struct{} // an append was queued (by add, or by a completion)
	batches  [][]string    // the batches taken, as they were when taken
	observed int           // entries reported to the metrics
}

func newQueuedCommit(t *testing.T) (*groupCommit, *storeQueue) {
	q := &storeQueue{asked: make(chan struct{}, 1)}
	g := newGroupCommit(func([][]byte) error {
		t.Error("the appender goroutine ran with a queueing store")
		return nil
	}, 0)
	g.queueWith(func(take func() [][]byte, done func(error) bool) func() {
		q.take, q.done = take, done
		return func() { q.asked <- struct{}{} }
	}, func(n int, _ time.Duration) { q.observed += n })
	t.Cleanup(func() {
		if !t.Failed() && len(q.asked) != 0 {
			t.Error("an append was left queued")
		}
	})
	return g, q
}

// takeNext runs the queued append's start: it takes the batch.
func (q *storeQueue) takeNext(t *testing.T) []string {
	t.Helper()
	select {
	case <-q.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("no append queued")
	}
	var b []string
	for _, e := range q.take() {
		b = append(b, string(e))
	}
	q.batches = append(q.batches, b)
	return b
}

// finish completes the append taken with err, on a goroutine of its own as
// the store's writer would, and reports whether it asked to run again.
func (q *storeQueue) finish(err error) bool {
	again := make(chan bool)
	go func() { again <- q.done(err) }()
	if <-again {
		q.asked <- struct{}{}
		return true
	}
	return false
}

func TestGroupCommitQueuedTakesWhatQueuedUntilTheAppendRuns(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g, q := newQueuedCommit(t)
	for i := range 3 {
		if err := g.add(fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// One append queued for the three, which takes them all.
	if b := q.takeNext(t); fmt.Sprint(b) != "[e0 e1 e2]" {
		t.Fatalf("first batch %v", b)
	}
	// What is added while it is in flight is the next batch.
	for i := 3; i < maxUnstored; i++ { // up to maxUnstored with three in flight
		if err := g.add(fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if !q.finish(nil) {
		t.Fatal("the completion did not ask for another append with entries queued")
	}
	if b := q.takeNext(t); len(b) != maxUnstored-3 || b[0] != "e3" {
		t.Fatalf("second batch %v", b)
	}
	if q.finish(nil) {
		t.Fatal("the completion asked for another append with nothing queued")
	}
	if err := g.flush(); err != nil {
		t.Fatal(err)
	}
	// The next add queues an append again, its batch in an earlier
	// batch's slice: what that held must not show through.
	if err := g.add([]byte("later")); err != nil {
		t.Fatal(err)
	}
	if b := q.takeNext(t); fmt.Sprint(b) != "[later]" {
		t.Fatalf("third batch %v", b)
	}
	q.finish(nil)
	g.stop()
	if q.observed != maxUnstored+1 {
		t.Fatalf("metrics saw %d entries appended, want %d", q.observed, maxUnstored+1)
	}
}

// A store that appends at once never holds its producer back: every
// maxUnstored adds, the producer lets other goroutines (its readers) run.
func TestGroupCommitYieldsWhenNeverHeldBack(t *testing.T) {
	// One P: another goroutine runs only when this one blocks or yields
	// (or after 10 ms of preemption, far more than these adds take).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	g := newGroupCommit(func([][]byte) error { return nil }, 0)
	g.queueWith(func(take func() [][]byte, done func(error) bool) func() {
		return func() {
			for take(); done(nil); take() {
			}
		}
	}, func(int, time.Duration) {})
	defer g.stop()
	for round := range 3 {
		var ran atomic.Bool
		go ran.Store(true)
		for i := range maxUnstored {
			if err := g.add(fmt.Appendf(nil, "e%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if !ran.Load() {
			t.Fatalf("round %d: %d adds that never waited let no other goroutine run", round, maxUnstored)
		}
	}
}

func TestGroupCommitQueuedFirstErrorSticks(t *testing.T) {
	boom := errors.New("disk full")
	g, q := newQueuedCommit(t)
	_ = g.add([]byte("a"))
	q.takeNext(t)
	_ = g.add([]byte("b")) // queued behind the batch in flight
	if q.finish(boom) {
		t.Fatal("a failed append asked for another")
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

// A store that refuses at once completes the append before taking
// anything: the entries are dropped and the error sticks.
func TestGroupCommitQueuedRefusedAtOnce(t *testing.T) {
	boom := errors.New("store closed")
	g := newGroupCommit(func([][]byte) error { return nil }, 0)
	g.queueWith(func(_ func() [][]byte, done func(error) bool) func() {
		return func() { done(boom) }
	}, func(int, time.Duration) { t.Error("metrics for an append never taken") })
	if err := g.add([]byte("a")); err != nil {
		t.Fatal(err) // the refusal comes with the append, after add queued it
	}
	if err := g.flush(); !errors.Is(err, boom) {
		t.Fatalf("flush: %v", err)
	}
	if err := g.add([]byte("b")); !errors.Is(err, boom) {
		t.Fatalf("add after the refusal: %v", err)
	}
	g.stop()
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
	q.takeNext(t)
	q.finish(nil) // "over" is added after it: its add queues the next append
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	q.takeNext(t)
	q.finish(nil)
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
	g.queueWith(func(func() [][]byte, func(error) bool) func() {
		t.Fatal("queue asked for with a linger")
		return nil
	}, nil)
	_ = g.add([]byte("a"))
	g.stop()
	if fmt.Sprint(r.batches) != "[[a]]" {
		t.Fatalf("batches %v", r.batches)
	}
}

// TestProducerKeep checks the entries a producer hands its log: each a
// copy of its event, never changed by the entries cut after it, capped so
// that an append to one cannot reach the next.
func TestProducerKeep(t *testing.T) {
	var p producer
	wire := []byte("data: {\"type\":\"X\"}\n\n")
	var kept [][]byte
	for i := range 200 {
		wire[10] = byte('a' + i%26)
		kept = append(kept, p.keep(wire))
	}
	big := bytes.Repeat([]byte("b"), 3*maxEntryBuf)
	kept = append(kept, p.keep(big), p.keep([]byte("after")))
	wire[10] = 'Z' // the caller's buffer is its own
	for i, e := range kept[:200] {
		_ = append(e, "scribble"...)
		want := []byte("data: {\"type\":\"X\"}\n\n")
		want[10] = byte('a' + i%26)
		if !bytes.Equal(e, want) || cap(e) != len(e) {
			t.Fatalf("entry %d: %q (cap %d), want %q", i, e, cap(e), want)
		}
	}
	if !bytes.Equal(kept[200], big) || string(kept[201]) != "after" {
		t.Fatal("an entry larger than the buffers was not kept whole")
	}
	if cap(p.entryBuf) > 3*maxEntryBuf {
		t.Fatalf("buffer of %d bytes", cap(p.entryBuf))
	}
	// Past a run's first entries, entries share buffers.
	var q producer
	if n := testing.AllocsPerRun(5, func() {
		for range 200 {
			q.keep(wire)
		}
	}); n > 20 {
		t.Fatalf("%.0f allocations for 200 entries", n)
	}
}
