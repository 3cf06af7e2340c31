package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// putMany is the smallest batch stored in goai_chunks directly rather
// than in the journal (journal.go).
const putMany = 16

// stmts are the statements of every append, commit and read, and of a
// run's life (its record, lease, request, thread and log close), prepared
// once when the store opens: parsing SQL costs more than running most of
// these (about a tenth of the server's CPU with 30 runs per client, when
// a run's writes were parsed each time). The writer's, BEGIN and COMMIT
// among them, are prepared on its one connection (writeTx); the readers'
// on their pool, which prepares each once per connection.
type stmts struct {
	begin, commit, rollback                                                     *sql.Stmt
	producerGet, appendState, tailGet, logCreate, chunkPut, producerPut         *sql.Stmt
	journalAll, journalClear, logClose                                          *sql.Stmt
	runGet, runUpdate, runInsert, runClaim, runClaimIf, leaseBeat, leaseBeatAll *sql.Stmt
	leaseLost                                                                   *sql.Stmt
	threadPut, requestPut, checkpoint, restartWAL, busyShort, busyLong          *sql.Stmt
	threadClaim, ownerGet                                                       *sql.Stmt

	readPage, readState, readLog, readRun                *sql.Stmt
	readRequest, readThread, readOwner, readCancels      *sql.Stmt
	listByThread, listActive, listReclaimable, listStale *sql.Stmt

	// puts insert a transaction's queued rows of the journal and of
	// goai_chunks, in a few statements (writeTx.flushQueued).
	puts *rowPuts

	writer map[*sql.Stmt]bool // the statements prepared on the writer's connection

	// patches are the writer's UPDATEs of run patches, by the fields
	// they set (patchStmt), prepared when first needed.
	patches map[patchShape]*sql.Stmt
}

// logOf is the number of run ?1's log (goai_logs.id), under which its
// chunks are filed.
const logOf = `(SELECT id FROM goai_logs WHERE run_id = ?1)`

// newLogID numbers a new log: in creation order, so that the logs being
// written are neighbours in goai_chunks_log (sqlite.go, schema). A prune
// of the newest log frees its number for the next; its chunks go with it,
// in the same transaction, so a number never names two logs' chunks.
const newLogID = `(SELECT coalesce(max(id), 0) + 1 FROM goai_logs)`

// listSQL starts the queries that list run records.
const listSQL = `SELECT ` + runColumns + ` FROM goai_runs WHERE `

// leaseSeen is when a run's producer was last seen: its lease's last
// heartbeat, or the run's start.
const leaseSeen = `coalesce((SELECT l.heartbeat_at FROM goai_leases l WHERE l.run_id = goai_runs.run_id), started_at)`

