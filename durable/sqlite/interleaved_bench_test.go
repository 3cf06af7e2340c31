package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkInterleavedAppends is the store under paced streams: 100 runs
// appending one entry at a time each, concurrently, so that commits hold a
// token of several runs and the journal's compactions move about a hundred
// runs' rows at a time (docs/durable.md §3). An op is one entry; its cost
// includes its share of commits and compactions. wal-B/op is the WAL
// written per entry, reported when the WAL did not start over meanwhile.
func BenchmarkInterleavedAppends(b *testing.B) {
	const runs = 100
	path := filepath.Join(b.TempDir(), "interleaved.db")
	s, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown()
	ctx := context.Background()
	entry := []byte(`{"type":"TEXT_MESSAGE_CONTENT","timestamp":1764790000000,"messageId":"msg_0123456789abcdef","delta":"token "}`)
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			b.Fatal(err)
		}
		return fi.Size()
	}
	seq0, _ := walRestarts(b, path)
	size0 := walSize()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	b.ReportAllocs()
	b.ResetTimer()
	for r := range runs {
		wg.Go(func() {
			run := fmt.Sprintf("run-%03d-0123456789abcdef", r)
			for next.Add(1) <= int64(b.N) {
				if _, err := s.Append(ctx, run, [][]byte{entry}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if seq, ok := walRestarts(b, path); ok && seq == seq0 {
		b.ReportMetric(float64(walSize()-size0)/float64(b.N), "wal-B/op")
	}
}
