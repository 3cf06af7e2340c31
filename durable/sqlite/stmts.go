package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// putMany is how many entries one prepared multi-row insert stores: a
// batch is stored putMany at a time, the rest one by one (one statement
// costs about as much as a row, so this cuts an unpaced producer's
// statements by about putMany).
const putMany = 16

// stmts are the statements of every append, commit and read, prepared once
// when the store opens: parsing SQL costs more than running these. The
// writer's are prepared on its single connection (used in a transaction
// through tx.Stmt, which reuses them as they are); the readers' on their
// pool, which prepares each once per connection.
type stmts struct {
	dataVersion, producerGet, appendState, tailGet, logCreate, journalPut, entryPut, entryPutMany, producerPut *sql.Stmt

	readPage, readState, readLog, readRun *sql.Stmt
}

// appendStateSQL reads, for an append, whether the log is closed (NULL:
// there is no log yet) and the run's driver epoch (NULL: no run).
const appendStateSQL = `SELECT
	(SELECT closed_at IS NOT NULL FROM goai_logs WHERE run_id = ?1),
	(SELECT driver_epoch FROM goai_runs WHERE run_id = ?1)`

// readLogSQL reads a log's tail, whether it is closed and a page of its
// entries (?3 of them after seq ?2) in one snapshot: the first ?3 of each
// table, merged.
const readLogSQL = `
	WITH e AS (
		SELECT * FROM (SELECT seq, data FROM goai_entries WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3)
		UNION ALL
		SELECT * FROM (SELECT seq, data FROM goai_journal WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3)
	)
	SELECT ` + tailSQL + `, l.closed_at IS NOT NULL, e.seq, e.data
	FROM goai_logs l LEFT JOIN e ON true
	WHERE l.run_id = ?1
	ORDER BY e.seq LIMIT ?3`

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
		producerGet:  prep(w, `SELECT first_seq, n FROM goai_producers WHERE run_id = ? AND producer_id = ? AND producer_seq = ?`),
		appendState:  prep(w, appendStateSQL),
		logCreate:    prep(w, `INSERT INTO goai_logs (run_id, last_seq, created_at) VALUES (?, 0, ?)`),
		tailGet:      prep(w, `SELECT `+tailSQL),
		dataVersion:  prep(w, `PRAGMA data_version`),
		journalPut:   prep(w, `INSERT INTO goai_journal (run_id, seq, data) VALUES (?, ?, ?)`),
		entryPut:     prep(w, `INSERT INTO goai_entries (run_id, seq, data) VALUES (?, ?, ?)`),
		entryPutMany: prep(w, `INSERT INTO goai_entries (run_id, seq, data) VALUES `+strings.Repeat(`(?, ?, ?), `, putMany-1)+`(?, ?, ?)`),
		producerPut:  prep(w, `INSERT INTO goai_producers (run_id, producer_id, producer_seq, first_seq, n) VALUES (?, ?, ?, ?, ?)`),

		readPage: prep(r, `SELECT seq, data FROM goai_entries WHERE run_id = ?1 AND seq > ?2 AND seq <= ?3
			UNION ALL SELECT seq, data FROM goai_journal WHERE run_id = ?1 AND seq > ?2 AND seq <= ?3
			ORDER BY seq LIMIT ?4`),
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
		st.producerGet, st.dataVersion, st.appendState, st.tailGet, st.logCreate, st.journalPut, st.entryPut, st.entryPutMany, st.producerPut,
		st.readPage, st.readState, st.readLog, st.readRun,
	} {
		if s != nil {
			s.Close()
		}
	}
}
