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
