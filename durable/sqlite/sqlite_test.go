package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/durabletest"
	"github.com/goai-sdk/goai/durable/sqlite"
	"go.uber.org/goleak"
)

func open(t testing.TB, path string) *sqlite.Store { return openWith(t, path, nil) }

// queryStrings returns the first column of query's rows on db, as strings.
func queryStrings(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func openWith(t testing.TB, path string, opts *sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func newStore(t *testing.T) *sqlite.Store {
	return open(t, filepath.Join(t.TempDir(), "durable.db"))
}

var paths = map[durable.Log]string{}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	durabletest.Run(t, func(t *testing.T) durable.Log {
		path := filepath.Join(t.TempDir(), "durable.db")
		s := open(t, path)
		paths[s] = path
		return s
	}, &durabletest.Options{
		Reopen: func(t *testing.T, l durable.Log) durable.Log { return open(t, paths[l]) },
	})
}

// TestConformanceOneProcess runs the log conformance with the file locked
// to one store, whose readers trust its cache of recent entries (no
// second instance: the lock refuses it).
func TestConformanceOneProcess(t *testing.T) {
	durabletest.Run(t, func(t *testing.T) durable.Log {
		return openWith(t, filepath.Join(t.TempDir(), "durable.db"), &sqlite.Options{OneProcess: true})
	}, nil)
}

// TestConformanceJournalCompacting runs the log conformance with a journal
// compacted every few rows and a commit gap, so that reads, tails and
// closes meet entries split between the journal and goai_chunks, moved
// while readers follow, and appends that wait to share commits.
func TestConformanceJournalCompacting(t *testing.T) {
	opts := &sqlite.Options{JournalRows: 3, CommitGap: time.Millisecond}
	openSmall := func(t *testing.T, path string) durable.Log {
		s := openWith(t, path, opts)
		paths[s] = path
		return s
	}
	durabletest.Run(t, func(t *testing.T) durable.Log {
		return openSmall(t, filepath.Join(t.TempDir(), "durable.db"))
	}, &durabletest.Options{
		Reopen: func(t *testing.T, l durable.Log) durable.Log { return openSmall(t, paths[l]) },
	})
}

func TestRunStoreConformance(t *testing.T) {
	durabletest.RunStore(t, func(t *testing.T) durable.Store { return newStore(t) }, nil)
}

func TestQueuedAppendConformance(t *testing.T) {
	durabletest.QueuedAppends(t, func(t *testing.T) durable.Store { return newStore(t) })
}

func TestThreadStoreConformance(t *testing.T) {
	durabletest.Threads(t, func(t *testing.T) durable.ThreadStore { return newStore(t) })
}

// With OneProcess the store answers thread owners from memory: the
// records' and threads' conformance again, on such a store.
func TestOneProcessRunAndThreadConformance(t *testing.T) {
	open := func(t *testing.T) *sqlite.Store {
		return openWith(t, filepath.Join(t.TempDir(), "durable.db"), &sqlite.Options{OneProcess: true})
	}
	t.Run("runs", func(t *testing.T) {
		durabletest.RunStore(t, func(t *testing.T) durable.Store { return open(t) }, nil)
	})
	t.Run("threads", func(t *testing.T) {
		durabletest.Threads(t, func(t *testing.T) durable.ThreadStore { return open(t) })
	})
}

// The log and the records survive a restart: reopening the file serves
// everything, and an open log can be continued and closed.
func TestSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "durable.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := s.Append(ctx, "r", [][]byte{[]byte("a"), []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "r", ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("no write-ahead log next to the database: %v", err)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, err := range s.Read(ctx, "r", durable.FromStart) {
		if !errors.Is(err, durable.ErrStoreClosed) {
			t.Fatalf("read after shutdown: %v, want ErrStoreClosed", err)
		}
	}
	if _, err := s.Append(ctx, "r", [][]byte{[]byte("x")}); !errors.Is(err, durable.ErrStoreClosed) {
		t.Fatalf("append after shutdown: %v, want ErrStoreClosed", err)
	}

	s2 := open(t, path)
	more, err := s2.Append(ctx, "r", [][]byte{[]byte("c")})
	if err != nil {
		t.Fatal(err)
	}
	if more[0] == offs[0] || more[0] == offs[1] {
		t.Fatalf("offset %q reused after restart", more[0])
	}
	if err := s2.Close(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for e, err := range s2.Read(ctx, "r", offs[0]) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(e.Data))
	}
	if len(got) != 2 || got[0] != "b" || got[1] != "c" {
		t.Fatalf("after restart read %q, want [b c]", got)
	}
	rec, err := s2.Get(ctx, "r")
	if err != nil || rec.DriverEpoch == nil || *rec.DriverEpoch != 1 {
		t.Fatalf("record after restart: %+v, %v", rec, err)
	}
}

