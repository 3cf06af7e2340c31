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
	recentEntries = 64
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

	mu   sync.Mutex
	logs map[string]*recentLog
}

type recentLog struct {
	first   int64 // seq of entries[0]
	entries []durable.Entry
	closed  bool                 // the log is closed after entries
	mint    durable.OffsetMinter // the log's, made once: a paced run adds its tokens one by one
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
		c.logs[runID] = l
	}
	if l.first+int64(len(l.entries)) != first {
		// A gap (another process appended in between): start afresh.
		l.first, l.entries, l.closed = first, nil, false
	}
	if len(l.entries)+len(batch) > 2*recentEntries {
		// Keep the backing array bounded; readers holding the old one keep
		// reading it unchanged.
		keep := l.entries[max(0, len(l.entries)-recentEntries):]
		l.first += int64(len(l.entries) - len(keep))
		l.entries = append(make([]durable.Entry, 0, 2*recentEntries), keep...)
	}
	at := len(l.entries)
	if l.mint == (durable.OffsetMinter{}) {
		l.mint = durable.NewOffsetMinter(scheme, runID)
	}
	l.entries = l.mint.AppendEntries(l.entries, first, batch)
	if copied {
		// The batch's copy: one allocation, not one per entry. Each entry
		// is capped, so that an append to one cannot write over the next.
		n := 0
		for _, b := range batch {
			n += len(b)
		}
		buf := make([]byte, 0, n)
		for i := range l.entries[at:] {
			e := &l.entries[at+i]
			from := len(buf)
			buf = append(buf, e.Data...)
			e.Data = buf[from:len(buf):len(buf)]
		}
	}
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
	if _, ok := c.logs[runID]; !ok && len(c.logs) >= recentLogs {
		c.evictLocked()
	}
	if c.logs == nil {
		c.logs = map[string]*recentLog{}
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
	return l != nil && l.closed && pos == l.first+int64(len(l.entries))-1
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
	return l != nil && seq <= l.first+int64(len(l.entries))-1
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
	return l != nil && l.first == 1 && (len(l.entries) > 0 || l.closed)
}

// waitAfter takes a wait of sub, runID's subscription, and returns the cached
// entries after seq pos (see after), in one step with the cache's
// wake-ups (Wakes).
//
// atTail reports that pos is the last entry of the log as the cache knows
// it, open: with nothing cached after pos, nothing is there to read until
// a wake-up. The cache is the log's tail because every append of this
// process passes through it and a store forgets a log another process
// appended to (Forget, Clear) before it wakes its tailers.
func (c *Recent) waitAfter(sub *notify.Sub, runID string, pos int64) (w notify.Waiter, after []durable.Entry, atTail bool) {
	if c == nil {
		return sub.Wait(), nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logs[runID]
	atTail = l != nil && !l.closed && pos == l.first+int64(len(l.entries))-1
	return sub.Wait(), c.afterLocked(runID, pos), atTail
}

// after returns the cached entries of runID after seq pos, nil unless the
// cache holds the entry right after pos. The result is read-only.
func (c *Recent) after(runID string, pos int64) []durable.Entry {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.afterLocked(runID, pos)
}

func (c *Recent) afterLocked(runID string, pos int64) []durable.Entry {
	l := c.logs[runID]
	if l == nil || pos < l.first-1 || pos >= l.first+int64(len(l.entries))-1 {
		return nil
	}
	return l.entries[pos+1-l.first:]
}
