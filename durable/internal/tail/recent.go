package tail

import (
	"sync"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/internal/notify"
)

// Recent bounds: the entries kept per log, and the logs kept at once. Past
// the latter the cache drops the markers of closed logs, and starts
// afresh if open logs alone fill most of it, which costs their tailers a
// query each (logs closed by another process are never forgotten
// otherwise). It is above the runs one server holds open at once (10,000
// in the scaling benchmark): every append to a log the cache lost costs
// each of its tailers a query.
const (
	recentEntries = 128
	recentLogs    = 16384
)

// Recent keeps the last entries this process appended to each open log, so
// that tailers woken by an append read it from memory instead of querying
// the store: on a paced run, one query per tailer per event was most of
// the read side's cost. An entry's seq is never reused and its data never
// changes once stored (except by Upsert, after which the store calls
// Forget), so a cached entry is never stale; what it lacks (entries
// appended by another process, a close) tailers still learn by querying
// when they are woken and find nothing new here. The zero Recent is ready.
type Recent struct {
	// Wakes, if set, is woken for a log by Add and AddOwned in one step
	// with its entries becoming visible, and a tailer takes its wait and
	// reads the cache in one step too. So a tailer that finds entries here
	// holds a wait taken after their wake-up: it is not woken again for
	// entries it has read, to find nothing new and query the store (a scan
	// of the SQLite journal each, about a tenth of an unpaced durable
	// server's CPU). Set it before the first Add.
	Wakes *notify.Hub

	mu     sync.Mutex
	logs   map[string]*recentLog
	minted []durable.Entry   // add's scratch: a batch's entries before they enter a ring
	spare  [][]durable.Entry // the emptied rings of closed logs, for new logs
}

// maxSpareRings bounds the rings of closed logs kept for new logs: about
// the runs that start while as many end, on a busy server.
const maxSpareRings = 256

// recentLog is one log's entries, in a ring: a log's array is written
// over, oldest first, once it holds recentEntries, instead of a new array
// every recentEntries appends, and a closed log's array goes to the next
// log to start (the two were a quarter of an unpaced durable server's
// allocation, and of its collection). Readers get copies of the entries
// (the structs: the data is shared, never modified), so no reader holds a
// slot that is written over.
type recentLog struct {
	first int64 // seq of the oldest entry held
	// ring holds the entries from first on: ring[head:] then ring[:head].
	// Until it is full (recentEntries long), head is 0 and it grows by
	// appending; a gap empties it, keeping its array.
	ring   []durable.Entry
	head   int
	closed bool                 // the log is closed after the entries
	mint   durable.OffsetMinter // the log's, made once: a paced run adds its tokens one by one
}

// last is the seq of the newest entry held (first-1 when none is).
func (l *recentLog) last() int64 { return l.first + int64(len(l.ring)) - 1 }

// push adds e after the newest entry, dropping the oldest once the ring is
// full.
func (l *recentLog) push(e durable.Entry) {
	if len(l.ring) < recentEntries {
		if len(l.ring) == cap(l.ring) {
			// Grown in steps to recentEntries exactly, the size a spare
			// must have.
			grown := make([]durable.Entry, len(l.ring), min(max(2*len(l.ring), 4), recentEntries))
			copy(grown, l.ring)
			l.ring = grown
		}
		l.ring = append(l.ring, e)
		return
	}
	l.ring[l.head] = e
	l.head++
	if l.head == len(l.ring) {
		l.head = 0
	}
	l.first++
}

// appendAfter appends to dst the entries held after seq pos, which must be
// between first-1 and last().
func (l *recentLog) appendAfter(dst []durable.Entry, pos int64) []durable.Entry {
	skip := int(pos + 1 - l.first)
	older := len(l.ring) - l.head // ring[head:] holds the oldest
	if skip < older {
		dst = append(dst, l.ring[l.head+skip:]...)
		return append(dst, l.ring[:l.head]...)
	}
	return append(dst, l.ring[skip-older:l.head]...)
}

// Add records that batch was stored in runID's log from seq first on, and
// wakes the log's tailers through Wakes. The store calls it after the
// commit (and, without Wakes, before waking the tailers). It copies the
// data.
func (c *Recent) Add(scheme, runID string, first int64, batch [][]byte) {
	c.add(scheme, runID, first, batch, true)
}

// AddOwned is Add for entries the cache keeps as they are: nobody
// modifies them once they are handed over (a queued append's, a store's own
// copy). batch itself is not kept.
func (c *Recent) AddOwned(scheme, runID string, first int64, batch [][]byte) {
	c.add(scheme, runID, first, batch, false)
}