func BenchmarkSQLite(b *testing.B) {
	durabletest.Bench(b, func(tb testing.TB) durable.Log {
		return open(tb, filepath.Join(tb.TempDir(), "durable.db"))
	})
}

// TestCrashRecovery appends from a child process that dies without shutting
// the store down (os.Exit right after the acknowledged appends), then
// reopens the file: every acknowledged entry is there and the open log can
// be continued.
func TestCrashRecovery(t *testing.T) {
	if path := os.Getenv("GOAI_SQLITE_CRASH_CHILD"); path != "" {
		s, err := sqlite.Open(path, nil)
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(2)
		}
		ctx := context.Background()
		for i := range 50 {
			offs, err := s.Append(ctx, "crash", [][]byte{fmt.Appendf(nil, "%d", 2*i), fmt.Appendf(nil, "%d", 2*i+1)})
			if err != nil {
				fmt.Println("append:", err)
				os.Exit(2)
			}
			fmt.Println(offs[1]) // acknowledged
		}
		os.Exit(0) // no Shutdown: the writer and connections just die
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashRecovery$")
	cmd.Env = append(os.Environ(), "GOAI_SQLITE_CRASH_CHILD="+path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	acked := strings.Fields(string(out))
	if len(acked) != 50 {
		t.Fatalf("child acknowledged %d appends: %q", len(acked), out)
	}
	s := open(t, path)
	ctx := context.Background()
	snap, err := s.Snapshot(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap) != 100 || snap[99].Offset != acked[49] {
		t.Fatalf("after the crash: %d entries, last %q; want 100, last %q", len(snap), snap[len(snap)-1].Offset, acked[49])
	}
	for i, e := range snap {
		if string(e.Data) != fmt.Sprint(i) {
			t.Fatalf("entry %d = %q", i, e.Data)
		}
	}
	if _, err := s.Append(ctx, "crash", [][]byte{[]byte("100")}); err != nil {
		t.Fatal(err)
	}
}

func TestRequestStoreConformance(t *testing.T) {
	durabletest.Requests(t, func(t *testing.T) durable.Store { return newStore(t) })
}

func TestReadAcrossProcessesWithPolling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "durable.db")
	local, err := sqlite.Open(path, &sqlite.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Shutdown() })
	durabletest.ReadAcrossInstances(t, local, open(t, path))
}

// fencedAppend appends one entry to runID under claim epoch.
func fencedAppend(s *sqlite.Store, runID string, epoch int64) error {
	_, err := s.AppendWith(context.Background(), runID, [][]byte{[]byte("x")}, durable.AppendOptions{Epoch: epoch})
	return err
}

