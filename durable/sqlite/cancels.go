package sqlite

import (
	"sync"
	"sync/atomic"
)

// cancelMemo spares a store that no other process writes
// (Options.OneProcess) most of the query of a cancel poll. A server asks
// every half second which of the runs it produces have a cancel recorded
// (durable.CancelLister); with 10,000 runs the query took about 13 ms
// (BenchmarkCancelRequested). Every write of a run's cancel_requested goes
// through this store's writer, which counts the transactions holding one
// once they have committed (writes). A run found without a cancel stays
// so while the count has not moved, so a poll queries only the runs it
// has not asked about since the last such write.
//
// A poll reads the count before its query: a write counted by then
// committed before the query's snapshot, and one counted later moves the
// count, which drops what the poll found at the next one.
type cancelMemo struct {
	writes atomic.Uint64 // committed transactions that wrote a cancel_requested

	mu   sync.Mutex
	at   uint64              // writes when the runs in none were found
	none map[string]struct{} // runs found without a cancel while writes was at
}

// unknown returns those of runIDs a poll that read writes as gen must
// query.
func (m *cancelMemo) unknown(gen uint64, runIDs []string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if gen > m.at || m.none == nil {
		m.at, m.none = gen, make(map[string]struct{}, len(runIDs))
	}
	if gen != m.at {
		return runIDs // a poll that read the count before another's: query all
	}
	// The runs of ended producers stay until the memo is much larger than
	// the runs polled for; then it starts over.
	if len(m.none) > 2*len(runIDs)+1024 {
		clear(m.none)
	}
	var ask []string
	for _, id := range runIDs {
		if _, ok := m.none[id]; !ok {
			ask = append(ask, id)
		}
	}
	return ask
}

// found records the outcome of a poll that read writes as gen: of asked,
// the runs in cancelled have a cancel recorded.
func (m *cancelMemo) found(gen uint64, asked, cancelled []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if gen != m.at {
		return
	}
	skip := make(map[string]bool, len(cancelled))
	for _, id := range cancelled {
		skip[id] = true
	}
	for _, id := range asked {
		if !skip[id] {
			m.none[id] = struct{}{}
		}
	}
}
