// Package sqlite is the embedded durable backend: delivery logs, run records,
// fencing claims and threads in one SQLite file (modernc.org/sqlite, pure Go).
//
// The database runs in WAL mode with synchronous=NORMAL; the WAL is
// checkpointed by a goroutine of its own rather than inside a commit. All writes go
// through one writer goroutine that commits whatever is queued in a single
// transaction (group commit); a request that fails sends every request of
// its group through a transaction of its own, so concurrent appends share a
// commit without sharing failures. Readers tail
// through a separate read-only connection pool and are woken in-process
// after each commit: no polling, unless Options.PollInterval is set for the
// case of another process writing the same file.
//
// Everything survives a restart: opening the file again serves every log
// and record (open logs stay open, so a successor can continue them).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/internal/notify"
	"github.com/goai-sdk/goai/durable/internal/tail"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

const scheme = "sqlite"

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// FirstChunkDeadline bounds a sentinel read's wait for the first entry
	// of a run with no data. Zero means durable.DefaultFirstChunkDeadline;
	// negative means wait until the read's context is done.
	FirstChunkDeadline time.Duration
	// MaxGroup caps how many queued write requests share one transaction.
	// Zero means 256.
	MaxGroup int
	// CommitGap, if positive, is the least time between the starts of two
	// commits while several writers share them: the writer sleeps out the
	// rest of the gap after a commit and then commits, in one transaction,
	// everything queued meanwhile (up to MaxGroup; after a full commit it
	// does not wait). A write that finds the writer idle waits CommitGap
	// too, for the writes that come with it. Zero means none: every write
	// is committed as soon as the writer is free. A gap trades latency for
	// CPU: with 100 producers each appending a token every 10 ms, 2 ms took
	// a commit from 8 to 28 writes, saved about a tenth of the server's CPU
	// per event and added 1 to 2 ms to the median token latency
	// (bench/README.md); goai serve uses 2 ms. CommitStats counts the
	// writes a commit shares.
	CommitGap time.Duration
	// CommitGapMax, if above CommitGap, lets the gap grow while commits
	// carry few writes: while recent commits carry fewer than 16 on
	// average, each gap is a quarter longer than the last, up to
	// CommitGapMax; while they carry more, a fifth shorter, down to
	// CommitGap. Streams paced slowly (a token every 50 ms) then share
	// commits as streams paced at 10 ms do with CommitGap alone. Zero
	// means a gap of CommitGap always; goai serve uses 5 ms.
	CommitGapMax time.Duration
	// JournalRows is the journal size, in rows, at which the writer moves
	// it into the entries table (journal.go). Zero means 1024.
	JournalRows int
	// WALLimit is the size in bytes past which the WAL is started over
	// even while the writer is busy: the writer pauses between two
	// transactions to copy what the checkpointer could not (a checkpoint
	// beside a busy writer never copies every frame, and SQLite starts the
	// WAL over only after one that did). It also bounds the WAL file left
	// after a burst. Zero means 1 GiB; negative means no limit: the WAL
	// starts over only when a checkpoint finds the writer idle, and under
	// steady load grows without bound.
	WALLimit int64
	// ReadPage is how many entries a reader fetches per query. Zero means
	// 512.
	ReadPage int
	// OneProcess promises that no other process (or other Store) writes
	// the file while this store has it open, and keeps that promise: Open
	// takes an exclusive lock on the file (flock, on Unix systems) and
	// fails with ErrInUse if another holds it. A reader starting at the
	// tail of a log this store appended lately (a client's reconnect, a
	// stream a server took over from net/http) then waits for the next
	// append without a query: every append passes through this store's
	// cache. goai serve sets it.
	OneProcess bool
	// PollInterval, if positive, makes parked readers re-check the database
	// at this interval, for logs written by another process. Zero means
	// in-process wake-ups only.
	PollInterval time.Duration
	// Logger receives background errors; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock for close times; nil means time.Now.
	Now func() time.Time
}

