package sqlite

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The journal. Small appends do not insert into goai_chunks, whose index
// goai_chunks_log is ordered by log: with a hundred runs appending a token
// each, every commit would write an index page per run (a WAL frame of 4
// KiB each), a page per event. They go to goai_chunk_journal instead, a
// table in arrival order without an index, whose last page takes the
// events of every run, a chunk (chunk.go) per append. A batch of putMany
// or more goes to goai_chunks directly. When the journal holds
// Options.JournalRows rows, the writer moves them into goai_chunks in one
// transaction, a chunk per run, so each run's index page is written once
// per compaction rather than once per commit, and the chunks themselves
// fill the table's last pages. (When goai_chunks was clustered by run, a
// compaction rewrote a page of data per run: about 400 pages of WAL per
// compaction of a hundred paced runs, against about 180 now.)
//
// Readers read both tables in one statement (one snapshot), so a
// compaction is never seen half done. The journal has no index (an index
// on run would be clustered by run again), so the writer keeps the tails
// of the logs it appends to in memory (journalTails), and a reader that
// scans the journal scans at most about Options.JournalRows rows; most
// reads are served from the in-process cache of recent entries.

// defaultJournalRows is the journal size, in rows, at which the writer
// compacts it, unless Options.JournalRows says otherwise: large enough that
// a compaction writes a run's page for several of its events, small enough
// that one takes a few milliseconds and a reader's scan of the journal
// stays cheap.
const defaultJournalRows = 1024

// tailSQL is the tail (highest seq) of the log of run ?1, over both tables.
const tailSQL = `max(
	(SELECT coalesce(max(last_seq), 0) FROM goai_chunks WHERE log = ` + logOf + `),
	(SELECT coalesce(max(last_seq), 0) FROM goai_chunk_journal WHERE run_id = ?1))`

// journalTails is the writer's knowledge of log tails, touched only by
// the writer goroutine. tails holds committed tails; pending the tails set
// by the transaction in progress, merged into tails once it commits and
// dropped if it rolls back.
//
// It also remembers, per run, that its log is open and its run's driver
// epoch (open; pendingOpen for the transaction in progress), which every
// append checks: reading them was a query of two tables per append, more
// than the insert. Every other write names the run whose state it may
// change (scope), and the writer forgets that run's before running it.
type journalTails struct {
	version      uint32 // the pager's data version when tails were last known good
	versionKnown bool   // version was read after the writer's last transaction
	tails        map[string]int64
	pending      map[string]int64
	rows         int // rows in goai_chunk_journal, as far as the writer knows
	pendingRows  int

	open        map[string]int64 // run -> driver epoch (0: none), for open logs
	pendingOpen map[string]int64

	// started is the driver epoch of the runs StartRun inserted whose log
	// is not known yet (pendingStarted: the transaction in progress's). A
	// first append creates the log if absent instead of reading the log's
	// state and the run's epoch, a query of two tables for every run.
	started        map[string]int64
	pendingStarted map[string]int64

	// copies is the journal's rows as this writer inserted them, so that
	// a compaction moves them without reading them back (a query that
	// was about 40 % of a compaction's time, spent while every append
	// waits). copiesWhole says they are every row of the journal: false
	// after any other write to it (a prune, an upsert, another process),
	// and until a compaction has read the table once. pendingCopies are
	// the transaction in progress's.
	copies        []journalRow
	pendingCopies []journalRow
	copiesWhole   bool
	grouped       []journalRow // the copies grouped by run, for a compaction
}

// maxTails bounds the logs whose tail is remembered (a log's tail is
// forgotten when it is closed; this catches logs never closed).
const maxTails = 1 << 16

func (j *journalTails) tail(runID string) (int64, bool) {
	if t, ok := j.pending[runID]; ok {
		return t, true
	}
	t, ok := j.tails[runID]
	return t, ok
}

// inserted records a row the transaction in progress put in the journal.
func (j *journalTails) inserted(r journalRow) {
	j.pendingCopies = append(j.pendingCopies, r)
}

