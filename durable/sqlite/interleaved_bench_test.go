package sqlite

import (
	"context"
	"database/sql"
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

// BenchmarkDriverCommit is the floor under the writer's commits: a bare
// BEGIN IMMEDIATE, n inserts of rows of size bytes and COMMIT through
// database/sql and the pure-Go driver, with the store's journal mode and
// synchronous setting and nothing of the store around them. An op is one
// transaction. The last case carries the nine token-sized entries of the
// eight-insert one, and one more, in a single row: what a journal row per
// commit, rather than per run, would cost.
func BenchmarkDriverCommit(b *testing.B) {
	for _, tc := range []struct{ n, size int }{{0, 0}, {1, 200}, {8, 200}, {1, 1800}} {
		n, size := tc.n, tc.size
		b.Run(fmt.Sprintf("inserts=%d/bytes=%d", n, size), func(b *testing.B) {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "bare.db")+
				"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(0)")
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			c, err := db.Conn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if _, err := c.ExecContext(ctx, `CREATE TABLE j (id INTEGER PRIMARY KEY, run_id TEXT, last_seq INTEGER, first_seq INTEGER, data BLOB)`); err != nil {
				b.Fatal(err)
			}
			prep := func(q string) *sql.Stmt {
				st, err := c.PrepareContext(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				return st
			}
			begin, commit := prep(`BEGIN IMMEDIATE`), prep(`COMMIT`)
			insert := prep(`INSERT INTO j (run_id, last_seq, first_seq, data) VALUES (?, ?, ?, ?)`)
			data := make([]byte, size)
			for i := 0; b.Loop(); i++ {
				if _, err := begin.Exec(); err != nil {
					b.Fatal(err)
				}
				for range n {
					if _, err := insert.Exec("run-0123456789", i, i, data); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := commit.Exec(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDataVersion is the writer's check for other processes' commits,
// made at the start of every transaction, both ways: PRAGMA data_version,
// a prepared statement on the writer's connection, and the pager's data
// version through sqlite3_file_control (fileVersion), which the writer
// uses.
func BenchmarkDataVersion(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "goai.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown()
	pragma, err := s.wc.PrepareContext(context.Background(), `PRAGMA data_version`)
	if err != nil {
		b.Fatal(err)
	}
	defer pragma.Close()
	b.Run("pragma", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v int64
			if err := pragma.QueryRow().Scan(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("file-control", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.fileVersion(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
