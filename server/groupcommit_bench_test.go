package server

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/goai-sdk/goai/durable/sqlite"
)

// BenchmarkGroupCommitSQLite16 is the producers' append path (group
// commit) with 16 concurrent producers, each on its own run, emitting as
// fast as they can into one SQLite store; it reports events/s.
//
//	go test -run '^$' -bench GroupCommitSQLite16 -benchtime 200000x ./server/
func BenchmarkGroupCommitSQLite16(b *testing.B) {
	store, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Shutdown()
	const producers = 16
	ctx := context.Background()
	b.ResetTimer()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			run := fmt.Sprintf("bench-%d", p)
			g := newGroupCommit(func(batch [][]byte) error {
				_, err := store.Append(ctx, run, batch)
				return err
			}, 0)
			defer g.stop()
			for i := p; i < b.N; i += producers {
				if err := g.add(fmt.Appendf(nil, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-000001","delta":"token %08d of the answer"}`, i)); err != nil {
					b.Error(err)
					return
				}
			}
			if err := g.flush(); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