// journalChanged records that the journal changed other than by this
// writer's inserts: the next compaction reads it.
func (j *journalTails) journalChanged() {
	j.copiesWhole = false
	j.copies = nil
}

func (j *journalTails) set(runID string, tail int64, rows int) {
	if j.pending == nil {
		j.pending = make(map[string]int64)
	}
	j.pending[runID] = tail
	j.pendingRows += rows
}

// forget drops what is known of runID's tail (always safe: the next append
// reads it from the database).
func (j *journalTails) forget(runID string) {
	delete(j.pending, runID)
	delete(j.tails, runID)
}

// openEpoch returns the driver epoch of runID when its log is known to
// be open.
func (j *journalTails) openEpoch(runID string) (int64, bool) {
	if e, ok := j.pendingOpen[runID]; ok {
		return e, true
	}
	e, ok := j.open[runID]
	return e, ok
}

// setOpen records, in the transaction in progress, that runID's log is
// open and its run's driver epoch is epoch.
func (j *journalTails) setOpen(runID string, epoch int64) {
	if j.pendingOpen == nil {
		j.pendingOpen = make(map[string]int64)
	}
	j.pendingOpen[runID] = epoch
	// The open log's entry says it all now. (A rollback then forgets
	// both: the next append asks the database, as for any run.)
	delete(j.pendingStarted, runID)
	delete(j.started, runID)
}

// setStarted records, in the transaction in progress, that this writer
// inserted runID's run at driver epoch epoch.
func (j *journalTails) setStarted(runID string, epoch int64) {
	if j.pendingStarted == nil {
		j.pendingStarted = make(map[string]int64)
	}
	j.pendingStarted[runID] = epoch
}

// startedEpoch returns the driver epoch of a run setStarted recorded.
func (j *journalTails) startedEpoch(runID string) (int64, bool) {
	if e, ok := j.pendingStarted[runID]; ok {
		return e, true
	}
	e, ok := j.started[runID]
	return e, ok
}

// forgetState drops what is known of runID's log state and epoch.
func (j *journalTails) forgetState(runID string) {
	delete(j.pendingOpen, runID)
	delete(j.open, runID)
	delete(j.pendingStarted, runID)
	delete(j.started, runID)
}

// forgetAllStates drops what is known of every log's state and epoch.
func (j *journalTails) forgetAllStates() {
	clear(j.pendingOpen)
	clear(j.open)
	clear(j.pendingStarted)
	clear(j.started)
}

func (j *journalTails) committed() {
	j.tails = merge(j.tails, j.pending)
	j.open = merge(j.open, j.pendingOpen)
	j.started = merge(j.started, j.pendingStarted)
	j.rows += j.pendingRows
	j.pendingRows = 0
	if j.copiesWhole {
		j.copies = append(j.copies, j.pendingCopies...)
	}
	clear(j.pendingCopies) // drop the references to their data
	j.pendingCopies = j.pendingCopies[:0]
}

// merge moves pending into known, starting known afresh past maxTails.
func merge(known, pending map[string]int64) map[string]int64 {
	if known == nil || len(known)+len(pending) > maxTails {
		known = make(map[string]int64, len(pending))
	}
	for k, v := range pending {
		known[k] = v
	}
	clear(pending)
	return known
}

func (j *journalTails) rolledBack() {
	clear(j.pending)
	clear(j.pendingOpen)
	clear(j.pendingStarted)
	j.pendingRows = 0
	clear(j.pendingCopies)
	j.pendingCopies = j.pendingCopies[:0]
}

