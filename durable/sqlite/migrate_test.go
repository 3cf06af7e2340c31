package sqlite_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/sqlite"
)

// A database written before owners existed opens, keeps its runs (owner
// ""), and records owners from then on.
func TestMigratesAnOwnerlessDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	writeDatabase(t, path,
		`CREATE TABLE goai_runs (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE, thread_id TEXT NOT NULL, status TEXT NOT NULL,
			started_at INTEGER NOT NULL, finished_at INTEGER, error_message TEXT, error_code TEXT, usage TEXT, sandbox_key TEXT,
			detached_since INTEGER, cancel_requested INTEGER, driver_epoch INTEGER)`,
		`CREATE TABLE goai_threads (thread_id TEXT PRIMARY KEY, messages TEXT NOT NULL, run_id TEXT NOT NULL, interrupts TEXT, updated_at INTEGER NOT NULL) WITHOUT ROWID`,
		`INSERT INTO goai_runs (run_id, thread_id, status, started_at) VALUES ('old', 't', 'completed', 1)`,
	)
	s := open(t, path)
	ctx := context.Background()
	if rec, err := s.Get(ctx, "old"); err != nil || rec.Owner != "" {
		t.Fatalf("old run %+v %v", rec, err)
	}
	if rec, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "new", ThreadID: "t", StartedAt: time.Now(), Owner: "alice"}); err != nil || rec.Owner != "alice" {
		t.Fatalf("new run %+v %v", rec, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("database mode %v %v", fi.Mode(), err)
	}
}

// Removing or replacing the database file makes the store unhealthy, for
// good, and refuses claims.
func TestNoticesItsFileRemoved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	s := open(t, path)
	ctx := context.Background()
	if err := s.Healthy(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "r", ThreadID: "t", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil { // another file at the path
		t.Fatal(err)
	}
	if err := s.Healthy(ctx, false); !errors.Is(err, durable.ErrStoreUnhealthy) {
		t.Fatalf("Healthy after replacement: %v", err)
	}
	if _, err := s.ClaimIf(ctx, "r", 0); !errors.Is(err, durable.ErrStoreUnhealthy) {
		t.Fatalf("ClaimIf after replacement: %v", err)
	}
	os.Remove(path)
	if err := os.Rename(path+".moved", path); err != nil {
		t.Fatal(err)
	}
	if err := s.Healthy(ctx, false); !errors.Is(err, durable.ErrStoreUnhealthy) {
		t.Fatalf("unhealthy must stay latched: %v", err)
	}
}