// Store is a durable.Store in one SQLite database file.
type Store struct {
	opts Options
	path string
	file os.FileInfo // the database file as opened; nil for an in-memory database
	sick atomic.Pointer[error]
	w    *sql.DB   // the writer's single connection, held by wc once open
	wc   *sql.Conn // the writer's connection, which its transactions run on
	r    *sql.DB   // readers
	ck   *sql.DB   // the checkpointer's connection

	lock         *os.File      // Options.OneProcess: the file's lock, held until Shutdown
	owners       *ownerCache   // Options.OneProcess: thread owners from memory (owners.go)
	ownersLoaded chan struct{} // closed when owners' load has ended
	cancels      cancelMemo    // Options.OneProcess: cancel polls without most of their query
	// ownerQueries counts ThreadOwner's queries (for the owners' cache's tests).
	ownerQueries atomic.Int64
	// cancelQueries counts CancelRequested's queries (for tests).
	cancelQueries atomic.Int64
	// stateQueries counts the appends' queries of a log's state (for tests).
	stateQueries atomic.Int64
	ckDone       chan struct{}
	catchUp      chan struct{} // the checkpointer asks the writer to finish its checkpoint
	walFrames    int64         // Options.WALLimit in frames; 0: no limit

	ops     chan *op
	urgent  chan *op // lease renewals: taken before ops and the backlog
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
	hub     notify.Hub
	recent  tail.Recent
	tail    tail.Reader
	st      stmts
	jt      journalTails // the writer goroutine's
	// chunkBuf and chunkArgs are the writer goroutine's buffers for the
	// chunks a transaction queues (writeTx.queueChunk).
	chunkBuf  []byte
	chunkArgs []any
	// carried counts the entries the writer's transaction in progress
	// appended (the commit gap's measure of batching producers).
	carried int
	// journalArgs is the writer goroutine's buffer for the journal rows a
	// transaction queues (writeTx.queueJournal).
	journalArgs []any
	// The writer goroutine's own queue, ahead of ops: queued appends run
	// again (AppendQueued), behind the writes drained from ops before them.
	backlog     []*op
	backlogHead int
	// appendOps are the ops of queued appends that ended, for the next
	// AppendQueued: a paced producer queues one per token.
	appendOps sync.Pool

	commits, writes atomic.Int64 // CommitStats

	mu     sync.RWMutex // guards closed against sends on ops
	closed bool
}

var _ interface {
	durable.Store
	durable.BatchReader
	durable.Upserter
	durable.Pruner
	durable.Leaser
	durable.ThreadStore
	durable.QueuedAppender
	durable.CommitCounter
} = (*Store)(nil)

// op is one write request run by the writer goroutine in a group
// transaction: fn, or, when fn is nil, the append of app.
type op struct {
	fn        func(tx *writeTx) error
	committed func() // if set, run after the commit, before the wake-up
	wake      string // run whose readers to wake after the commit
	changes   scope  // forgotten from the writer's memory before fn runs
	// logFree: fn reads and writes no log's rows (goai_logs,
	// goai_chunk_journal, goai_chunks), so the rows the transaction's
	// appends queued before it need not be inserted first: they go in
	// with the rest, in fewer statements (a run's start, saves and
	// record updates are a third of an unpaced transaction's writes).
	logFree bool
	app     appendJob
	// The outcome goes to done, or, for an append queued by AppendQueued
	// (which has no done), to app.then.
	done chan error
}

// appendJob is an append run as an op of its own kind rather than as a
// closure: appends are most of the writes, one per token when a model is
// paced, and a closure and its captured results were several allocations
// each.
type appendJob struct {
	runID string
	batch [][]byte
	opts  durable.AppendOptions
	take  func() [][]byte  // AppendQueued's: the batch, taken when the op runs
	then  func(error) bool // AppendQueued's done

	first, n int64  // the stored seqs, set by the op
	stored   bool   // false: a repeat of an idempotent append
	entry    []byte // the writer's copy of a batch of one (appendTx)
}

// scope is what an op may change of the state appends check, which the
// writer remembers per run (journal.go): whether a run's log is open and
// its run's driver epoch.
type scope struct {
	run string // the one run whose log or record the op may change
	all bool   // the op may change any run's
}

var (
	// noRun: the op changes no log's state and no run record (appends,
	// which keep the writer's memory themselves; threads).
	noRun = scope{}
	// anyRun: the op may change any run's log or record.
	anyRun = scope{all: true}
)

// oneRun: the op may change runID's log or record, and no other run's.
func oneRun(runID string) scope { return scope{run: runID} }

