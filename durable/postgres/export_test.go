package postgres

import (
	"context"
	"sync/atomic"

	"github.com/goai-sdk/goai/durable/internal/tail"
)

// CountReadQueries makes s count the queries its tailers make for entries
// and returns the count. Call it before the first Read.
func CountReadQueries(s *Store) *atomic.Int64 {
	n := new(atomic.Int64)
	query := s.tail.Query
	s.tail.Query = func(ctx context.Context, runID string, after int64, limit int) (*tail.State, error) {
		if limit > 0 {
			n.Add(1)
		}
		return query(ctx, runID, after, limit)
	}
	return n
}

// NextWake returns a channel that receives at the next wake-up of runID's
// tailers on s (an append here, or another store's notification).
func NextWake(s *Store, runID string) (woken <-chan struct{}, release func()) {
	sub := s.hub.Subscribe(runID)
	return sub.Wait().C, sub.Close
}