// A database written before chunks (an entry per row, in goai_entries and
// goai_journal) opens with every entry where it was: its open log can be
// read from any offset and continued.
func TestMigratesEntriesToChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	writeDatabase(t, path,
		`CREATE TABLE goai_logs (run_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, created_at INTEGER NOT NULL, closed_at INTEGER) WITHOUT ROWID`,
		`CREATE TABLE goai_entries (run_id TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID`,
		`CREATE TABLE goai_journal (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL)`,
		`INSERT INTO goai_logs VALUES ('r', 0, 1, NULL)`,
		`INSERT INTO goai_entries VALUES ('r', 1, 'a'), ('r', 2, ''), ('r', 3, 'c')`,
		`INSERT INTO goai_journal (run_id, seq, data) VALUES ('r', 4, 'd'), ('r', 5, 'e')`,
	)
	s := open(t, path)
	ctx := context.Background()
	if _, err := s.Append(ctx, "r", [][]byte{[]byte("f")}); err != nil {
		t.Fatal(err)
	}
	if got := logData(t, s, "r"); got != "[a  c d e f]" {
		t.Fatalf("after the migration: %s", got)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name IN ('goai_entries', 'goai_journal')`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("%d old tables left", tables)
	}
}

// A database whose goai_chunks was clustered by run (WITHOUT ROWID, the
// layout before arrival order) opens with its logs where they were, in the
// current layout with its index.
func TestMigratesChunksToArrivalOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	writeDatabase(t, path,
		`CREATE TABLE goai_logs (run_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, created_at INTEGER NOT NULL, closed_at INTEGER) WITHOUT ROWID`,
		`CREATE TABLE goai_chunks (run_id TEXT NOT NULL, last_seq INTEGER NOT NULL, first_seq INTEGER NOT NULL, data BLOB NOT NULL,
			PRIMARY KEY (run_id, last_seq)) WITHOUT ROWID`,
		`CREATE TABLE goai_chunk_journal (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, last_seq INTEGER NOT NULL, first_seq INTEGER NOT NULL, data BLOB NOT NULL)`,
		`INSERT INTO goai_logs VALUES ('r', 0, 1, NULL), ('s', 2, 1, 1)`,
		`INSERT INTO goai_chunks VALUES ('r', 1, 1, 'a'), ('r', 2, 2, 'b'), ('s', 1, 1, 'x'), ('s', 2, 2, 'y')`,
		`INSERT INTO goai_chunk_journal (run_id, last_seq, first_seq, data) VALUES ('r', 3, 3, 'c')`,
	)
	s := open(t, path)
	ctx := context.Background()
	if _, err := s.Append(ctx, "r", [][]byte{[]byte("d")}); err != nil {
		t.Fatal(err)
	}
	for run, want := range map[string]string{"r": "[a b c d]", "s": "[x y]"} {
		if got := logData(t, s, run); got != want {
			t.Fatalf("log %s after the migration: %s, want %s", run, got, want)
		}
	}
	if _, err := s.Append(ctx, "s", [][]byte{[]byte("z")}); !errors.Is(err, durable.ErrLogClosed) {
		t.Fatalf("append to the closed log after the migration: %v", err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ddl string
	if err := db.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'goai_chunks'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	var index, old int
	if err := db.QueryRow(`SELECT count(*) FROM pragma_index_list('goai_chunks') WHERE name = 'goai_chunks_log' AND "unique"`).Scan(&index); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'goai_chunks_by_run'`).Scan(&old); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ddl, "WITHOUT ROWID") || index != 1 || old != 0 {
		t.Fatalf("after the migration: goai_chunks %q, unique index %d, old table %d", ddl, index, old)
	}
}

// A database whose chunks name their run (the layout before logs were
// numbered) opens with every entry where it was: logs are numbered in
// creation order, an entry whose run had no goai_logs row keeps it (its
// log is opened for it), the old index is gone, and logs created after
// are numbered after them.
func TestMigratesChunksToNumberedLogs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	writeDatabase(t, path,
		`CREATE TABLE goai_logs (run_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, created_at INTEGER NOT NULL, closed_at INTEGER) WITHOUT ROWID`,
		`CREATE TABLE goai_chunks (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, last_seq INTEGER NOT NULL, first_seq INTEGER NOT NULL, data BLOB NOT NULL)`,
		`CREATE UNIQUE INDEX goai_chunks_seq ON goai_chunks (run_id, last_seq)`,
		`CREATE TABLE goai_chunk_journal (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, last_seq INTEGER NOT NULL, first_seq INTEGER NOT NULL, data BLOB NOT NULL)`,
		`INSERT INTO goai_logs VALUES ('late', 0, 20, NULL), ('early', 2, 10, 11)`,
		`INSERT INTO goai_chunks (run_id, last_seq, first_seq, data) VALUES ('late', 1, 1, 'a'), ('early', 1, 1, 'x'), ('late', 2, 2, 'b'), ('early', 2, 2, 'y'), ('stray', 1, 1, 's')`,
		`INSERT INTO goai_chunk_journal (run_id, last_seq, first_seq, data) VALUES ('late', 3, 3, 'c'), ('lost', 1, 1, 'l')`,
	)
	s := open(t, path)
	ctx := context.Background()
	if _, err := s.Append(ctx, "late", [][]byte{[]byte("d")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "new", [][]byte{[]byte("n")}); err != nil {
		t.Fatal(err)
	}
	for run, want := range map[string]string{"late": "[a b c d]", "early": "[x y]", "stray": "[s]", "lost": "[l]", "new": "[n]"} {
		if got := logData(t, s, run); got != want {
			t.Fatalf("log %s after the migration: %s, want %s", run, got, want)
		}
	}
	if _, err := s.Append(ctx, "early", [][]byte{[]byte("z")}); !errors.Is(err, durable.ErrLogClosed) {
		t.Fatalf("append to the closed log after the migration: %v", err)
	}
	if _, err := s.Append(ctx, "stray", [][]byte{[]byte("t")}); err != nil {
		t.Fatalf("append to a log opened by the migration: %v", err)
	}
	db := shutDown(t, s, path)
	order := queryStrings(t, db, `SELECT run_id FROM goai_logs ORDER BY id`)
	// By creation time; the logs the migration opened were created at 0.
	if got := fmt.Sprint(order); got != "[lost stray early late new]" {
		t.Fatalf("logs by number: %s", got)
	}
	var named, oldIndex int
	if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('goai_chunks') WHERE name = 'run_id'`).Scan(&named); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name IN ('goai_chunks_seq', 'goai_chunks_by_run')`).Scan(&oldIndex); err != nil {
		t.Fatal(err)
	}
	if named != 0 || oldIndex != 0 {
		t.Fatalf("after the migration: run_id column %d, old index or table %d", named, oldIndex)
	}
}