// schema: a log's entries are in chunks (chunk.go) in goai_chunks and,
// appended since the last compaction, in goai_chunk_journal (journal.go).
// goai_chunks is in arrival order, found by log through goai_chunks_log
// (log, last_seq), which migrate creates: a compaction then appends its
// chunks to the table's last pages and writes a small index entry per run,
// where a table clustered by run had a page of its own rewritten per run.
// A chunk names its log by number (goai_logs.id, given in creation order),
// not by run id: the logs being written are then neighbours in the index,
// whose entries for a hundred busy runs share a few pages, where run ids
// (random, as clients make them) put each run's entries on a page of its
// own, written again by every commit that carries the run's chunks.
// Its tail is the highest seq stored, not a counter, so that an append
// writes one page of the journal and nothing else; goai_logs.last_seq
// records the tail when the log is closed. (A database written before
// chunks held an entry per row in goai_entries and goai_journal: migrate
// moves them.)
const schema = `
CREATE TABLE IF NOT EXISTS goai_logs (
	run_id     TEXT PRIMARY KEY,
	last_seq   INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	closed_at  INTEGER,
	id         INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS goai_logs_closed ON goai_logs (closed_at) WHERE closed_at IS NOT NULL;
` + chunksTable + `;
CREATE TABLE IF NOT EXISTS goai_chunk_journal (
	id        INTEGER PRIMARY KEY,
	run_id    TEXT NOT NULL,
	last_seq  INTEGER NOT NULL,
	first_seq INTEGER NOT NULL,
	data      BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS goai_producers (
	run_id       TEXT NOT NULL,
	producer_id  TEXT NOT NULL,
	producer_seq INTEGER NOT NULL,
	first_seq    INTEGER NOT NULL,
	n            INTEGER NOT NULL,
	PRIMARY KEY (run_id, producer_id, producer_seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS goai_runs (
	id               INTEGER PRIMARY KEY,
	run_id           TEXT NOT NULL UNIQUE,
	thread_id        TEXT NOT NULL,
	status           TEXT NOT NULL,
	started_at       INTEGER NOT NULL,
	finished_at      INTEGER,
	error_message    TEXT,
	error_code       TEXT,
	usage            TEXT,
	sandbox_key      TEXT,
	detached_since   INTEGER,
	cancel_requested INTEGER,
	driver_epoch     INTEGER
);
CREATE INDEX IF NOT EXISTS goai_runs_thread ON goai_runs (thread_id, status, started_at);
CREATE INDEX IF NOT EXISTS goai_runs_detached ON goai_runs (status, detached_since) WHERE detached_since IS NOT NULL;
CREATE TABLE IF NOT EXISTS goai_leases (
	run_id       TEXT PRIMARY KEY,
	heartbeat_at INTEGER NOT NULL
) WITHOUT ROWID;
` + threadsTable + `;
`

// threadsTable creates goai_threads, in its current layout: rows in the
// order threads were first saved, found by thread through goai_threads_id
// (which migrate creates). Saving a thread writes its row at the table's
// end, which the threads saved in the same commit share, and an index
// entry of a few bytes. Keyed by thread (WITHOUT ROWID, as before), a
// transcript of more than about 1 KB went to an overflow page of its own
// and split the page of its key, which client-made ids put anywhere: six
// WAL frames per save against three (a fifth of an unpaced durable
// server's WAL). The owner comes before the transcript, so ThreadOwner
// reads it from the row's first bytes, never the transcript's overflow.
const threadsTable = `CREATE TABLE IF NOT EXISTS goai_threads (
	id         INTEGER PRIMARY KEY,
	thread_id  TEXT NOT NULL,
	owner      TEXT NOT NULL DEFAULT '',
	run_id     TEXT NOT NULL,
	updated_at INTEGER NOT NULL,
	interrupts TEXT,
	messages   TEXT NOT NULL
)`

// chunksTable creates goai_chunks, in its current layout.
const chunksTable = `CREATE TABLE IF NOT EXISTS goai_chunks (
	id        INTEGER PRIMARY KEY,
	log       INTEGER NOT NULL,
	last_seq  INTEGER NOT NULL,
	first_seq INTEGER NOT NULL,
	data      BLOB NOT NULL
)`

