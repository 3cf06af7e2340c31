package tail

import (
	"fmt"
	"testing"

	"github.com/goai-sdk/goai/durable"
)

func batch(from, n int) [][]byte {
	var b [][]byte
	for i := range n {
		b = append(b, fmt.Appendf(nil, "e%d", from+i))
	}
	return b
}

func seqs(t *testing.T, es []durable.Entry) []string {
	t.Helper()
	var out []string
	for _, e := range es {
		seq, err := durable.ParseOffset("t", "r", e.Offset)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("e%d", seq); string(e.Data) != want {
			t.Fatalf("entry %d holds %q, want %q", seq, e.Data, want)
		}
		out = append(out, string(e.Data))
	}
	return out
}

// after returns a copy of the cached entries of runID after seq pos, nil
// unless the cache holds the entry right after pos.
func (c *Recent) after(runID string, pos int64) []durable.Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.appendAfterLocked(nil, runID, pos)
}

func TestRecent(t *testing.T) {
	var c Recent
	if es := c.after("r", 0); es != nil {
		t.Fatalf("empty cache yielded %v", es)
	}
	src := batch(1, 3)
	c.Add("t", "r", 1, src)
	src[0][0] = 'X' // the cache holds copies
	if got := fmt.Sprint(seqs(t, c.after("r", 0))); got != "[e1 e2 e3]" {
		t.Fatalf("after 0: %s", got)
	}
	// The copies share one buffer; appending to one entry's bytes must
	// not write over the next's.
	_ = append(c.after("r", 0)[0].Data, 'Z')
	if got := fmt.Sprint(seqs(t, c.after("r", 0))); got != "[e1 e2 e3]" {
		t.Fatalf("after an append to the first entry's bytes: %s", got)
	}
	if got := fmt.Sprint(seqs(t, c.after("r", 2))); got != "[e3]" {
		t.Fatalf("after 2: %s", got)
	}
	if es := c.after("r", 3); es != nil {
		t.Fatalf("after the tail: %v", seqs(t, es))
	}
	// A gap (entries 4-5 appended elsewhere) starts afresh: a reader at 3
	// must query, not skip 4 and 5.
	c.Add("t", "r", 6, batch(6, 1))
	if es := c.after("r", 3); es != nil {
		t.Fatalf("read across a gap: %v", seqs(t, es))
	}
	if got := fmt.Sprint(seqs(t, c.after("r", 5))); got != "[e6]" {
		t.Fatalf("after 5: %s", got)
	}
	// Bounded: a long run keeps its last entries only, in order, whichever
	// slot of the ring the oldest is in.
	next := 7
	for _, n := range []int{50, 50, 50, 1, 7, 127, 128, 300, 3, 64} {
		c.Add("t", "r", int64(next), batch(next, n))
		next += n
		last := next - 1
		if n := len(c.logs["r"].ring); n > recentEntries {
			t.Fatalf("%d entries kept", n)
		}
		oldest := max(6, last-recentEntries+1) // the gap above restarted the log at 6
		if es := c.after("r", int64(oldest-2)); es != nil {
			t.Fatal("an entry older than the window was served")
		}
		for _, pos := range []int{oldest - 1, oldest, max(oldest, last-60), last - 2, last - 1} {
			es := c.after("r", int64(pos))
			if len(es) != last-pos || string(es[0].Data) != fmt.Sprintf("e%d", pos+1) {
				t.Fatalf("after %d of %d: %d entries (%v)", pos, last, len(es), es)
			}
			seqs(t, es)
		}
	}
	held := c.after("r", int64(next-2))
	c.Add("t", "r", int64(next), batch(next, recentEntries))
	if got := fmt.Sprint(seqs(t, held)); got != fmt.Sprintf("[e%d]", next-1) {
		t.Fatalf("a slice handed out changed: %s", got)
	}
	c.Forget("r")
	if es := c.after("r", int64(next)); es != nil {
		t.Fatal("forgotten log still served")
	}
}

func TestRecentOwned(t *testing.T) {
	var c Recent
	src := batch(1, 2)
	c.AddOwned("t", "r", 1, src)
	es := c.after("r", 0)
	if got := fmt.Sprint(seqs(t, es)); got != "[e1 e2]" {
		t.Fatalf("after 0: %s", got)
	}
	if &es[0].Data[0] != &src[0][0] || &es[1].Data[0] != &src[1][0] {
		t.Fatal("handed-over entries were copied")
	}
	src[0], src[1] = nil, nil // the batch slice itself is the caller's again
	if got := fmt.Sprint(seqs(t, c.after("r", 0))); got != "[e1 e2]" {
		t.Fatalf("after the caller reused its batch slice: %s", got)
	}
}

