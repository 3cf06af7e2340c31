package tail

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/internal/notify"
)

// fakeLog is a log the test appends to as a store would: stored, then
// cached (and woken) through Recent.
type fakeLog struct {
	mu      sync.Mutex
	entries [][]byte
	closed  bool
	queries atomic.Int64 // queries for entries (limit > 0)
	states  atomic.Int64 // queries for the log's state only
}

func (f *fakeLog) query(ctx context.Context, runID string, after int64, limit int) (*State, error) {
	if limit > 0 {
		f.queries.Add(1)
	} else {
		f.states.Add(1)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := &State{Exists: len(f.entries) > 0 || f.closed, Last: int64(len(f.entries)), Closed: f.closed}
	for seq := after + 1; limit > 0 && seq <= st.Last && len(st.Entries) < limit; seq++ {
		st.Entries = append(st.Entries, durable.Entry{Offset: durable.FormatOffset("t", runID, seq), Data: f.entries[seq-1]})
	}
	return st, nil
}

// cachedReader reads f's log through a cache of recent entries that wakes
// hub, as the SQL stores do.
func cachedReader(hub *notify.Hub, f *fakeLog, cachedTails bool) *Reader {
	return &Reader{CachedTails: cachedTails, Scheme: "t", Page: 64, Hub: hub, Closed: func() bool { return false },
		Query: f.query, Recent: &Recent{Wakes: hub}}
}

// A tailer kept in step with the appends reads every entry from the
// cache: the wake-up of an append it has read never reaches it, so it
// never queries the store to find nothing new.
func TestTailerInStepNeverQueries(t *testing.T) {
	const n = 5000
	var hub notify.Hub
	f := &fakeLog{}
	r := cachedReader(&hub, f, false)
	read := make(chan int, 1)
	done := make(chan error, 1)
	f.entries = append(f.entries, []byte("e1"))
	r.Recent.Add("t", "r", 1, batch(1, 1))
	go func() {
		got := 0
		for es, err := range r.ReadBatches(t.Context(), "r", durable.FromStart) {
			if err != nil {
				done <- err
				return
			}
			got += len(es)
			read <- got
		}
		done <- nil
	}()
	for i := 2; i <= n; i++ {
		for got := <-read; got < i-1; got = <-read {
		}
		f.mu.Lock()
		f.entries = append(f.entries, batch(i, 1)[0])
		f.mu.Unlock()
		r.Recent.Add("t", "r", int64(i), batch(i, 1))
	}
	for got := <-read; got < n; got = <-read {
	}
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	r.Recent.Closed("r", n)
	hub.Wake("r")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if q := f.queries.Load(); q != 0 {
		t.Fatalf("the tailer queried the store %d times for %d entries it had in the cache", q, n)
	}
}

// Add wakes the log's tailers in one step with its entries becoming
// visible: a wait taken together with the entries is not woken for them.
func TestWaitTakenWithEntriesIsNotWokenForThem(t *testing.T) {
	var hub notify.Hub
	c := &Recent{Wakes: &hub}
	sub := hub.Subscribe("r")
	defer sub.Close()
	w1, es, _ := c.waitAfter(sub, "r", 0, nil)
	if es != nil {
		t.Fatalf("entries of an empty cache: %v", es)
	}
	c.Add("t", "r", 1, batch(1, 1))
	select {
	case <-w1.C:
	default:
		t.Fatal("Add did not wake the waiting tailer")
	}
	w2, es, _ := c.waitAfter(sub, "r", 0, nil)
	if got := seqs(t, es); len(got) != 1 || got[0] != "e1" {
		t.Fatalf("cached entries %v, want e1", got)
	}
	select {
	case <-w2.C:
		t.Fatal("a wait taken with the entries is woken for them")
	default:
	}
	c.Add("t", "r", 2, batch(2, 1))
	// The wake-up is left unread: the next wait, taken with e2, takes it
	// out, and its generation tells that a wake-up came in between.
	w3, es, _ := c.waitAfter(sub, "r", 1, nil)
	if got := seqs(t, es); len(got) != 1 || got[0] != "e2" || w3.Gen == w2.Gen {
		t.Fatalf("cached entries %v, generations %d then %d", got, w2.Gen, w3.Gen)
	}
	select {
	case <-w3.C:
		t.Fatal("a wait taken with e2 is woken for it")
	default:
	}
	if w4, _, _ := c.waitAfter(sub, "r", 2, nil); w4.Gen != w3.Gen {
		t.Fatalf("generation %d then %d with no wake-up between", w3.Gen, w4.Gen)
	}
	c.Add("t", "r", 3, batch(3, 1))
	select {
	case <-w3.C:
	default:
		t.Fatal("the next Add did not wake the tailer")
	}
}

// A read resuming after an offset of a log the cache holds (a stream taken
// over from net/http continues so) starts without a query; past the
// cache's tail it asks the store, which refuses an offset from the future.
func TestResumeFromTheCacheNeverQueries(t *testing.T) {
	var hub notify.Hub
	f := &fakeLog{entries: batch(1, 3)}
	r := cachedReader(&hub, f, false)
	r.Recent.Add("t", "r", 1, batch(1, 3))
	var got []string
	for es, err := range r.ReadBatches(t.Context(), "r", durable.FormatOffset("t", "r", 2)) {
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			got = append(got, string(e.Data))
		}
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		r.Recent.Closed("r", 3)
	}
	if len(got) != 1 || got[0] != string(batch(3, 1)[0]) {
		t.Fatalf("read %q after the second entry, want the third", got)
	}
	if q, s := f.queries.Load(), f.states.Load(); q+s != 0 {
		t.Fatalf("a resume inside the cache queried the store %d times (%d for the state)", q+s, s)
	}
	for _, err := range r.ReadBatches(t.Context(), "r", durable.FormatOffset("t", "r", 5)) {
		if !errors.Is(err, durable.ErrInvalidOffset) {
			t.Fatalf("a resume past the log's tail: %v, want an invalid offset", err)
		}
	}
	if f.states.Load() == 0 {
		t.Fatal("a resume past the cache's tail did not ask the store")
	}
}