// Open opens (creating if needed) the database at path and starts its
// writer. opts may be nil. Call Shutdown to release it.
func Open(path string, opts *Options) (*Store, error) {
	s := &Store{
		ops:     make(chan *op, 1024),
		urgent:  make(chan *op, 16),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		ckDone:  make(chan struct{}),
		catchUp: make(chan struct{}, 1),
	}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.FirstChunkDeadline == 0 {
		s.opts.FirstChunkDeadline = durable.DefaultFirstChunkDeadline
	}
	if s.opts.MaxGroup <= 0 {
		s.opts.MaxGroup = 256
	}
	s.opts.CommitGap = max(s.opts.CommitGap, 0)
	s.opts.CommitGapMax = max(s.opts.CommitGapMax, s.opts.CommitGap)
	if s.opts.JournalRows <= 0 {
		s.opts.JournalRows = defaultJournalRows
	}
	if s.opts.WALLimit == 0 {
		s.opts.WALLimit = 1 << 30
	}
	if s.opts.ReadPage <= 0 {
		s.opts.ReadPage = 512
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.Default()
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	dsn := func(extra string) string {
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMs))
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		if extra != "" {
			q.Add("_pragma", extra)
		}
		return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	}
	var err error
	if s.opts.OneProcess && isFile(path) {
		if s.lock, err = lockOneProcess(path); err != nil {
			return nil, err
		}
	}
	opened := false
	defer func() {
		if !opened && s.lock != nil {
			s.lock.Close()
		}
	}()
	// journal_size_limit: when the WAL starts over, a file grown past
	// Options.WALLimit is cut back to it, so that a burst leaves none
	// larger.
	if s.w, err = sql.Open("sqlite", dsn("wal_autocheckpoint(0)")+fmt.Sprintf("&_pragma=journal_size_limit(%d)", max(s.opts.WALLimit, -1))+"&_pragma=temp_store(MEMORY)&_txlock=immediate"); err != nil {
		return nil, fmt.Errorf("durable/sqlite: open %s: %w", path, err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	marked, err := checkFormat(s.w, path)
	if err != nil {
		s.w.Close()
		return nil, err
	}
	if _, err := s.w.Exec(schema); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("durable/sqlite: create schema in %s: %w", path, err)
	}
	if err := migrate(s.w); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("durable/sqlite: migrate %s: %w", path, err)
	}
	if marked < format {
		if _, err := s.w.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, format)); err != nil {
			s.w.Close()
			return nil, fmt.Errorf("durable/sqlite: mark the format of %s: %w", path, err)
		}
	}
	if s.opts.WALLimit > 0 {
		var pageSize int64
		if err := s.w.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
			s.w.Close()
			return nil, fmt.Errorf("durable/sqlite: page size of %s: %w", path, err)
		}
		s.walFrames = max(s.opts.WALLimit/(pageSize+walFrameHeader), 1)
	}
	if err := s.watchFile(path); err != nil {
		s.w.Close()
		return nil, err
	}
	if s.r, err = sql.Open("sqlite", dsn("query_only(1)")); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("durable/sqlite: open %s: %w", path, err)
	}
	s.r.SetMaxOpenConns(8)
	s.r.SetMaxIdleConns(8)
	if s.ck, err = sql.Open("sqlite", dsn("")); err != nil {
		s.w.Close()
		s.r.Close()
		return nil, fmt.Errorf("durable/sqlite: open %s: %w", path, err)
	}
	s.ck.SetMaxOpenConns(1)
	if s.wc, err = s.w.Conn(context.Background()); err != nil {
		return nil, errors.Join(fmt.Errorf("durable/sqlite: open %s: %w", path, err), s.w.Close(), s.r.Close(), s.ck.Close())
	}
	if err := s.prepare(); err != nil {
		return nil, errors.Join(err, s.wc.Close(), s.w.Close(), s.r.Close(), s.ck.Close())
	}
	s.recent.Wakes = &s.hub
	s.tail = tail.Reader{
		CachedTails: s.lock != nil, Scheme: scheme, Page: s.opts.ReadPage, Poll: s.opts.PollInterval,
		FirstChunkDeadline: s.opts.FirstChunkDeadline,
		Hub:                &s.hub, Closed: s.isClosed, Query: s.query, Recent: &s.recent,
	}
	// What a process that stopped without Shutdown left in the journal.
	if err := s.compactJournal(); err != nil {
		s.st.close()
		err = errors.Join(err, s.wc.Close(), s.w.Close(), s.r.Close(), s.ck.Close())
		return nil, err
	}
	s.ownersLoaded = make(chan struct{})
	if s.lock != nil {
		s.owners = newOwnerCache()
		go func() {
			defer close(s.ownersLoaded)
			if err := s.owners.load(s.r, s.stop); err != nil && !s.isClosed() {
				s.opts.Logger.Warn("durable/sqlite: thread owners are queried: loading the threads failed", "error", err)
			}
		}()
	} else {
		close(s.ownersLoaded)
	}
	go s.writer()
	go s.checkpointer()
	opened = true
	return s, nil
}

// ErrInUse is Open's error when Options.OneProcess finds the file locked
// by another process or store.
var ErrInUse = errors.New("database in use")

// ErrNewerFormat is Open's error for a database that a newer version wrote
// in a format this one does not read.
var ErrNewerFormat = errors.New("database written in a newer format")

// format is the database format this version writes, kept in SQLite's
// user_version: 1 has chunks of several entries in the shared form
// (chunk.go). Versions before it left 0 and read no format mark; from 1
// on, a version refuses a database whose mark is above its own instead of
// misreading it. Raise it with every change an older version would
// misread.
const format = 1

// checkFormat returns db's format mark, or ErrNewerFormat if it is newer
// than this version's.
func checkFormat(db *sql.DB, path string) (int, error) {
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("durable/sqlite: format of %s: %w", path, err)
	}
	if v > format {
		return v, fmt.Errorf("durable/sqlite: %s is in format %d, and this version reads up to %d: %w", path, v, format, ErrNewerFormat)
	}
	return v, nil
}

// checkpointInterval is how often the checkpointer copies the WAL back
// into the database.
const checkpointInterval = 250 * time.Millisecond