func TestRecentClosed(t *testing.T) {
	var c Recent
	if c.fromStart("r") || c.ended("r", 0) {
		t.Fatal("an empty cache knows a log")
	}
	c.Add("t", "r", 1, batch(1, 3))
	if !c.fromStart("r") {
		t.Fatal("a log cached from its first entry is not known from the start")
	}
	if c.ended("r", 3) {
		t.Fatal("an open log ended")
	}
	c.Closed("r", 3)
	if es := c.after("r", 1); es != nil {
		t.Fatalf("a closed log's entries are kept: %v", seqs(t, es))
	}
	if c.ended("r", 2) {
		t.Fatal("a reader short of the last entry was told the log ended")
	}
	if !c.ended("r", 3) {
		t.Fatal("a reader at the last entry of a closed log was not told it ended")
	}
	if c.fromStart("r") {
		t.Fatal("a closed log with entries is served from the start without a query")
	}
	c.Closed("empty", 0)
	if !c.fromStart("empty") || !c.ended("empty", 0) {
		t.Fatal("a log closed empty is not known")
	}
	c.Clear()
	if c.ended("r", 3) || c.fromStart("empty") {
		t.Fatal("Clear kept a log")
	}
	// Another process's appends after a marker start the log afresh.
	c.Closed("r", 3)
	c.Add("t", "r", 9, batch(9, 1))
	if c.ended("r", 9) {
		t.Fatal("a log started afresh is still closed")
	}
}

// A closed log's ring is the next log's: a busy server's runs start and
// end all the time, and each would grow a ring of its own.
func TestRecentReusesClosedRings(t *testing.T) {
	var c Recent
	c.Add("t", "a", 1, batch(1, recentEntries+5))
	ring := c.logs["a"].ring
	if len(ring) != recentEntries || cap(ring) != recentEntries {
		t.Fatalf("a full ring is %d long, %d capacity", len(ring), cap(ring))
	}
	c.Closed("a", recentEntries+5)
	if !c.ended("a", recentEntries+5) {
		t.Fatal("the closed log is not known closed")
	}
	if len(c.spare) != 1 || c.spare[0][:recentEntries][0].Data != nil {
		t.Fatalf("the closed log's ring was not kept emptied: %d spares", len(c.spare))
	}
	c.Add("t", "b", 1, batch(1, 3))
	if got := c.logs["b"].ring; &got[0] != &ring[0] {
		t.Fatal("a new log grew a ring of its own with a spare at hand")
	}
	var got []string
	for _, e := range c.after("b", 0) {
		got = append(got, string(e.Data))
	}
	if fmt.Sprint(got) != "[e1 e2 e3]" {
		t.Fatalf("the new log in the reused ring: %s", got)
	}
	// A small ring is not kept: it would not hold a new log's window.
	c.Add("t", "small", 1, batch(1, 2))
	c.Closed("small", 2)
	if len(c.spare) != 0 {
		t.Fatalf("%d spares after a small ring's log closed", len(c.spare))
	}
}

// A full cache drops the markers of closed logs before anything else: the
// open logs' tailers keep reading from it.
func TestRecentEvictsClosedLogsFirst(t *testing.T) {
	var c Recent
	c.Add("t", "open", 1, batch(1, 2))
	for i := range recentLogs - 1 {
		c.Closed(fmt.Sprintf("closed-%d", i), 1)
	}
	c.Add("t", "new", 1, batch(1, 1)) // the cache is full: evicts
	if !c.holds("open", 2) || !c.holds("new", 1) {
		t.Fatal("an open log was evicted while closed markers filled the cache")
	}
	if c.ended("closed-0", 1) {
		t.Fatal("a closed marker outlived the eviction")
	}
	// Open logs alone filling the cache start it afresh.
	for i := range recentLogs {
		c.Add("t", fmt.Sprintf("busy-%d", i), 1, batch(1, 1))
	}
	if c.holds("open", 2) {
		t.Fatal("a cache full of open logs kept growing")
	}
	c.mu.Lock()
	n := len(c.logs)
	c.mu.Unlock()
	if n > recentLogs {
		t.Fatalf("%d logs cached, bound %d", n, recentLogs)
	}
}

// BenchmarkRecentAdd adds a paced run's tokens, one an append, to the
// cache of a hundred open logs; an op is one token.
func BenchmarkRecentAdd(b *testing.B) {
	var c Recent
	token := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"w7 ","timestamp":1796430488456}`)
	runs := make([]string, 100)
	for i := range runs {
		runs[i] = fmt.Sprintf("load-dncdf8cm2p0f-%d-10", i)
	}
	seq := make([]int64, len(runs))
	batch := [][]byte{token}
	i := 0
	for b.Loop() {
		r := i % len(runs)
		seq[r]++
		c.AddOwned("sqlite", runs[r], seq[r], batch)
		i++
	}
}
