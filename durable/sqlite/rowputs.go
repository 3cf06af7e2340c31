package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
)

// rowPuts are the inserts of the rows a transaction queues (writeTx's
// journal and chunks), of 1, 2, 4, ... 64 rows each (journalPutRows),
// prepared on the writer's connection and run on its driver connection
// (sql.Conn.Raw). Through database/sql every Exec converted its
// arguments, four a row, into a new []driver.NamedValue: at 100 streams
// paced at 50 ms a fifth of what a SQLite server allocated (12.5 of
// 56 MB over three runs a client, /debug/pprof/allocs). Here one array
// of them serves every insert.
type rowPuts struct {
	c       *sql.Conn // the writer's
	journal [len(journalPutRows)]driverStmt
	chunks  [len(journalPutRows)]driverStmt
	args    []driver.NamedValue
}

// driverStmt is a driver's prepared statement that executes with a
// context.
type driverStmt interface {
	driver.Stmt
	driver.StmtExecContext
}

// journalPutRows are the row counts of rowPuts' statements.
var journalPutRows = [...]int{1, 2, 4, 8, 16, 32, 64}

// prepareRowPuts prepares p's statements on c.
func prepareRowPuts(c *sql.Conn) (*rowPuts, error) {
	p := &rowPuts{c: c}
	// OR FAIL: a multi-row insert that could abort midway makes SQLite
	// keep a statement journal, to undo the statement's earlier rows; a
	// failed insert fails its whole transaction here, so that copy of
	// the pages it touches is not needed. A chunk row names its log as
	// logOf does, with a parameter of its own rather than ?1.
	err := c.Raw(func(dc any) error {
		pc, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("driver connection %T prepares no statements with a context", dc)
		}
		prep := func(query string) (driverStmt, error) {
			st, err := pc.PrepareContext(context.Background(), query)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", query, err)
			}
			ex, ok := st.(driverStmt)
			if !ok {
				st.Close()
				return nil, fmt.Errorf("driver statement %T executes nothing with a context", st)
			}
			return ex, nil
		}
		for i, n := range journalPutRows {
			var err error
			if p.journal[i], err = prep(`INSERT OR FAIL INTO goai_chunk_journal (run_id, first_seq, last_seq, data) VALUES ` +
				strings.TrimSuffix(strings.Repeat(`(?, ?, ?, ?), `, n), ", ")); err != nil {
				return err
			}
			if p.chunks[i], err = prep(`INSERT OR FAIL INTO goai_chunks (log, first_seq, last_seq, data) VALUES ` +
				strings.TrimSuffix(strings.Repeat(`((SELECT id FROM goai_logs WHERE run_id = ?), ?, ?, ?), `, n), ", ")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// insert inserts rows (four arguments a row: run id, first and last seq,
// data) with puts, p.journal or p.chunks, in as few statements as
// journalPutRows allow.
func (p *rowPuts) insert(rows []any, puts *[len(journalPutRows)]driverStmt) error {
	if len(rows) == 0 {
		return nil
	}
	return p.c.Raw(func(any) error {
		defer func() { clear(p.args[:cap(p.args)]) }() // the rows' data is not kept here
		for len(rows) > 0 {
			i := len(journalPutRows) - 1
			for journalPutRows[i]*4 > len(rows) {
				i--
			}
			n := journalPutRows[i] * 4
			p.args = p.args[:0]
			for j, v := range rows[:n] {
				p.args = append(p.args, driver.NamedValue{Ordinal: j + 1, Value: v})
			}
			if _, err := puts[i].ExecContext(context.Background(), p.args); err != nil {
				return err
			}
			rows = rows[n:]
		}
		return nil
	})
}

// close closes p's statements, on the connection they were prepared on.
func (p *rowPuts) close() error {
	return p.c.Raw(func(any) error {
		var errs []error
		for _, st := range append(p.journal[:], p.chunks[:]...) {
			if st != nil {
				errs = append(errs, st.Close())
			}
		}
		return errors.Join(errs...)
	})
}