// checkpointer runs the WAL checkpoints on a connection of its own, so that
// no commit of the writer pays for one (SQLite's automatic checkpoint runs
// inside the commit that crosses its threshold, stalling every append
// queued behind it). A passive checkpoint never waits for readers or the
// writer.
//
// But SQLite starts the WAL over only after a checkpoint that copied every
// frame, and one that runs beside a busy writer never does: frames are
// committed while it copies. Under steady load the WAL then grew without
// bound (about 25 MB a second at 100 streams paced at 10 ms), and the
// wal-index with it. So once the WAL has reached Options.WALLimit, the
// writer, between two transactions, copies what is left (what was
// committed during the checkpointer's copy) and starts the WAL over
// (catchUpWAL). That syncs the WAL and the database file: a pause of the
// writer's of 10 to 60 ms here. Every token committed during it, and the
// burst behind it, waits: at 256 MiB (a pause about every ten seconds at
// that load) about one token in a hundred did, and the token p99 rose
// (bench/README.md). 1 GiB makes it a pause about every minute (the WAL
// grows about 17 MB a second at that load).
func (s *Store) checkpointer() {
	defer close(s.ckDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	next := s.walFrames // the WAL's size in frames at which the writer finishes the checkpoint
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			var busy, frames, copied int64
			if err := s.st.checkpoint.QueryRow().Scan(&busy, &frames, &copied); err != nil {
				s.opts.Logger.Warn("durable/sqlite: checkpoint failed", "error", err)
				continue
			}
			switch {
			case s.walFrames <= 0:
			case frames < s.walFrames:
				next = s.walFrames
			case frames >= next:
				signal(s.catchUp)
				// If a reader's snapshot kept the WAL from starting
				// over, the next pause waits for as much growth again.
				next = frames + s.walFrames
			}
		}
	}
}

// Shutdown stops the writer after the queued writes, ends every Read with
// durable.ErrStoreClosed and closes the database. Later calls return nil.
func (s *Store) Shutdown() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		<-s.stopped
		<-s.ckDone
		<-s.ownersLoaded
		s.hub.Close()
		s.st.close()
		err = errors.Join(s.wc.Close(), s.w.Close(), s.r.Close(), s.ck.Close())
		if s.lock != nil {
			err = errors.Join(err, s.lock.Close())
		}
	})
	return err
}

// isFile reports whether path names a database file (not an in-memory
// database).
func isFile(path string) bool {
	return path != "" && !strings.Contains(path, ":memory:") && !strings.Contains(path, "mode=memory")
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// exec runs fn in the writer's next group transaction and waits for the
// commit. Once queued, a write is not abandoned because ctx ends: the caller
// learns its outcome.
// changes says what the write may change of the state appends check.
func (s *Store) exec(ctx context.Context, changes scope, fn func(tx *writeTx) error) error {
	return s.execThen(ctx, changes, "", fn, nil)
}

// execThen is exec with committed run after a successful commit, before
// waking the readers of run wake.
func (s *Store) execThen(ctx context.Context, changes scope, wake string, fn func(tx *writeTx) error, committed func()) error {
	return s.execOp(ctx, &op{fn: fn, committed: committed, wake: wake, changes: changes, done: make(chan error, 1)})
}

// execLogFree is exec for an fn that reads and writes no log's rows
// (op.logFree).
func (s *Store) execLogFree(ctx context.Context, changes scope, fn func(tx *writeTx) error) error {
	return s.execOp(ctx, &op{fn: fn, changes: changes, logFree: true, done: make(chan error, 1)})
}

// busyTimeoutMs is how long a connection waits for a lock held by another
// (the writer's outside catchUpWAL, and the readers').
const busyTimeoutMs = 10000

// walFrameHeader is the size of a WAL frame's header, before its page.
const walFrameHeader = 24

// catchUpWAL finishes on the writer's connection, between transactions,
// the checkpoint that the checkpointer could not, and starts the WAL over
// (checkpointer). It waits for readers still reading frames that are to be
// copied, and then for every reader to be done with the WAL, but only
// briefly: a long read (a large snapshot) would hold up every append. If
// one is still reading, the WAL grows on, and the checkpointer asks again
// once it has grown by Options.WALLimit.
func (s *Store) catchUpWAL() {
	if _, err := s.st.busyShort.Exec(); err != nil {
		s.opts.Logger.Warn("durable/sqlite: shortening the busy timeout failed", "error", err)
		return
	}
	if _, err := s.st.restartWAL.Exec(); err != nil {
		s.opts.Logger.Warn("durable/sqlite: checkpoint failed", "error", err)
	}
	if _, err := s.st.busyLong.Exec(); err != nil { // back to busyTimeoutMs, as in Open
		s.opts.Logger.Warn("durable/sqlite: restoring the busy timeout failed", "error", err)
	}
}

// signal wakes whoever waits on c, unless a wake-up is pending already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// execUrgent is exec for a write that goes ahead of the queued ones: a
// lease renewal. Under a storm of writes (thousands of runs starting at
// once) a renewal queued behind them timed out, and a run whose renewals
// keep timing out is ended as lost by recovery although its producer is
// alive. Renewals are few and short (heartbeatsPerOp), so going first
// holds up nothing for long.
func (s *Store) execUrgent(ctx context.Context, changes scope, fn func(tx *writeTx) error) error {
	return s.queueOp(ctx, s.urgent, &op{fn: fn, changes: changes, done: make(chan error, 1)})
}

// execOp queues o and waits for its outcome.
func (s *Store) execOp(ctx context.Context, o *op) error {
	return s.queueOp(ctx, s.ops, o)
}

// queueOp queues o on q and waits for its outcome.
func (s *Store) queueOp(ctx context.Context, q chan<- *op, o *op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return durable.ErrStoreClosed
	}
	select {
	case q <- o:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	return <-o.done
}

// enqueue queues o, which has no done channel, waiting while the writer's
// queue is full.
func (s *Store) enqueue(o *op) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return durable.ErrStoreClosed
	}
	s.ops <- o
	return nil
}

