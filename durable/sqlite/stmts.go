package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
)

// putMany is the smallest batch stored in goai_chunks directly rather
// than in the journal (journal.go).
const putMany = 16

// stmts are the statements of every append, commit and read, prepared once
// when the store opens: parsing SQL costs more than running these. The
// writer's are prepared on its single connection (used in a transaction
// through tx.Stmt, which reuses them as they are); the readers' on their
// pool, which prepares each once per connection.
type stmts struct {
	dataVersion, producerGet, appendState, tailGet, logCreate, journalPut, chunkPut, producerPut *sql.Stmt

	readPage, readState, readLog, readRun *sql.Stmt
}

// appendStateSQL reads, for an append, whether the log is closed (NULL:
// there is no log yet) and the run's driver epoch (NULL: no run).
const appendStateSQL = `SELECT
	(SELECT closed_at IS NOT NULL FROM goai_logs WHERE run_id = ?1),
	(SELECT driver_epoch FROM goai_runs WHERE run_id = ?1)`

// readLogSQL reads a log's tail, whether it is closed and the chunks
// holding its entries after seq ?2 up to seq ?3, in one snapshot. Seqs are
// dense, so those are the next ?3 - ?2 entries; a chunk ends at most
// maxChunk-1 entries after it starts, so ?4 (?3 + maxChunk - 1) bounds
// the index range scanned.
const readLogSQL = `
	WITH e AS (
		SELECT first_seq, last_seq, data FROM goai_chunks WHERE run_id = ?1 AND last_seq > ?2 AND last_seq <= ?4 AND first_seq <= ?3
		UNION ALL
		SELECT first_seq, last_seq, data FROM goai_chunk_journal WHERE run_id = ?1 AND last_seq > ?2 AND first_seq <= ?3
	)
	SELECT ` + tailSQL + `, l.closed_at IS NOT NULL, e.first_seq, e.last_seq, e.data
	FROM goai_logs l LEFT JOIN e ON true
	WHERE l.run_id = ?1
	ORDER BY e.last_seq`

func (s *Store) prepare() error {
	var errs []error
	prep := func(db *sql.DB, query string) *sql.Stmt {
		st, err := db.Prepare(query)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", query, err))
		}
		return st
	}
	w, r := s.w, s.r
	s.st = stmts{
		producerGet: prep(w, `SELECT first_seq, n FROM goai_producers WHERE run_id = ? AND producer_id = ? AND producer_seq = ?`),
		appendState: prep(w, appendStateSQL),
		logCreate:   prep(w, `INSERT INTO goai_logs (run_id, last_seq, created_at) VALUES (?, 0, ?)`),
		tailGet:     prep(w, `SELECT `+tailSQL),
		dataVersion: prep(w, `PRAGMA data_version`),
		journalPut:  prep(w, `INSERT INTO goai_chunk_journal (run_id, first_seq, last_seq, data) VALUES (?, ?, ?, ?)`),
		chunkPut:    prep(w, `INSERT INTO goai_chunks (run_id, first_seq, last_seq, data) VALUES (?, ?, ?, ?)`),
		producerPut: prep(w, `INSERT INTO goai_producers (run_id, producer_id, producer_seq, first_seq, n) VALUES (?, ?, ?, ?, ?)`),

		readPage: prep(r, `SELECT first_seq, last_seq, data FROM goai_chunks WHERE run_id = ?1 AND last_seq > ?2 AND last_seq <= ?4 AND first_seq <= ?3
			UNION ALL SELECT first_seq, last_seq, data FROM goai_chunk_journal WHERE run_id = ?1 AND last_seq > ?2 AND first_seq <= ?3
			ORDER BY last_seq`),
		readState: prep(r, `SELECT `+tailSQL+`, closed_at FROM goai_logs WHERE run_id = ?1`),
		readLog:   prep(r, readLogSQL),
		readRun:   prep(r, `SELECT `+runColumns+` FROM goai_runs WHERE run_id = ?`),
	}
	if len(errs) > 0 {
		s.st.close()
		return fmt.Errorf("durable/sqlite: prepare: %w", errors.Join(errs...))
	}
	return nil
}

func (st *stmts) close() {
	for _, s := range []*sql.Stmt{
		st.producerGet, st.dataVersion, st.appendState, st.tailGet, st.logCreate, st.journalPut, st.chunkPut, st.producerPut,
		st.readPage, st.readState, st.readLog, st.readRun,
	} {
		if s != nil {
			s.Close()
		}
	}
}