// checkForeignWrites forgets every remembered tail if another connection
// (another process writing the same file) committed since the writer's
// last transaction. Called at the start of each of its transactions, which
// hold the write lock: nothing else commits until they end.
//
// It asks the pager for its data version (SQLITE_FCNTL_DATA_VERSION), a
// function call of 0.1 us, rather than running PRAGMA data_version, a
// statement of 2.3 us and 17 allocations (BenchmarkDataVersion), and about
// 17 us a commit in a profile at 50 ms pacing, where commits are far
// apart. The pager's version also moves with the writer's own commits, so
// the writer reads it again when each of its transactions ends
// (transactionEnded) and compares with that: any other difference is
// someone else's commit.
func (s *Store) checkForeignWrites() error {
	v, err := s.fileVersion()
	if err != nil {
		return fmt.Errorf("durable/sqlite: data version: %w", err)
	}
	if !s.jt.versionKnown || v != s.jt.version {
		clear(s.jt.tails)
		clear(s.jt.open)
		clear(s.jt.started)
		s.jt.journalChanged()
		s.jt.version, s.jt.versionKnown = v, true
	}
	return nil
}

// transactionEnded records the pager's data version once a transaction of
// the writer's has ended, committed or rolled back: the version its next
// transaction expects unless another connection commits meanwhile.
func (s *Store) transactionEnded() {
	v, err := s.fileVersion()
	s.jt.version, s.jt.versionKnown = v, err == nil
	if s.owners != nil {
		s.owners.ended()
	}
}

// appendTail returns the tail of runID's log for an append in tx.
func (s *Store) appendTail(tx *writeTx, runID string) (int64, error) {
	if t, ok := s.jt.tail(runID); ok {
		return t, nil
	}
	var t int64
	if err := tx.Stmt(s.st.tailGet).QueryRow(runID).Scan(&t); err != nil {
		return 0, err
	}
	return t, nil
}

// compactJournal moves every journal row into goai_chunks, in a
// transaction of its own. A run's consecutive journal rows (a paced
// producer's tokens, an append each) become one chunk of up to maxChunk
// entries: a row inserted into goai_chunks costs about as much as its
// statement, and a read decodes a row per chunk.
//
// The rows come from the writer's copies when it has every row, else
// from the table. Emptying the journal must then delete exactly the rows
// copied: if it deletes any other, the transaction is rolled back and the
// compaction reads the table instead, so that no row can be dropped
// without having been moved.
func (s *Store) compactJournal() error {
	if s.jt.copiesWhole {
		err := s.compactJournalFrom(true)
		if !errors.Is(err, errCopiesStale) {
			return err
		}
		s.opts.Logger.Warn("durable/sqlite: the journal held rows the writer did not know of; compacting from the table")
	}
	return s.compactJournalFrom(false)
}

// errCopiesStale is compactJournalFrom's when the journal held rows other
// than the writer's copies.
var errCopiesStale = errors.New("durable/sqlite: journal copies stale")

func (s *Store) compactJournalFrom(copies bool) error {
	// begin asks whether another process wrote since the writer's last
	// transaction (the journal, perhaps), before the copies are trusted.
	tx, err := s.begin()
	if err != nil {
		return fmt.Errorf("durable/sqlite: compact journal: %w", err)
	}
	defer tx.Rollback()
	var js []journalRow
	if copies && s.jt.copiesWhole {
		s.jt.grouped = groupByRun(s.jt.copies, s.jt.grouped)
		js = s.jt.grouped
		defer clear(s.jt.grouped) // drop the references to the rows' data
	} else {
		copies = false
		if js, err = s.readJournal(tx); err != nil {
			return fmt.Errorf("durable/sqlite: compact journal: %w", err)
		}
	}
	put := tx.Stmt(s.st.chunkPut)
	if err := mergeJournal(js, func(c journalRow) error {
		_, err := put.Exec(c.run, c.first, c.last, c.data)
		return err
	}); err != nil {
		return fmt.Errorf("durable/sqlite: compact journal: %w", err)
	}
	res, err := tx.Stmt(s.st.journalClear).Exec()
	if err != nil {
		return fmt.Errorf("durable/sqlite: compact journal: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(js)) {
		s.jt.journalChanged()
		if copies {
			return errCopiesStale
		}
		// Read and deleted in one transaction holding the write lock:
		// this cannot happen.
		return fmt.Errorf("durable/sqlite: compact journal: read %d rows, deleted %d (%v)", len(js), n, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("durable/sqlite: compact journal: %w", err)
	}
	s.jt.rows = 0
	clear(s.jt.copies)
	s.jt.copies = s.jt.copies[:0]
	s.jt.copiesWhole = true
	return nil
}

// groupByRun returns rows ordered by run, each run's rows in the order they
// have in rows, in out's array: what a stable sort by run gives, but sorting
// the runs rather than the rows. A journal holds about a thousand rows of a
// hundred runs or so, and a sort of the rows (by run id, then seq) was a
// fifth of a compaction. The writer inserts each run's rows in seq order,
// which mergeJournal needs only to merge them into fewer chunks.
func groupByRun(rows, out []journalRow) []journalRow {
	index := make(map[string]int, 128) // run -> its place in runs
	type group struct {
		run  string
		rows int
		next int // where the run's next row goes in out
	}
	var runs []group
	for _, r := range rows {
		i, ok := index[r.run]
		if !ok {
			i = len(runs)
			index[r.run] = i
			runs = append(runs, group{run: r.run})
		}
		runs[i].rows++
	}
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(runs[a].run, runs[b].run) })
	at := 0
	for _, i := range order {
		runs[i].next = at
		at += runs[i].rows
	}
	out = slices.Grow(out[:0], len(rows))[:len(rows)]
	for _, r := range rows {
		g := &runs[index[r.run]]
		out[g.next] = r
		g.next++
	}
	return out
}