// complete hands o its outcome. A queued append whose then asks for it
// is queued again, in the writer's backlog; o itself is reused for it,
// since nothing refers to it any more.
func (s *Store) complete(o *op, err error) {
	if o.done != nil {
		o.done <- err
		return
	}
	if !o.app.then(err) || err != nil {
		// Nothing refers to o any more: the writer is done with the ops
		// it completed.
		*o = op{}
		s.appendOps.Put(o)
		return
	}
	o.app = appendJob{runID: o.app.runID, opts: o.app.opts, take: o.app.take, then: o.app.then}
	// Behind every write queued before it: with thousands of producers
	// appending, their next rounds would otherwise fill every group and
	// starve the other writes (a lease renewal timed out behind them).
	s.drain()
	s.backlog = append(s.backlog, o)
}

// drain moves the writes waiting in ops to the backlog.
func (s *Store) drain() {
	for {
		select {
		case o := <-s.ops:
			s.backlog = append(s.backlog, o)
		default:
			return
		}
	}
}

// take adds the writes waiting in q to group, up to Options.MaxGroup.
func (s *Store) take(group []*op, q <-chan *op) []*op {
	for len(group) < s.opts.MaxGroup {
		select {
		case o := <-q:
			group = append(group, o)
		default:
			return group
		}
	}
	return group
}

// backlogged is how many writes the backlog holds.
func (s *Store) backlogged() int { return len(s.backlog) - s.backlogHead }

// takeBacklog adds the backlog's first writes to group, up to
// Options.MaxGroup.
func (s *Store) takeBacklog(group []*op) []*op {
	n := min(s.backlogged(), s.opts.MaxGroup-len(group))
	if n <= 0 {
		return group
	}
	taken := s.backlog[s.backlogHead : s.backlogHead+n]
	group = append(group, taken...)
	clear(taken)
	s.backlogHead += n
	// Move what is left to the front once the taken part is the larger:
	// while producers go round faster than the writer takes them, the
	// backlog never empties, and appending behind a head that never came
	// back to 0 grew its array without bound.
	if s.backlogHead >= len(s.backlog)-s.backlogHead {
		left := copy(s.backlog, s.backlog[s.backlogHead:])
		clear(s.backlog[left:])
		s.backlog, s.backlogHead = s.backlog[:left], 0
	}
	return group
}

func (s *Store) writer() {
	defer close(s.stopped)
	group := make([]*op, 0, s.opts.MaxGroup)
	g := gapper{timer: time.NewTimer(time.Hour), sinceShared: lonely,
		min: s.opts.CommitGap, max: s.opts.CommitGapMax, gap: s.opts.CommitGap, avgWrites: fewWrites * 16}
	g.timer.Stop()
	for {
		group = group[:0]
		select {
		case <-s.catchUp:
			s.catchUpWAL()
		default:
		}
		if s.backlogged() == 0 && len(s.urgent) == 0 {
			select {
			case <-s.catchUp:
				s.catchUpWAL()
				continue
			case o := <-s.urgent:
				group = append(group, o)
			case o := <-s.ops:
				group = append(group, o)
			case <-s.stop:
				s.finishQueued(group)
				return
			}
			g.idleWrite = time.Now()
		}
		group = s.take(group, s.urgent)
		group = s.takeBacklog(group)
		s.waitGap(&g)
		if len(s.ops) == 0 {
			// Let the goroutines that are ready run first: a paced
			// model's tokens come in bursts (every producer's timer
			// fires together), and the appends they are about to make
			// then share this commit. With nothing else ready, this
			// returns at once.
			runtime.Gosched()
		}
		group = s.take(group, s.ops)
		g.committing(len(group), s.opts.MaxGroup)
		s.carried = 0
		s.commit(group)
		g.carrying(len(group), s.carried)
		// Compact when no write waits, unless the journal has grown well
		// past its size: a compaction holds the writes queued behind it.
		if n := s.jt.rows; n >= s.opts.JournalRows && (len(s.ops) == 0 && s.backlogged() == 0 || n >= 4*s.opts.JournalRows) {
			if err := s.compactJournal(); err != nil {
				// Readers read the journal as well: nothing is lost, and
				// the next commit tries again.
				s.opts.Logger.Warn("durable/sqlite: compacting the journal failed", "error", err)
			}
		}
	}
}