// threadOwnerSQL is the owner of thread ?1: its saved thread's, else its
// first run's; NULL when it has neither. The thread's row holds its owner
// before its transcript (threadsTable), so reading it never walks the
// transcript's overflow pages; and coalesce evaluates the runs' query only
// when there is no row, since it reads every run of the thread (to order
// them), a cost that grew with the conversation on every request.
const threadOwnerSQL = `SELECT coalesce(
		(SELECT owner FROM goai_threads WHERE thread_id = ?1),
		(SELECT owner FROM goai_runs WHERE thread_id = ?1 ORDER BY started_at, id LIMIT 1))`

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
		SELECT first_seq, last_seq, data FROM goai_chunks WHERE log = ` + logOf + ` AND last_seq > ?2 AND last_seq <= ?4 AND first_seq <= ?3
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
	// The writer's statements are bound to its connection.
	writer := map[*sql.Stmt]bool{}
	w := func(query string) *sql.Stmt {
		st, err := s.wc.PrepareContext(context.Background(), query)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", query, err))
			return nil
		}
		writer[st] = true
		return st
	}
	r := s.r
	s.st = stmts{
		writer:       writer,
		begin:        w(`BEGIN IMMEDIATE`),
		commit:       w(`COMMIT`),
		rollback:     w(`ROLLBACK`),
		producerGet:  w(`SELECT first_seq, n FROM goai_producers WHERE run_id = ? AND producer_id = ? AND producer_seq = ?`),
		appendState:  w(appendStateSQL),
		logCreate:    w(`INSERT INTO goai_logs (run_id, last_seq, created_at, id) VALUES (?1, 0, ?2, ` + newLogID + `) ON CONFLICT (run_id) DO NOTHING`),
		tailGet:      w(`SELECT ` + tailSQL),
		chunkPut:     w(`INSERT INTO goai_chunks (log, first_seq, last_seq, data) VALUES (` + logOf + `, ?2, ?3, ?4)`),
		producerPut:  w(`INSERT INTO goai_producers (run_id, producer_id, producer_seq, first_seq, n) VALUES (?, ?, ?, ?, ?)`),
		journalAll:   w(`SELECT run_id, first_seq, last_seq, data FROM goai_chunk_journal ORDER BY run_id, last_seq`),
		journalClear: w(`DELETE FROM goai_chunk_journal`),
		logClose: w(`INSERT INTO goai_logs (run_id, last_seq, created_at, closed_at, id)
			VALUES (?1, ?2, ?3, ?3, ` + newLogID + `)
			ON CONFLICT (run_id) DO UPDATE SET closed_at = coalesce(closed_at, excluded.closed_at), last_seq = excluded.last_seq`),
		runGet:    w(`SELECT ` + runColumns + ` FROM goai_runs WHERE run_id = ?`),
		runUpdate: w(`UPDATE goai_runs SET (` + runMutableColumns + `) = (?, ?, ?, ?, ?, ?, ?, ?, ?) WHERE run_id = ?`),
		runInsert: w(`INSERT INTO goai_runs (` + runColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (run_id) DO NOTHING`),
		// A claim moves a live run's epoch one up and reads it in one
		// statement; a fenced claim (ClaimIf) also names the epoch it
		// expects. No row: the run is unknown, ended or taken (getTx says
		// which).
		runClaim: w(`UPDATE goai_runs SET driver_epoch = coalesce(driver_epoch, 0) + 1
			WHERE run_id = ?1 AND status NOT IN ` + terminalStatuses + ` RETURNING driver_epoch`),
		runClaimIf: w(`UPDATE goai_runs SET driver_epoch = coalesce(driver_epoch, 0) + 1
			WHERE run_id = ?1 AND status NOT IN ` + terminalStatuses + ` AND coalesce(driver_epoch, 0) = ?2 RETURNING driver_epoch`),
		leaseBeat: w(`INSERT INTO goai_leases (run_id, heartbeat_at) VALUES (?, ?)
			ON CONFLICT (run_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`),
		leaseBeatAll: w(`INSERT INTO goai_leases (run_id, heartbeat_at)
			SELECT r.run_id, ? FROM json_each(?) c JOIN goai_runs r ON r.run_id = c.value->>'r'
			WHERE coalesce(r.driver_epoch, 0) = c.value->>'e'
			ON CONFLICT (run_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`),
		leaseLost: w(`SELECT r.run_id FROM json_each(?) c JOIN goai_runs r ON r.run_id = c.value->>'r'
			WHERE coalesce(r.driver_epoch, 0) <> c.value->>'e'`),
		threadPut: w(`INSERT INTO goai_threads (thread_id, messages, run_id, interrupts, updated_at, owner) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (thread_id) DO UPDATE SET messages = excluded.messages, run_id = excluded.run_id,
				interrupts = excluded.interrupts, updated_at = excluded.updated_at, owner = excluded.owner`),
		// A thread is claimed unless it has a saved thread or a run
		// (threadOwnerSQL's answer): a conflict, or no row to insert.
		threadClaim: w(`INSERT INTO goai_threads (thread_id, messages, run_id, updated_at, owner)
			SELECT ?1, '[]', '', ?2, ?3 WHERE NOT EXISTS (SELECT 1 FROM goai_runs WHERE thread_id = ?1)
			ON CONFLICT (thread_id) DO NOTHING`),
		ownerGet: w(threadOwnerSQL),
		requestPut: w(`INSERT INTO goai_run_requests (run_id, body) VALUES (?, ?)
			ON CONFLICT (run_id) DO UPDATE SET body = excluded.body`),
		checkpoint: prep(s.ck, `PRAGMA wal_checkpoint(PASSIVE)`),
		restartWAL: w(`PRAGMA wal_checkpoint(RESTART)`),
		busyShort:  w(`PRAGMA busy_timeout = 50`),
		busyLong:   w(fmt.Sprintf(`PRAGMA busy_timeout = %d`, busyTimeoutMs)),

		readPage: prep(r, `SELECT first_seq, last_seq, data FROM goai_chunks WHERE log = `+logOf+` AND last_seq > ?2 AND last_seq <= ?4 AND first_seq <= ?3
			UNION ALL SELECT first_seq, last_seq, data FROM goai_chunk_journal WHERE run_id = ?1 AND last_seq > ?2 AND first_seq <= ?3
			ORDER BY last_seq`),
		readState:       prep(r, `SELECT `+tailSQL+`, closed_at FROM goai_logs WHERE run_id = ?1`),
		readLog:         prep(r, readLogSQL),
		readRun:         prep(r, `SELECT `+runColumns+` FROM goai_runs WHERE run_id = ?`),
		readRequest:     prep(r, `SELECT body FROM goai_run_requests WHERE run_id = ?`),
		readThread:      prep(r, `SELECT messages, run_id, interrupts, updated_at, owner FROM goai_threads WHERE thread_id = ?`),
		readOwner:       prep(r, threadOwnerSQL),
		readCancels:     prep(r, `SELECT run_id FROM goai_runs WHERE run_id IN (SELECT value FROM json_each(?)) AND cancel_requested = 1`),
		listByThread:    prep(r, listSQL+`thread_id = ? ORDER BY started_at, id`),
		listActive:      prep(r, listSQL+`thread_id = ? AND status = 'running' ORDER BY started_at DESC, id DESC LIMIT 1`),
		listReclaimable: prep(r, listSQL+`status = 'running' AND detached_since IS NOT NULL AND detached_since <= ? ORDER BY detached_since, id`),
		listStale:       prep(r, listSQL+`status = 'running' AND `+leaseSeen+` <= ? ORDER BY `+leaseSeen+`, id`),
	}
	if puts, err := prepareRowPuts(s.wc); err != nil {
		errs = append(errs, err)
	} else {
		s.st.puts = puts
	}
	if len(errs) > 0 {
		s.st.close()
		return fmt.Errorf("durable/sqlite: prepare: %w", errors.Join(errs...))
	}
	return nil
}

// writes reports whether s is one of the writer's statements.
func (st *stmts) writes(s *sql.Stmt) bool { return st.writer[s] }

func (st *stmts) close() {
	for _, s := range []*sql.Stmt{
		st.begin, st.commit, st.rollback,
		st.producerGet, st.appendState, st.tailGet, st.logCreate, st.chunkPut, st.producerPut,
		st.journalAll, st.journalClear, st.logClose,
		st.runGet, st.runUpdate, st.runInsert, st.runClaim, st.runClaimIf, st.leaseBeat, st.leaseBeatAll, st.leaseLost,
		st.threadPut, st.requestPut, st.checkpoint, st.restartWAL, st.busyShort, st.busyLong,
		st.threadClaim, st.ownerGet,
		st.readPage, st.readState, st.readLog, st.readRun,
		st.readRequest, st.readThread, st.readOwner, st.readCancels,
		st.listByThread, st.listActive, st.listReclaimable, st.listStale,
	} {
		if s != nil {
			s.Close()
		}
	}
	if st.puts != nil {
		st.puts.close()
	}
	for _, s := range st.patches {
		s.Close()
	}
}