// readJournal returns every row of the journal, sorted by run and seq.
func (s *Store) readJournal(tx *writeTx) ([]journalRow, error) {
	// Read whole before writing: the journal holds about
	// Options.JournalRows small rows.
	rows, err := tx.Stmt(s.st.journalAll).Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var js []journalRow
	for rows.Next() {
		var r journalRow
		if err := rows.Scan(&r.run, &r.first, &r.last, &r.data); err != nil {
			return nil, err
		}
		js = append(js, r)
	}
	return js, rows.Err()
}

// journalRow is one row of goai_chunk_journal.
type journalRow struct {
	run         string
	first, last int64
	data        []byte
}

// mergeJournal calls put with the chunks that rows (sorted by run, then
// seq) make when each run's consecutive rows are merged, up to maxChunk
// entries a chunk. Rows that do not follow on (seqs stored in goai_chunks
// between them) start a new chunk. A row whose data does not decode is
// put as it is, alone: a reader reports it when it reaches it, as it would
// have in the journal, and the rest of the journal still moves (a
// compaction that failed on it would be retried, and fail, at every commit).
func mergeJournal(rows []journalRow, put func(journalRow) error) error {
	var (
		run     string
		first   int64
		entries [][]byte
	)
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		err := put(journalRow{run: run, first: first, last: first + int64(len(entries)) - 1, data: encodeChunk(entries)})
		entries = entries[:0]
		return err
	}
	for _, r := range rows {
		n := r.last - r.first + 1
		follows := len(entries) > 0 && r.run == run && r.first == first+int64(len(entries))
		if !follows || int64(len(entries))+n > maxChunk {
			if err := flush(); err != nil {
				return err
			}
			run, first = r.run, r.first
		}
		had := len(entries)
		if err := decodeChunk(r.first, r.last, r.data, r.first-1, r.last, func(_ int64, b []byte) bool {
			entries = append(entries, b)
			return true
		}); err != nil {
			entries = entries[:had]
			if err := flush(); err != nil {
				return err
			}
			if err := put(r); err != nil {
				return err
			}
		}
	}
	return flush()
}

// compactRun moves runID's journal rows into goai_chunks within tx (for
// writes that edit entries in place).
func compactRun(tx *writeTx, runID string) error {
	if _, err := tx.Exec(`INSERT INTO goai_chunks (log, last_seq, first_seq, data)
		SELECT `+logOf+`, last_seq, first_seq, data FROM goai_chunk_journal WHERE run_id = ?1 ORDER BY last_seq`, runID); err != nil {
		return err
	}
	_, err := tx.Exec(`DELETE FROM goai_chunk_journal WHERE run_id = ?`, runID)
	return err
}