// lonely commits of one write each in a row mean a lone writer, which
// never waits for Options.CommitGap.
const lonely = 8

// gapper is the writer's record for Options.CommitGap.
type gapper struct {
	timer       *time.Timer
	lastCommit  time.Time
	idleWrite   time.Time // when the last write that found the writer idle came
	sinceShared int       // commits since the last one of several writes
	full        bool      // the last commit carried Options.MaxGroup writes

	gap, min, max time.Duration // the gap now, within CommitGap and CommitGapMax
	avgWrites     int           // the writes of recent commits, on average, in sixteenths
	avgEntries    int           // the entries a write of recent commits appended, on average, in sixteenths
}

// wait returns how long the writer waits before its next commit (none if
// not positive): until the gap has passed since the last commit, and at
// least CommitGap since a write found the writer idle. Paced streams' tokens
// come in bursts (their timers fire close together), and the first of a
// burst, long after the last commit, was committed alone at once, the next
// few in the commit after it: at 100 streams paced at 50 ms, a fifth of the
// commits carried one write. Waiting CommitGap for the rest of the burst
// lets it share a commit (about 2 % of the CPU there, and a lower p99),
// and no write waits longer than the gap (bench/README.md, twenty-fifth
// pass).
//
// A writer whose last commit was full has more waiting than a commit
// takes, and does not wait. Nor does one whose few producers are batching:
// each has its next batch queued behind the one being stored, so nothing
// would arrive during the gap; with many (commits of fewWrites writes or
// more), new runs' writes do arrive, and sharing commits saves CPU (5 % at
// 100 unpaced streams).
func (g *gapper) wait() time.Duration {
	if g.sinceShared >= lonely || g.full || g.batching() && g.avgWrites < fewWrites*16 {
		return 0
	}
	return max(g.gap-time.Since(g.lastCommit), g.min-time.Since(g.idleWrite))
}

// batchedEntries is the entries a write appends on average past which its
// producers are batching: they produce faster than commits come (an
// unpaced model), so each already has its batch queued when the writer
// commits. A paced stream's write appends one token. At 10 unpaced
// streams, whose commits carried about 12 writes, the gap put the token
// p99 at 12 ms (bench/README.md, twenty-third pass).
const batchedEntries = 4

// batching reports that recent commits' writes appended batchedEntries
// entries or more on average.
func (g *gapper) batching() bool { return g.avgEntries >= batchedEntries*16 }

// carrying records what a commit of writes appended: entries in all.
func (g *gapper) carrying(writes, entries int) {
	if writes > 0 {
		g.avgEntries += (entries*16/writes - g.avgEntries) / 8
	}
}

// The writes a commit should carry, for Options.CommitGapMax: past about
// sixteen, a commit's own cost (BEGIN, COMMIT, the WAL frames of the
// pages every commit touches) is a small part of its writes'. The gap
// follows the writes of recent commits on average: paced streams' tokens
// come in bursts (their timers fire together), so single commits
// alternate between many writes and a few.
const fewWrites = 16

func (g *gapper) committing(writes, maxGroup int) {
	g.lastCommit = time.Now()
	if g.sinceShared++; writes > 1 {
		g.sinceShared = 0
	}
	g.full = writes >= maxGroup
	if g.max == g.min || g.sinceShared >= lonely {
		return
	}
	// The average over about the last eight commits, in sixteenths.
	g.avgWrites += (min(writes, maxGroup)*16 - g.avgWrites) / 8
	switch {
	case g.avgWrites < fewWrites*16 && !g.batching():
		g.gap = min(g.gap+max(g.gap/4, 100*time.Microsecond), g.max)
	case g.avgWrites > fewWrites*16 || g.batching():
		g.gap = max(g.gap-g.gap/5, g.min)
	}
}

// waitGap waits until the gap (Options.CommitGap, or more up to
// CommitGapMax while commits carry few writes) has passed since the last
// commit, while several writers are about, so that a steady trickle of
// appends shares commits instead of paying one each. It sleeps rather than
// receive what arrives: a write queued meanwhile stays in the queue, for
// the writer to take in one go when the gap ends, instead of waking it
// once per write (which cost as much CPU as the commits the gap saved).
func (s *Store) waitGap(g *gapper) {
	gap := g.wait()
	if gap <= 0 {
		return
	}
	g.timer.Reset(gap)
	defer g.timer.Stop()
	select {
	case <-g.timer.C:
	case <-s.stop:
	}
}

// finishQueued commits group and whatever was queued before Shutdown, and
// compacts the journal.
func (s *Store) finishQueued(group []*op) {
	for {
		group = s.take(group, s.urgent)
		group = s.takeBacklog(group)
		group = s.take(group, s.ops)
		if len(group) == 0 {
			break
		}
		// Committing may give queued appends their next batches.
		s.commit(group)
		group = group[:0]
	}
	if s.jt.rows > 0 {
		if err := s.compactJournal(); err != nil {
			s.opts.Logger.Warn("durable/sqlite: journal left for the next open", "error", err)
		}
	}
}