// Chunks of several entries written before the shared form (each entry's
// length and bytes), in the chunk table and in the journal, read back as
// they were beside entries appended after them, and the database they are
// in takes new appends; a batch appended now is stored in the shared form,
// in fewer bytes than its entries.
func TestReadsChunksWrittenBeforeTheSharedForm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Append(ctx, "r", [][]byte{[]byte("a")}); err != nil {
		t.Fatal(err)
	}
	db := shutDown(t, s, path)
	for _, q := range []string{
		`INSERT INTO goai_chunks (log, last_seq, first_seq, data) VALUES ((SELECT id FROM goai_logs WHERE run_id = 'r'), 3, 2, X'02626203636363')`, // bb, ccc
		`INSERT INTO goai_chunk_journal (run_id, last_seq, first_seq, data) VALUES ('r', 5, 4, X'0264640165')`,                                     // dd, e
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s = open(t, path)
	if got := logData(t, s, "r"); got != "[a bb ccc dd e]" {
		t.Fatalf("the log written before the shared form: %s", got)
	}
	var tokens [][]byte
	want := []string{"a", "bb", "ccc", "dd", "e"}
	raw := 0
	for i := range 20 {
		tokens = append(tokens, fmt.Appendf(nil, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"w%d "}`, i))
		want = append(want, string(tokens[i]))
		raw += len(tokens[i])
	}
	if _, err := s.Append(ctx, "r", tokens); err != nil {
		t.Fatal(err)
	}
	if got, want := logData(t, s, "r"), fmt.Sprint(want); got != want {
		t.Fatalf("after a batch: %s, want %s", got, want)
	}
	db = shutDown(t, s, path)
	var stored int
	if err := db.QueryRow(`SELECT sum(length(data)) FROM goai_chunks WHERE first_seq >= 6`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored*2 > raw {
		t.Fatalf("20 tokens of %d bytes stored in %d", raw, stored)
	}
}

// A database whose threads are keyed by thread (WITHOUT ROWID, with the
// goai_threads_owner index: the layout before rows) opens with every
// thread as it was, transcript, run, interrupts, time and owner; saving a
// thread again replaces it, a new one is added, and the old table and
// index are gone.
func TestMigratesThreadsToRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	big := `[{"id":"u","role":"user","parts":[{"type":"text","content":"` + strings.Repeat("x", 5000) + `"}]}]`
	writeDatabase(t, path,
		`CREATE TABLE goai_threads (thread_id TEXT PRIMARY KEY, messages TEXT NOT NULL, run_id TEXT NOT NULL, interrupts TEXT,
			updated_at INTEGER NOT NULL, owner TEXT NOT NULL DEFAULT '') WITHOUT ROWID`,
		`CREATE INDEX goai_threads_owner ON goai_threads (thread_id, owner)`,
		`INSERT INTO goai_threads VALUES ('b', '[]', 'rb', '[{"id":"i"}]', 2000, 'bob'), ('a', '`+big+`', 'ra', NULL, 1000, 'alice')`,
	)
	s := open(t, path)
	ctx := context.Background()
	for _, want := range []durable.Thread{
		{ThreadID: "a", Messages: []byte(big), RunID: "ra", UpdatedAt: time.UnixMilli(1000).UTC(), Owner: "alice"},
		{ThreadID: "b", Messages: []byte(`[]`), RunID: "rb", Interrupts: []byte(`[{"id":"i"}]`), UpdatedAt: time.UnixMilli(2000).UTC(), Owner: "bob"},
	} {
		got, ok, err := s.LoadThread(ctx, want.ThreadID)
		if err != nil || !ok || describe(got) != describe(want) {
			t.Fatalf("thread %s after the migration: %s %v %v, want %s", want.ThreadID, describe(got), ok, err, describe(want))
		}
		if owner, ok, err := s.ThreadOwner(ctx, want.ThreadID); err != nil || !ok || owner != want.Owner {
			t.Fatalf("owner of %s after the migration: %q %v %v", want.ThreadID, owner, ok, err)
		}
	}
	for _, th := range []durable.Thread{
		{ThreadID: "a", Messages: []byte(`[{"id":"v"}]`), RunID: "ra2", UpdatedAt: time.UnixMilli(3000).UTC(), Owner: "alice"},
		{ThreadID: "c", Messages: []byte(`[]`), RunID: "rc", UpdatedAt: time.UnixMilli(4000).UTC(), Owner: "carol"},
	} {
		if err := s.SaveThread(ctx, th); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := s.LoadThread(ctx, th.ThreadID); err != nil || !ok || describe(got) != describe(th) {
			t.Fatalf("thread %s saved after the migration: %s %v %v, want %s", th.ThreadID, describe(got), ok, err, describe(th))
		}
	}
	db := shutDown(t, s, path)
	var threads, rows, old int
	if err := db.QueryRow(`SELECT count(*) FROM goai_threads`).Scan(&threads); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('goai_threads') WHERE name = 'id'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name IN ('goai_threads_owner', 'goai_threads_by_id')`).Scan(&old); err != nil {
		t.Fatal(err)
	}
	if threads != 3 || rows != 1 || old != 0 {
		t.Fatalf("after the migration: %d threads, id column %d, old index or table %d", threads, rows, old)
	}
}

// describe prints a thread, its transcript as a length and a hash.
func describe(th durable.Thread) string {
	return fmt.Sprintf("%s: run %s, owner %q, at %d, interrupts %s, messages %d bytes (%x)",
		th.ThreadID, th.RunID, th.Owner, th.UpdatedAt.UnixMilli(), th.Interrupts, len(th.Messages), sha256.Sum256(th.Messages))
}

// shutDown shuts s down and opens its database, at path, for the test to
// look into; the test's end closes it.
func shutDown(t *testing.T, s *sqlite.Store, path string) *sql.DB {
	t.Helper()
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// writeDatabase creates the database at path with statements, as an older
// version would have left it.
func writeDatabase(t *testing.T, path string, statements ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range statements {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// logData is the entries of run's log, as fmt.Sprint prints their strings.
func logData(t *testing.T, s *sqlite.Store, run string) string {
	t.Helper()
	snap, err := s.Snapshot(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range snap {
		got = append(got, string(e.Data))
	}
	return fmt.Sprint(got)
}

// A database is marked with the format it was written in; one marked with
// a newer format than this version's is refused, named, and left as it
// was.
func TestRefusesANewerFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "goai.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(context.Background(), "r", [][]byte{[]byte("a")}); err != nil {
		t.Fatal(err)
	}
	db := shutDown(t, s, path)
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("format mark %d (%v), want 1", v, err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 7`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlite.Open(path, nil)
	if !errors.Is(err, sqlite.ErrNewerFormat) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "format 7") {
		t.Fatalf("opening a database in format 7: %v", err)
	}
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != 7 {
		t.Fatalf("format mark after the refusal: %d (%v), want 7", v, err)
	}
}
