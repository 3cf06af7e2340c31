package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// A database written before owners existed opens, keeps its runs (owner
// ""), and records owners from then on.
func TestMigratesAnOwnerlessDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE goai_runs (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE, thread_id TEXT NOT NULL, status TEXT NOT NULL,
			started_at INTEGER NOT NULL, finished_at INTEGER, error_message TEXT, error_code TEXT, usage TEXT, sandbox_key TEXT,
			detached_since INTEGER, cancel_requested INTEGER, driver_epoch INTEGER)`,
		`CREATE TABLE goai_threads (thread_id TEXT PRIMARY KEY, messages TEXT NOT NULL, run_id TEXT NOT NULL, interrupts TEXT, updated_at INTEGER NOT NULL) WITHOUT ROWID`,
		`INSERT INTO goai_runs (run_id, thread_id, status, started_at) VALUES ('old', 't', 'completed', 1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
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
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE goai_logs (run_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, created_at INTEGER NOT NULL, closed_at INTEGER) WITHOUT ROWID`,
		`CREATE TABLE goai_entries (run_id TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID`,
		`CREATE TABLE goai_journal (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL)`,
		`INSERT INTO goai_logs VALUES ('r', 0, 1, NULL)`,
		`INSERT INTO goai_entries VALUES ('r', 1, 'a'), ('r', 2, ''), ('r', 3, 'c')`,
		`INSERT INTO goai_journal (run_id, seq, data) VALUES ('r', 4, 'd'), ('r', 5, 'e')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s := open(t, path)
	ctx := context.Background()
	if _, err := s.Append(ctx, "r", [][]byte{[]byte("f")}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range snap {
		got = append(got, string(e.Data))
	}
	if fmt.Sprint(got) != "[a  c d e f]" {
		t.Fatalf("after the migration: %q", got)
	}
	db, err = sql.Open("sqlite", path)
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
