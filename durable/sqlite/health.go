package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"

	"github.com/goai-sdk/goai/durable"
)

// migrations bring an older database to the current schema; each is
// applied when the column it adds is missing.
var migrations = []struct{ table, column, ddl string }{
	{"goai_runs", "owner", `ALTER TABLE goai_runs ADD COLUMN owner TEXT NOT NULL DEFAULT ''`},
	{"goai_threads", "owner", `ALTER TABLE goai_threads ADD COLUMN owner TEXT NOT NULL DEFAULT ''`},
}

func migrate(db *sql.DB) error {
	for _, m := range migrations {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, m.table, m.column).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := db.Exec(m.ddl); err != nil {
				return err
			}
		}
	}
	if err := migrateToChunks(db); err != nil {
		return err
	}
	if err := migrateChunksToArrivalOrder(db); err != nil {
		return err
	}
	// goai_threads_owner answers ThreadOwner from the index: in the table,
	// the owner column comes after the transcript, and reaching it walks
	// the transcript's overflow pages.
	_, err := db.Exec(`CREATE UNIQUE INDEX IF NOT EXISTS goai_chunks_seq ON goai_chunks (run_id, last_seq);
CREATE INDEX IF NOT EXISTS goai_runs_finished ON goai_runs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS goai_threads_owner ON goai_threads (thread_id, owner);
CREATE TABLE IF NOT EXISTS goai_run_requests (
	run_id TEXT PRIMARY KEY,
	body   BLOB NOT NULL
) WITHOUT ROWID`)
	return err
}

// migrateChunksToArrivalOrder rewrites a goai_chunks clustered by run
// (WITHOUT ROWID, keyed by run_id and last_seq: the layout before the
// table was in arrival order) as the current table, in one transaction. Its
// index, goai_chunks_seq, is created after it by migrate.
func migrateChunksToArrivalOrder(db *sql.DB) error {
	// The layout is read in the transaction (which holds the write lock),
	// so that two processes opening an old database rewrite it once.
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var ddl string
	err = tx.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'goai_chunks'`).Scan(&ddl)
	if err != nil {
		return fmt.Errorf("the chunk table: %w", err)
	}
	if !strings.Contains(strings.ToUpper(ddl), "WITHOUT ROWID") {
		return nil
	}
	for _, q := range []string{
		`ALTER TABLE goai_chunks RENAME TO goai_chunks_by_run`,
		chunksTable,
		`INSERT INTO goai_chunks (run_id, last_seq, first_seq, data)
			SELECT run_id, last_seq, first_seq, data FROM goai_chunks_by_run ORDER BY run_id, last_seq`,
		`DROP TABLE goai_chunks_by_run`,
	} {
		if _, err := tx.Exec(q); err != nil {
			return fmt.Errorf("moving the chunks to arrival order: %w", err)
		}
	}
	return tx.Commit()
}

// migrateToChunks moves the entries of a database written before chunks,
// one per row, into goai_chunks as chunks of one (whose data is the
// entry's bytes as they are), in one transaction.
func migrateToChunks(db *sql.DB) error {
	var old int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goai_entries'`).Scan(&old); err != nil {
		return err
	}
	if old == 0 {
		return nil
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO goai_chunks (run_id, last_seq, first_seq, data)
		SELECT run_id, seq, seq, data FROM goai_entries ORDER BY run_id, seq`); err != nil {
		return err
	}
	var journal int
	if err := tx.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goai_journal'`).Scan(&journal); err != nil {
		return err
	}
	if journal > 0 {
		if _, err := tx.Exec(`INSERT INTO goai_chunks (run_id, last_seq, first_seq, data)
			SELECT run_id, seq, seq, data FROM goai_journal ORDER BY run_id, seq`); err != nil {
			return err
		}
		if _, err := tx.Exec(`DROP TABLE goai_journal`); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`DROP TABLE goai_entries`); err != nil {
		return err
	}
	return tx.Commit()
}

// watchFile records the database file's identity (device and inode) and
// restricts it, its WAL and shared-memory files to the owner (0600): runs
// hold conversations.
func (s *Store) watchFile(path string) error {
	s.path = path
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file::memory:") {
		return nil
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("durable/sqlite: restricting %s to its owner: %w", p, err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("durable/sqlite: %w", err)
	}
	s.file = fi
	return nil
}

// checkFile fails, for good, once the database file was removed or
// replaced (another inode at the path): writes would go to a file nobody
// will ever open again.
func (s *Store) checkFile() error {
	if p := s.sick.Load(); p != nil {
		return *p
	}
	if s.file == nil {
		return nil
	}
	fi, err := os.Stat(s.path)
	var sick error
	switch {
	case os.IsNotExist(err):
		sick = fmt.Errorf("%w: database file %s was removed", durable.ErrStoreUnhealthy, s.path)
	case err != nil:
		return fmt.Errorf("%w: %v", durable.ErrStoreUnhealthy, err) // maybe transient: not latched
	case !os.SameFile(s.file, fi):
		sick = fmt.Errorf("%w: database file %s was replaced", durable.ErrStoreUnhealthy, s.path)
	default:
		return nil
	}
	s.sick.CompareAndSwap(nil, &sick)
	s.opts.Logger.Error("durable/sqlite: store unhealthy; refusing new runs", "error", sick)
	return sick
}

// Healthy implements durable.Healther: the file is still the one opened
// and, when deep, a write transaction commits.
func (s *Store) Healthy(ctx context.Context, deep bool) error {
	if s.isClosed() {
		return fmt.Errorf("%w: %w", durable.ErrStoreUnhealthy, durable.ErrStoreClosed)
	}
	if err := s.checkFile(); err != nil {
		return err
	}
	if !deep {
		return nil
	}
	err := s.exec(ctx, noRun, func(tx *writeTx) error {
		if _, err := tx.Exec(`CREATE TABLE IF NOT EXISTS goai_probe (id INTEGER PRIMARY KEY, at INTEGER NOT NULL)`); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT OR REPLACE INTO goai_probe (id, at) VALUES (1, ?)`, s.opts.Now().UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: write probe: %w", durable.ErrStoreUnhealthy, err)
	}
	return nil
}