// add adds batch's entries, copied or as they are.
func (c *Recent) add(scheme, runID string, first int64, batch [][]byte, copied bool) {
	if len(batch) > recentEntries {
		first += int64(len(batch) - recentEntries)
		batch = batch[len(batch)-recentEntries:]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logs[runID]
	if l == nil {
		if len(c.logs) >= recentLogs {
			c.evictLocked()
		}
		if c.logs == nil {
			c.logs = map[string]*recentLog{}
		}
		l = &recentLog{first: first}
		if n := len(c.spare); n > 0 {
			l.ring, c.spare = c.spare[n-1], c.spare[:n-1]
		}
		c.logs[runID] = l
	}
	if l.last()+1 != first {
		// A gap (another process appended in between): start afresh.
		clear(l.ring)
		l.first, l.ring, l.head, l.closed = first, l.ring[:0], 0, false
	}
	if l.mint == (durable.OffsetMinter{}) {
		l.mint = durable.NewOffsetMinter(scheme, runID)
	}
	c.minted = l.mint.AppendEntries(c.minted[:0], first, batch)
	if copied {
		// The batch's copy: one allocation, not one per entry. Each entry
		// is capped, so that an append to one cannot write over the next.
		n := 0
		for _, b := range batch {
			n += len(b)
		}
		buf := make([]byte, 0, n)
		for i := range c.minted {
			e := &c.minted[i]
			from := len(buf)
			buf = append(buf, e.Data...)
			e.Data = buf[from:len(buf):len(buf)]
		}
	}
	for _, e := range c.minted {
		l.push(e)
	}
	clear(c.minted) // the scratch keeps no entry alive
	if c.Wakes != nil {
		c.Wakes.Wake(runID)
	}
}

// Closed records that runID's log was closed with last as its last seq,
// so that its tailers, woken by the close, end without a query. The
// entries are dropped: what remains is a marker of a few bytes.
func (c *Recent) Closed(runID string, last int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.logs[runID]
	if !ok && len(c.logs) >= recentLogs {
		c.evictLocked()
	}
	if c.logs == nil {
		c.logs = map[string]*recentLog{}
	}
	if ok && cap(l.ring) == recentEntries && len(c.spare) < maxSpareRings {
		clear(l.ring) // no entry's data stays alive in a spare
		c.spare = append(c.spare, l.ring[:0])
	}
	c.logs[runID] = &recentLog{first: last + 1, closed: true}
}

// evictLocked makes room: it drops the markers of closed logs, and every
// log if open ones still fill three quarters of the cache.
func (c *Recent) evictLocked() {
	for id, l := range c.logs {
		if l.closed {
			delete(c.logs, id)
		}
	}
	if len(c.logs) >= recentLogs*3/4 {
		clear(c.logs)
	}
}

// Forget drops runID's entries (its log was upserted).
func (c *Recent) Forget(runID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.logs, runID)
}

// Clear drops every log's entries (logs were pruned).
func (c *Recent) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.logs)
}

// ended reports that runID's log is known closed with pos as its last seq.
func (c *Recent) ended(runID string, pos int64) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logs[runID]
	return l != nil && l.closed && pos == l.last()
}

// holds reports that the cache knows runID's log to have an entry seq
// (seq 0: any log): a read resuming after seq needs no query to learn that
// the log exists and seq is not past its tail.
func (c *Recent) holds(runID string, seq int64) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logs[runID]
	return l != nil && seq <= l.last()
}

// fromStart reports that the cache holds runID's log from its first entry
// on (or knows it closed empty): a read from the start needs no query to
// learn that the log exists.
func (c *Recent) fromStart(runID string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logs[runID]
	return l != nil && l.first == 1 && (len(l.ring) > 0 || l.closed)
}

// waitAfter takes a wait of sub, runID's subscription, and appends to dst
// the cached entries after seq pos (see appendAfterLocked), in one step
// with the cache's wake-ups (Wakes).
//
// atTail reports that pos is the last entry of the log as the cache knows
// it, open: with nothing cached after pos, nothing is there to read until
// a wake-up. The cache is the log's tail because every append of this
// process passes through it and a store forgets a log another process
// appended to (Forget, Clear) before it wakes its tailers.
func (c *Recent) waitAfter(sub *notify.Sub, runID string, pos int64, dst []durable.Entry) (w notify.Waiter, after []durable.Entry, atTail bool) {
	if c == nil {
		return sub.Wait(), dst, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logs[runID]
	atTail = l != nil && !l.closed && pos == l.last()
	return sub.Wait(), c.appendAfterLocked(dst, runID, pos), atTail
}

// appendAfterLocked appends to dst the cached entries of runID after seq
// pos, none unless the cache holds the entry right after pos.
func (c *Recent) appendAfterLocked(dst []durable.Entry, runID string, pos int64) []durable.Entry {
	l := c.logs[runID]
	if l == nil || pos < l.first-1 || pos >= l.last() {
		return dst
	}
	return l.appendAfter(dst, pos)
}