// commit runs a group of ops in one transaction. Ops rarely fail (a lost
// claim, a closed log), so they run without savepoints, which cost two
// statements each: if one fails, the transaction is rolled back and every
// op of the group runs again in a transaction of its own, so that each gets
// its own outcome and no op's partial writes survive its failure.
func (s *Store) commit(group []*op) {
	if len(group) == 1 {
		s.commitAlone(group[0])
		return
	}
	tx, err := s.begin()
	if err != nil {
		for _, o := range group {
			s.complete(o, err)
		}
		return
	}
	for _, o := range group {
		if err := s.run(tx, o); err != nil {
			s.retryAlone(tx, group)
			return
		}
	}
	if err := tx.flushQueued(); err != nil {
		s.retryAlone(tx, group)
		return
	}
	s.finish(tx, group)
}

// retryAlone rolls tx back after an op of group failed, and runs each op
// of the group again in a transaction of its own.
func (s *Store) retryAlone(tx *writeTx, group []*op) {
	tx.Rollback()
	s.jt.rolledBack()
	s.carried = 0 // what the group appended is gone; the retries count theirs
	for _, o := range group {
		s.commitAlone(o)
	}
}

// begin starts a write transaction.
func (s *Store) begin() (*writeTx, error) {
	if _, err := s.st.begin.Exec(); err != nil {
		return nil, fmt.Errorf("durable/sqlite: begin: %w", err)
	}
	tx := &writeTx{c: s.wc, st: &s.st, ended: s.transactionEnded, journal: s.journalArgs[:0], chunks: s.chunkArgs[:0], chunkData: s.chunkBuf[:0]}
	if err := s.checkForeignWrites(); err != nil {
		tx.Rollback()
		return nil, err
	}
	return tx, nil
}

// run runs o in tx, first forgetting what the writer remembers of the
// state o may change: an append later in the same transaction must see
// o's change.
func (s *Store) run(tx *writeTx, o *op) error {
	switch {
	case o.changes.all:
		s.jt.forgetAllStates()
	case o.changes.run != "":
		s.jt.forgetState(o.changes.run)
	}
	if o.fn == nil {
		return s.appendJob(tx, &o.app)
	}
	if o.logFree {
		tx.logFree = true
		err := o.fn(tx)
		tx.logFree = false
		return err
	}
	if err := tx.flushQueued(); err != nil {
		return err
	}
	return o.fn(tx)
}

// commitAlone runs one op in a transaction of its own.
func (s *Store) commitAlone(o *op) {
	tx, err := s.begin()
	if err != nil {
		s.complete(o, err)
		return
	}
	err = s.run(tx, o)
	if err == nil {
		err = tx.flushQueued()
	}
	if err != nil {
		tx.Rollback()
		s.jt.rolledBack()
		s.complete(o, err)
		return
	}
	s.finish(tx, []*op{o})
}

// CommitStats implements durable.CommitCounter. Compactions of the journal
// and checkpoints, which carry no write, are not counted.
func (s *Store) CommitStats() durable.CommitStats {
	return durable.CommitStats{Commits: s.commits.Load(), Writes: s.writes.Load()}
}

// finish commits tx, in which every op of group succeeded, and reports
// their outcome.
func (s *Store) finish(tx *writeTx, group []*op) {
	if err := tx.Commit(); err != nil {
		s.jt.rolledBack()
		for _, o := range group {
			s.complete(o, fmt.Errorf("durable/sqlite: commit: %w", err))
		}
		return
	}
	// Flushed: their arrays serve the next transaction.
	s.journalArgs, s.chunkArgs, s.chunkBuf = tx.journal[:0], tx.chunks[:0], tx.chunkData[:0]
	s.jt.committed()
	if tx.cancels {
		s.cancels.writes.Add(1)
	}
	s.commits.Add(1)
	s.writes.Add(int64(len(group)))
	for _, o := range group {
		if o.committed != nil {
			o.committed()
		}
		switch {
		case o.fn == nil && o.app.stored && o.app.take != nil:
			// A queued append's entries were handed over: the cache keeps
			// them without a copy.
			s.recent.AddOwned(scheme, o.app.runID, o.app.first, o.app.batch) // and wakes its readers
		case o.fn == nil && o.app.stored && o.app.entry != nil:
			s.recent.AddOwned(scheme, o.app.runID, o.app.first, [][]byte{o.app.entry})
		case o.fn == nil && o.app.stored:
			s.recent.Add(scheme, o.app.runID, o.app.first, o.app.batch)
		case o.wake != "":
			s.hub.Wake(o.wake)
		}
		s.complete(o, nil)
	}
}
