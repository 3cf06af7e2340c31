package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	msqlite "modernc.org/sqlite"
)

// writeTx is a transaction of the writer, on its one connection. The
// writer does not use database/sql's Tx: the driver parsed BEGIN and COMMIT
// anew for every transaction, and Tx.Stmt wrapped each prepared statement
// again in every transaction, a large part of the writer's CPU when
// transactions hold a few appends each (paced tokens; docs/durable.md §3).
// Here BEGIN, COMMIT and ROLLBACK are statements prepared on the
// connection like the others, and the writer's statements run as they are.
//
// Only the writer goroutine uses one, and only between Store.begin and its
// Commit or Rollback.
type writeTx struct {
	c     *sql.Conn
	st    *stmts
	done  bool
	ended func() // called once the transaction has ended, committed or not

	// journal holds the rows of the journal queued by appends
	// (queueJournal), four arguments a row, until flushQueued inserts
	// them. No other statement runs in the transaction while any is
	// queued (Stmt, Exec, Query and QueryRow refuse to), so every
	// statement sees the journal as if each row had been inserted when it
	// was queued.
	journal []any
	// chunks holds the rows of goai_chunks queued by appends of many
	// entries (queueChunk), as journal does those of the journal; their
	// data is in chunkData, which the transaction's flush frees for reuse.
	chunks    []any
	chunkData []byte
	// logFree: the op running promised to read and write no log's rows
	// (op.logFree): its statements may run with rows queued.
	logFree bool
	// cancels: a statement of the transaction wrote a run's
	// cancel_requested (cancelMemo counts the commit).
	cancels bool
}

// queueJournal queues a row of goai_chunk_journal. A paced transaction
// carries an append of one token from each of tens of runs: one
// statement for all of them costs a few microseconds less per token than
// a statement each, most of what an append cost (docs/durable.md §3).
func (tx *writeTx) queueJournal(runID string, first, last int64, data []byte) {
	tx.journal = append(tx.journal, runID, first, last, data)
}

// queueChunk queues a row of goai_chunks: runID's entries first..last,
// encoded from batch. An unpaced transaction carries a batch of tens of
// entries from each of tens of runs, a row each.
func (tx *writeTx) queueChunk(runID string, first, last int64, batch [][]byte) {
	from := len(tx.chunkData)
	if len(batch) == 1 {
		tx.chunkData = append(tx.chunkData, batch[0]...)
	} else {
		tx.chunkData = appendChunk(tx.chunkData, batch)
	}
	// Capped: a later chunk appended to the buffer never writes into this
	// one's bytes (a grown buffer leaves the earlier rows in the old one).
	data := tx.chunkData[from:len(tx.chunkData):len(tx.chunkData)]
	if data == nil {
		data = []byte{}
	}
	tx.chunks = append(tx.chunks, runID, first, last, data)
}

// flushQueued inserts the queued rows, journal and chunks, each table's
// in the order they were queued, in as few statements as journalPutRows
// allow.
func (tx *writeTx) flushQueued() error {
	if err := tx.st.puts.insert(tx.journal, &tx.st.puts.journal); err != nil {
		return fmt.Errorf("durable/sqlite: journal insert: %w", err)
	}
	clear(tx.journal) // the rows' data is the writer's copy or the producer's: not kept here
	tx.journal = tx.journal[:0]
	if err := tx.st.puts.insert(tx.chunks, &tx.st.puts.chunks); err != nil {
		return fmt.Errorf("durable/sqlite: chunk insert: %w", err)
	}
	clear(tx.chunks)
	tx.chunks = tx.chunks[:0]
	if cap(tx.chunkData) > maxChunkData {
		tx.chunkData = nil // a burst of large entries does not stay held
	}
	tx.chunkData = tx.chunkData[:0] // the driver copied what it bound
	return nil
}

// maxChunkData is the largest buffer of queued chunks a transaction
// leaves to the next: a commit of a hundred unpaced runs' batches.
const maxChunkData = 1 << 20

// unflushed panics if rows are queued: a statement that ran now would not
// see them.
func (tx *writeTx) unflushed() {
	if !tx.logFree && (len(tx.journal) > 0 || len(tx.chunks) > 0) {
		panic("durable/sqlite: a statement run in the writer's transaction with rows queued (flushQueued first)")
	}
}

// Stmt returns st, a statement of the writer's (prepared on its
// connection), for use in the transaction; Tx.Stmt's counterpart, so that
// a statement of the readers' pool, which would run outside the
// transaction, is caught.
func (tx *writeTx) Stmt(st *sql.Stmt) *sql.Stmt {
	if !tx.st.writes(st) {
		panic("durable/sqlite: a statement not prepared on the writer's connection used in its transaction")
	}
	tx.unflushed()
	return st
}

// Exec runs query in the transaction (statements run once; the others
// are prepared).
func (tx *writeTx) Exec(query string, args ...any) (sql.Result, error) {
	tx.unflushed()
	return tx.c.ExecContext(context.Background(), query, args...)
}

// Query runs query in the transaction.
func (tx *writeTx) Query(query string, args ...any) (*sql.Rows, error) {
	tx.unflushed()
	return tx.c.QueryContext(context.Background(), query, args...)
}

// QueryRow runs query in the transaction.
func (tx *writeTx) QueryRow(query string, args ...any) *sql.Row {
	tx.unflushed()
	return tx.c.QueryRowContext(context.Background(), query, args...)
}

// Commit commits the transaction. When COMMIT fails SQLite may keep the
// transaction open (a busy database): it is rolled back, so the next one
// starts clean.
func (tx *writeTx) Commit() error {
	if tx.done {
		return sql.ErrTxDone
	}
	tx.done = true
	defer tx.ended()
	tx.unflushed()
	if _, err := tx.st.commit.Exec(); err != nil {
		tx.st.rollback.Exec() // fails when SQLite ended it already
		return err
	}
	return nil
}

// Rollback rolls the transaction back; after Commit or Rollback it
// returns sql.ErrTxDone, so it can be deferred.
func (tx *writeTx) Rollback() error {
	if tx.done {
		return sql.ErrTxDone
	}
	tx.done = true
	defer tx.ended()
	clear(tx.journal) // never inserted: the rollback drops them with the rest
	tx.journal = tx.journal[:0]
	clear(tx.chunks)
	tx.chunks = tx.chunks[:0]
	tx.chunkData = tx.chunkData[:0]
	_, err := tx.st.rollback.Exec()
	return err
}

// fileVersion returns the data version of the writer connection's pager,
// which changes whenever the database file does, through this connection
// or another (sqlite3_file_control, SQLITE_FCNTL_DATA_VERSION).
func (s *Store) fileVersion() (uint32, error) {
	var v uint32
	err := s.wc.Raw(func(dc any) error {
		fc, ok := dc.(msqlite.FileControl)
		if !ok {
			return fmt.Errorf("driver connection %T has no file control", dc)
		}
		var err error
		v, err = fc.FileControlDataVersion("main")
		return err
	})
	return v, err
}