// A read starting at the cached tail of an open log (a reconnect, a stream
// taken over from net/http) waits for the next append without asking the
// store: every append of this process passes through the cache.
func TestResumeAtTheCachedTailWaitsWithoutQuery(t *testing.T) {
	var hub notify.Hub
	f := &fakeLog{entries: batch(1, 3)}
	r := cachedReader(&hub, f, true)
	r.Recent.Add("t", "r", 1, batch(1, 3))
	got := make(chan string, 1)
	go func() {
		for es, err := range r.ReadBatches(t.Context(), "r", durable.FormatOffset("t", "r", 3)) {
			if err != nil {
				got <- err.Error()
				return
			}
			got <- string(es[0].Data)
			return
		}
	}()
	for hub.Waiters() == 0 { // the read parked
		runtime.Gosched()
	}
	if q, s := f.queries.Load(), f.states.Load(); q+s != 0 {
		t.Fatalf("a read at the cached tail queried the store %d times (%d for the state)", q+s, s)
	}
	f.mu.Lock()
	f.entries = append(f.entries, batch(4, 1)...)
	f.mu.Unlock()
	r.Recent.Add("t", "r", 4, batch(4, 1))
	if g := <-got; g != string(batch(4, 1)[0]) {
		t.Fatalf("woken with %q, want the fourth entry", g)
	}
	if q := f.queries.Load(); q != 0 {
		t.Fatalf("the woken read queried the store %d times for a cached entry", q)
	}
}

// A read parked on a live log ends when its context does: the wait is on
// the subscription alone, and the read's end interrupts it. Reads
// cancelled at every point of their loop, while appends wake them, all
// end (one cancelled between taking its wait and parking would park for
// good if the interrupt were lost).
func TestReadEndsWithItsContext(t *testing.T) {
	var hub notify.Hub
	f := &fakeLog{entries: batch(1, 1)}
	r := cachedReader(&hub, f, true)
	r.Recent.Add("t", "r", 1, batch(1, 1))

	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan int, 1)
	go func() {
		n := 0
		for es, err := range r.ReadBatches(ctx, "r", durable.FromStart) {
			if err != nil {
				t.Error(err)
			}
			n += len(es)
		}
		ended <- n
	}()
	for hub.Waiters() == 0 { // the read parked at the tail
		runtime.Gosched()
	}
	cancel()
	if n := <-ended; n != 1 {
		t.Fatalf("the cancelled read yielded %d entries, want 1", n)
	}

	// Many reads of one busy log, each cancelled by another goroutine
	// after a number of batches, while the log keeps growing.
	const reads = 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var appender sync.WaitGroup
	appender.Add(1)
	go func() {
		defer appender.Done()
		for seq := 2; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			f.mu.Lock()
			f.entries = append(f.entries, batch(seq, 1)...)
			f.mu.Unlock()
			r.Recent.Add("t", "r", int64(seq), batch(seq, 1))
			runtime.Gosched()
		}
	}()
	for i := range reads {
		ctx, cancel := context.WithCancel(t.Context())
		batches := make(chan struct{}, 64)
		readEnded := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(readEnded)
			for _, err := range r.ReadBatches(ctx, "r", durable.Now) {
				if err != nil {
					t.Error(err)
				}
				select {
				case batches <- struct{}{}:
				default:
				}
			}
		}()
		go func() {
			defer wg.Done()
			defer cancel()
			for range i % 5 {
				select {
				case <-batches:
				case <-readEnded: // ended by itself (an error, reported): nothing to cancel
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	appender.Wait()

	// Reads of a quiet log cancelled as they start: an interrupt that came
	// before a wait began is taken out by the wait, and nothing appended
	// wakes the read after it.
	for range 500 {
		ctx, cancel := context.WithCancel(t.Context())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range r.ReadBatches(ctx, "r", durable.Now) {
			}
		}()
		cancel()
	}
	wg.Wait()
}

// The interrupt of a read whose context ended before its wait began is
// taken out by the wait (as any earlier wake-up is): the park that follows
// must look at the context rather than block.
func TestParkAfterAnInterruptTakenOut(t *testing.T) {
	var hub notify.Hub
	r := &Reader{Hub: &hub, Closed: func() bool { return false }}
	sub := hub.Subscribe("r")
	defer sub.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	sub.Interrupt() // what the read's context.AfterFunc does
	w := sub.Wait()
	if r.park(ctx, w.C, nil) {
		t.Fatal("a park after the read's end reported a wake-up")
	}
}