// The writer remembers each open log's run epoch between appends
// (journal.go); a claim by another process writing the same file must
// still fence this one's appends at once.
func TestForeignClaimFencesAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "durable.db")
	a, b := open(t, path), open(t, path)
	ctx := context.Background()
	if _, err := a.CreateOrResume(ctx, durable.RunRecord{RunID: "r", ThreadID: "t", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c, err := a.ClaimIf(ctx, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second append is served from the writer's memory
		if err := fencedAppend(a, "r", c.Epoch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.ClaimIf(ctx, "r", c.Epoch); err != nil {
		t.Fatal(err)
	}
	var lost *durable.ClaimLostError
	if err := fencedAppend(a, "r", c.Epoch); !errors.As(err, &lost) {
		t.Fatalf("append under the old claim after another process's claim: %v, want a ClaimLostError", err)
	}
}

// Prune deletes finished runs' records, also of a log left open: an
// append fenced by the deleted record's epoch then fails, as it did
// before the writer remembered the epoch.
func TestPruneFencesAppends(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "r", ThreadID: "t", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimIf(ctx, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	done := time.Now().Add(-time.Hour)
	if err := s.Update(ctx, "r", durable.RunPatch{Status: durable.Set(durable.StatusCompleted), FinishedAt: durable.Set(done)}); err != nil {
		t.Fatal(err)
	}
	if err := fencedAppend(s, "r", c.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "r"); !errors.Is(err, durable.ErrRunNotFound) {
		t.Fatalf("run record after the prune: %v, want ErrRunNotFound", err)
	}
	var lost *durable.ClaimLostError
	if err := fencedAppend(s, "r", c.Epoch); !errors.As(err, &lost) {
		t.Fatalf("append fenced by a pruned run's epoch: %v, want a ClaimLostError", err)
	}
}

// A batch of maxChunk entries or more is stored as several chunks, and
// small batches as one journal chunk each; reads that start inside a
// chunk, pages that end inside one, and an upsert of an entry inside one
// all see every entry once, in order.
func TestChunkedLog(t *testing.T) {
	s := openWith(t, filepath.Join(t.TempDir(), "durable.db"), &sqlite.Options{ReadPage: 7})
	ctx := context.Background()
	var want, offs []string
	appendN := func(n int) {
		batch := make([][]byte, n)
		for i := range batch {
			batch[i] = fmt.Appendf(nil, "e%d", len(want))
			want = append(want, string(batch[i]))
		}
		o, err := s.Append(ctx, "r", batch)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, o...)
	}
	appendN(200) // chunks of 64, 64, 64 and 8
	for range 5 {
		appendN(3) // a journal chunk each
	}
	appendN(1)
	// Edit entries inside a chunk of 64 and inside a journal chunk.
	for _, k := range []int{100, 201} {
		if _, err := s.Upsert(ctx, "r", []durable.Entry{{Offset: offs[k], Data: []byte("edited")}}); err != nil {
			t.Fatal(err)
		}
		want[k] = "edited"
	}
	if err := s.Close(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range snap {
		if i >= len(want) || string(e.Data) != want[i] || e.Offset != offs[i] {
			t.Fatalf("snapshot entry %d: %q at %s", i, e.Data, e.Offset)
		}
	}
	if len(snap) != len(want) {
		t.Fatalf("snapshot of %d entries, want %d", len(snap), len(want))
	}
	for _, k := range []int{-1, 0, 5, 63, 64, 99, 100, 199, 200, 202, 214} {
		after, from := durable.FromStart, 0
		if k >= 0 {
			after, from = offs[k], k+1
		}
		n := from
		for e, err := range s.Read(ctx, "r", after) {
			if err != nil {
				t.Fatal(err)
			}
			if n >= len(want) || string(e.Data) != want[n] || e.Offset != offs[n] {
				t.Fatalf("read after entry %d: %q at %s, entry %d", k, e.Data, e.Offset, n)
			}
			n++
		}
		if n != len(want) {
			t.Fatalf("read after entry %d ended at entry %d of %d", k, n, len(want))
		}
	}
}

// A compaction merges each run's consecutive journal rows (an append of a
// token each) into chunks of up to 64 entries, and starts a new chunk
// where a large batch stored its own chunks in between; every entry reads
// back once, in order, after a restart.
func TestCompactionMergesJournalRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "durable.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[string][]string{}
	appendN := func(run string, n int) {
		batch := make([][]byte, n)
		for i := range batch {
			batch[i] = fmt.Appendf(nil, "%s%d", run, len(want[run]))
			want[run] = append(want[run], string(batch[i]))
		}
		if _, err := s.Append(ctx, run, batch); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 { // interleaved tokens: a journal row each
		appendN("b", 1)
		if i == 30 {
			appendN("a", 20) // straight to goai_chunks
		} else if i < 60 {
			appendN("a", 1)
		}
	}
	// Far below the journal's compaction size: the one compaction is the
	// one at Shutdown.
	db := shutDown(t, s, path)
	var journal int
	if err := db.QueryRow(`SELECT count(*) FROM goai_chunk_journal`).Scan(&journal); err != nil || journal != 0 {
		t.Fatalf("journal rows after the compaction: %d %v", journal, err)
	}
	got := queryStrings(t, db, `SELECT l.run_id || ' ' || c.first_seq || '-' || c.last_seq FROM goai_chunks c JOIN goai_logs l ON l.id = c.log ORDER BY l.run_id, c.last_seq`)
	// a: tokens 1-30 and 51-79 around the batch 31-50; b: 64 + 36 tokens.
	if w := []string{"a 1-30", "a 31-50", "a 51-79", "b 1-64", "b 65-100"}; !slices.Equal(got, w) {
		t.Fatalf("chunks %q, want %q", got, w)
	}
	s = open(t, path)
	for run, w := range want {
		snap, err := s.Snapshot(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap) != len(w) {
			t.Fatalf("run %s: %d entries, want %d", run, len(snap), len(w))
		}
		for i, e := range snap {
			if string(e.Data) != w[i] {
				t.Fatalf("run %s entry %d: %q, want %q", run, i, e.Data, w[i])
			}
		}
	}
}

// What the server's per-request owner check costs on a long conversation
// (a 1 MiB transcript, 300 runs), answered by loading the thread or by
// ThreadOwner.
func BenchmarkThreadOwner(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "durable.db"))
	ctx := context.Background()
	for i := range 300 {
		rec := durable.RunRecord{RunID: fmt.Sprintf("r%d", i), ThreadID: "t", StartedAt: time.UnixMilli(int64(i)), Owner: "alice", Status: durable.StatusCompleted}
		if _, err := s.CreateOrResume(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
	msgs := []byte(`[` + strings.Repeat(`{"id":"m","role":"user","parts":[{"type":"text","content":"0123456789abcdef"}]},`, 1<<20/80) + `{}]`)
	if err := s.SaveThread(ctx, durable.Thread{ThreadID: "t", Messages: msgs, RunID: "r", UpdatedAt: time.Now(), Owner: "alice"}); err != nil {
		b.Fatal(err)
	}
	b.Run("LoadThread", func(b *testing.B) {
		for b.Loop() {
			if th, ok, err := s.LoadThread(ctx, "t"); err != nil || !ok || th.Owner != "alice" {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("ThreadOwner", func(b *testing.B) {
		for b.Loop() {
			if owner, ok, err := s.ThreadOwner(ctx, "t"); err != nil || !ok || owner != "alice" {
				b.Fatal(ok, err)
			}
		}
	})
}

// Shutdown stores what queued appends hand back while it drains the
// writer's queue, and an append queued after it is refused at once.
func TestShutdownFinishesQueuedAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "durable.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	const batches = 50
	outcomes := make(chan error, batches)
	sent := 0
	take := func() [][]byte {
		sent++
		return [][]byte{fmt.Appendf(nil, `{"n":%d}`, sent)}
	}
	done := func(err error) bool {
		outcomes <- err
		return sent < batches
	}
	s.AppendQueued("r", durable.AppendOptions{}, take, done)
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for i := range batches {
		select {
		case err := <-outcomes:
			if err != nil {
				t.Fatalf("batch %d: %v", i+1, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("batch %d got no outcome from Shutdown", i+1)
		}
	}
	var refused error
	s.AppendQueued("r", durable.AppendOptions{}, take, func(err error) bool { refused = err; return true })
	if !errors.Is(refused, durable.ErrStoreClosed) {
		t.Fatalf("append queued after Shutdown: %v, want ErrStoreClosed at once", refused)
	}
	s = open(t, path)
	es, err := s.Snapshot(t.Context(), "r")
	if err != nil || len(es) != batches || string(es[batches-1].Data) != fmt.Sprintf(`{"n":%d}`, batches) {
		t.Fatalf("after reopening: %d entries, %v", len(es), err)
	}
}
