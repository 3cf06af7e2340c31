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
	{"goai_logs", "id", `ALTER TABLE goai_logs ADD COLUMN id INTEGER`},
}

func migrate(db *sql.DB) error {
	for _, m := range migrations {
		if has, err := hasColumn(db, m.table, m.column); err != nil {
			return err
		} else if !has {
			if _, err := db.Exec(m.ddl); err != nil {
				return err
			}
		}
	}
	if err := numberLogs(db); err != nil {
		return fmt.Errorf("numbering the logs: %w", err)
	}
	if err := migrateToChunks(db); err != nil {
		return err
	}
	if err := migrateChunksToLogs(db); err != nil {
		return err
	}
	if err := migrateThreadsToRows(db); err != nil {
		return fmt.Errorf("moving the threads to rows: %w", err)
	}
	_, err := db.Exec(`CREATE UNIQUE INDEX IF NOT EXISTS goai_chunks_log ON goai_chunks (log, last_seq);
CREATE INDEX IF NOT EXISTS goai_runs_finished ON goai_runs (finished_at) WHERE finished_at IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS goai_threads_id ON goai_threads (thread_id);
CREATE TABLE IF NOT EXISTS goai_run_requests (
	run_id TEXT PRIMARY KEY,
	body   BLOB NOT NULL
) WITHOUT ROWID`)
	return err
}

// hasColumn reports whether table has column.
func hasColumn(q interface {
	QueryRow(string, ...any) *sql.Row
}, table, column string) (bool, error) {
	var n int
	err := q.QueryRow(`SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, table, column).Scan(&n)
	return n > 0, err
}

// hasTable reports whether the database has table.
func hasTable(q interface {
	QueryRow(string, ...any) *sql.Row
}, table string) (bool, error) {
	var n int
	err := q.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n)
	return n > 0, err
}

// numberLogs gives every log without a number (goai_logs.id: a database
// written before logs were numbered) one, in creation order after the
// numbered ones, in one transaction. Entries whose run has no goai_logs
// row (which no version wrote) get one first, open, so that moving them
// under a number keeps them.
func numberLogs(db *sql.DB) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var unnumbered int
	if err := tx.QueryRow(`SELECT count(*) FROM goai_logs WHERE id IS NULL`).Scan(&unnumbered); err != nil {
		return err
	}
	// Tables of entries that name their run: the journal, and, in the
	// layouts before numbers, the chunks and the tables before chunks.
	sources := []string{"goai_chunk_journal"}
	for _, t := range []string{"goai_entries", "goai_journal"} {
		if has, err := hasTable(tx, t); err != nil {
			return err
		} else if has {
			sources = append(sources, t)
		}
	}
	if named, err := hasColumn(tx, "goai_chunks", "run_id"); err != nil {
		return err
	} else if named {
		sources = append(sources, "goai_chunks")
	}
	if older := len(sources) > 1; unnumbered == 0 && !older {
		// The current layout, numbered throughout: the journal's runs
		// have their logs (an append creates the log first).
		_, err := tx.Exec(`CREATE UNIQUE INDEX IF NOT EXISTS goai_logs_id ON goai_logs (id)`)
		if err != nil {
			return err
		}
		return tx.Commit()
	}
	for _, t := range sources {
		if _, err := tx.Exec(`INSERT INTO goai_logs (run_id, last_seq, created_at)
			SELECT DISTINCT run_id, 0, 0 FROM ` + t + ` WHERE run_id NOT IN (SELECT run_id FROM goai_logs)`); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`WITH n AS (
			SELECT run_id, row_number() OVER (ORDER BY created_at, run_id) AS k FROM goai_logs WHERE id IS NULL)
		UPDATE goai_logs SET id = (SELECT coalesce(max(id), 0) FROM goai_logs) + n.k FROM n WHERE goai_logs.run_id = n.run_id`); err != nil {
		return err
	}
	if _, err := tx.Exec(`CREATE UNIQUE INDEX IF NOT EXISTS goai_logs_id ON goai_logs (id)`); err != nil {
		return err
	}
	return tx.Commit()
}

// migrateChunksToLogs rewrites a goai_chunks that names runs (the layouts
// before logs were numbered: in arrival order, or before that clustered by
// run, WITHOUT ROWID and keyed by run_id and last_seq) as the current
// table, whose chunks name their log's number, in one transaction. Its
// index, goai_chunks_log, is created after it by migrate.
func migrateChunksToLogs(db *sql.DB) error {
	// The layout is read in the transaction (which holds the write lock),
	// so that two processes opening an old database rewrite it once.
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if named, err := hasColumn(tx, "goai_chunks", "run_id"); err != nil || !named {
		return err
	}
	var ddl string
	if err := tx.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'goai_chunks'`).Scan(&ddl); err != nil {
		return fmt.Errorf("the chunk table: %w", err)
	}
	order := `c.id` // arrival order, kept
	if strings.Contains(strings.ToUpper(ddl), "WITHOUT ROWID") {
		order = `c.run_id, c.last_seq`
	}
	for _, q := range []string{
		`ALTER TABLE goai_chunks RENAME TO goai_chunks_by_run`,
		chunksTable,
		`INSERT INTO goai_chunks (log, last_seq, first_seq, data)
			SELECT l.id, c.last_seq, c.first_seq, c.data FROM goai_chunks_by_run c JOIN goai_logs l ON l.run_id = c.run_id ORDER BY ` + order,
		`DROP TABLE goai_chunks_by_run`,
	} {
		if _, err := tx.Exec(q); err != nil {
			return fmt.Errorf("numbering the chunks' logs: %w", err)
		}
	}
	return tx.Commit()
}

// migrateThreadsToRows rewrites a goai_threads keyed by thread (WITHOUT
// ROWID, the layout before threadsTable) as the current table, in the
// order its threads were last saved, in one transaction; its old index,
// goai_threads_owner, goes with it. goai_threads_id is created after it by
// migrate.
func migrateThreadsToRows(db *sql.DB) error {
	// The layout is read in the transaction (which holds the write lock),
	// so that two processes opening an old database rewrite it once.
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if migrated, err := hasColumn(tx, "goai_threads", "id"); err != nil || migrated {
		return err
	}
	for _, q := range []string{
		`ALTER TABLE goai_threads RENAME TO goai_threads_by_id`,
		threadsTable,
		`INSERT INTO goai_threads (thread_id, owner, run_id, updated_at, interrupts, messages)
			SELECT thread_id, owner, run_id, updated_at, interrupts, messages FROM goai_threads_by_id ORDER BY updated_at, thread_id`,
		`DROP TABLE goai_threads_by_id`,
	} {
		if _, err := tx.Exec(q); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// migrateToChunks moves the entries of a database written before chunks,
// one per row, into goai_chunks as chunks of one (whose data is the
// entry's bytes as they are), in one transaction.
func migrateToChunks(db *sql.DB) error {
	if old, err := hasTable(db, "goai_entries"); err != nil || !old {
		return err
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO goai_chunks (log, last_seq, first_seq, data)
		SELECT l.id, e.seq, e.seq, e.data FROM goai_entries e JOIN goai_logs l ON l.run_id = e.run_id ORDER BY e.run_id, e.seq`); err != nil {
		return err
	}
	if journal, err := hasTable(tx, "goai_journal"); err != nil {
		return err
	} else if journal {
		if _, err := tx.Exec(`INSERT INTO goai_chunks (log, last_seq, first_seq, data)
			SELECT l.id, j.seq, j.seq, j.data FROM goai_journal j JOIN goai_logs l ON l.run_id = j.run_id ORDER BY j.run_id, j.seq`); err != nil {
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
