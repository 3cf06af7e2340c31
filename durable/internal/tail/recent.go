package tail

import (
	"sync"

	"github.com/goai-sdk/goai/durable"
)

// Recent bounds: the entries kept per log, and the logs kept at once (past
// it the cache starts afresh, which costs tailers a query each: logs
// closed by another process are never forgotten otherwise).
const (
	recentEntries = 64
	recentLogs    = 4096
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
	mu   sync.Mutex
	logs map[string]*recentLog
}

type recentLog struct {
	first   int64 // seq of entries[0]
	entries []durable.Entry
}

// Add records that batch was stored in runID's log from seq first on. The
// store calls it after the commit and before waking the log's tailers. It
// copies the data.
func (c *Recent) Add(scheme, runID string, first int64, batch [][]byte) {
	if len(batch) > recentEntries {
		first += int64(len(batch) - recentEntries)
		batch = batch[len(batch)-recentEntries:]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logs[runID]
	if l == nil {
		if len(c.logs) >= recentLogs {
			clear(c.logs)
		}
		if c.logs == nil {
			c.logs = map[string]*recentLog{}
		}
		l = &recentLog{first: first}
		c.logs[runID] = l
	}
	if l.first+int64(len(l.entries)) != first {
		// A gap (another process appended in between): start afresh.
		l.first, l.entries = first, nil
	}
	if len(l.entries)+len(batch) > 2*recentEntries {
		// Keep the backing array bounded; readers holding the old one keep
		// reading it unchanged.
		keep := l.entries[max(0, len(l.entries)-recentEntries):]
		l.first += int64(len(l.entries) - len(keep))
		l.entries = append(make([]durable.Entry, 0, 2*recentEntries), keep...)
	}
	for i, b := range batch {
		data := append([]byte{}, b...)
		l.entries = append(l.entries, durable.Entry{Offset: durable.FormatOffset(scheme, runID, first+int64(i)), Data: data})
	}
}

// Forget drops runID's entries (its log was closed, upserted or pruned).
func (c *Recent) Forget(runID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.logs, runID)
}

// after returns the cached entries of runID after seq pos, nil unless the
// cache holds the entry right after pos. The result is read-only.
func (c *Recent) after(runID string, pos int64) []durable.Entry {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logs[runID]
	if l == nil || pos < l.first-1 || pos >= l.first+int64(len(l.entries))-1 {
		return nil
	}
	return l.entries[pos+1-l.first:]
}
