package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
)

// stmts are the statements of every append, commit and read, prepared once
// when the store opens: parsing SQL costs more than running these. The
// writer's are prepared on its single connection (used in a transaction
// through tx.Stmt, which reuses them as they are); the readers' on their
// pool, which prepares each once per connection.
type stmts struct {
	savepoint, release, rollbackTo *sql.Stmt

	producerGet, epoch, logGet, logCreate, entryPut, logAdvance, producerPut *sql.Stmt

	readPage, readState, readLog, readRun *sql.Stmt
}

// readLogSQL reads a log's state and a page of its entries in one snapshot.
const readLogSQL = `
	SELECT l.last_seq, l.closed_at IS NOT NULL, e.seq, e.data
	FROM goai_logs l
	LEFT JOIN goai_entries e ON e.run_id = l.run_id AND e.seq > ? AND e.seq <= l.last_seq
	WHERE l.run_id = ?
	ORDER BY e.seq LIMIT ?`

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
		savepoint:  prep(w, `SAVEPOINT op`),
		release:    prep(w, `RELEASE op`),
		rollbackTo: prep(w, `ROLLBACK TO op`),

		producerGet: prep(w, `SELECT first_seq, n FROM goai_producers WHERE run_id = ? AND producer_id = ? AND producer_seq = ?`),
		epoch:       prep(w, `SELECT driver_epoch FROM goai_runs WHERE run_id = ?`),
		logGet:      prep(w, `SELECT last_seq, closed_at FROM goai_logs WHERE run_id = ?`),
		logCreate:   prep(w, `INSERT INTO goai_logs (run_id, last_seq, created_at) VALUES (?, ?, ?)`),
		entryPut:    prep(w, `INSERT INTO goai_entries (run_id, seq, data) VALUES (?, ?, ?)`),
		logAdvance:  prep(w, `UPDATE goai_logs SET last_seq = last_seq + ? WHERE run_id = ? AND closed_at IS NULL RETURNING last_seq`),
		producerPut: prep(w, `INSERT INTO goai_producers (run_id, producer_id, producer_seq, first_seq, n) VALUES (?, ?, ?, ?, ?)`),

		readPage:  prep(r, `SELECT seq, data FROM goai_entries WHERE run_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`),
		readState: prep(r, `SELECT last_seq, closed_at FROM goai_logs WHERE run_id = ?`),
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
		st.savepoint, st.release, st.rollbackTo,
		st.producerGet, st.epoch, st.logGet, st.logCreate, st.entryPut, st.logAdvance, st.producerPut,
		st.readPage, st.readState, st.readLog, st.readRun,
	} {
		if s != nil {
			s.Close()
		}
	}
}
