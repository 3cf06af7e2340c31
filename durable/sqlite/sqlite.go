// Package sqlite is the embedded durable backend: delivery logs, run records,
// fencing claims and threads in one SQLite file (modernc.org/sqlite, pure Go).
//
// The database runs in WAL mode with synchronous=NORMAL; the WAL is
// checkpointed by a goroutine of its own rather than inside a commit. All writes go
// through one writer goroutine that commits whatever is queued in a single
// transaction (group commit), each request in its own savepoint, so
// concurrent appends share a commit without sharing failures. Readers tail
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
	// ReadPage is how many entries a reader fetches per query. Zero means
	// 512.
	ReadPage int
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
	w    *sql.DB // the writer's single connection
	r    *sql.DB // readers
	ck   *sql.DB // the checkpointer's connection

	ckDone chan struct{}

	ops     chan *op
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
	hub     notify.Hub
	recent  tail.Recent
	tail    tail.Reader
	st      stmts

	mu     sync.RWMutex // guards closed against sends on ops
	closed bool
}

var _ interface {
	durable.Store
	durable.Upserter
	durable.Pruner
	durable.Leaser
	durable.ThreadStore
} = (*Store)(nil)

// op is one write request run by the writer goroutine in its own savepoint
// of a group transaction.
type op struct {
	fn        func(tx *sql.Tx) error
	committed func() // if set, run after the commit, before the wake-up
	wake      string // run whose readers to wake after the commit
	done      chan error
}

const schema = `
CREATE TABLE IF NOT EXISTS goai_logs (
	run_id     TEXT PRIMARY KEY,
	last_seq   INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	closed_at  INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS goai_logs_closed ON goai_logs (closed_at) WHERE closed_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS goai_entries (
	run_id TEXT NOT NULL,
	seq    INTEGER NOT NULL,
	data   BLOB NOT NULL,
	PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
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
CREATE TABLE IF NOT EXISTS goai_threads (
	thread_id  TEXT PRIMARY KEY,
	messages   TEXT NOT NULL,
	run_id     TEXT NOT NULL,
	interrupts TEXT,
	updated_at INTEGER NOT NULL
) WITHOUT ROWID;
`

// Open opens (creating if needed) the database at path and starts its
// writer. opts may be nil. Call Shutdown to release it.
func Open(path string, opts *Options) (*Store, error) {
	s := &Store{
		ops:     make(chan *op, 1024),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		ckDone:  make(chan struct{}),
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
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		if extra != "" {
			q.Add("_pragma", extra)
		}
		return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	}
	var err error
	if s.w, err = sql.Open("sqlite", dsn("wal_autocheckpoint(0)")+"&_txlock=immediate"); err != nil {
		return nil, fmt.Errorf("durable/sqlite: open %s: %w", path, err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if _, err := s.w.Exec(schema); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("durable/sqlite: create schema in %s: %w", path, err)
	}
	if err := migrate(s.w); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("durable/sqlite: migrate %s: %w", path, err)
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
	if err := s.prepare(); err != nil {
		s.w.Close()
		s.r.Close()
		return nil, err
	}
	s.tail = tail.Reader{
		Scheme: scheme, Page: s.opts.ReadPage, Poll: s.opts.PollInterval,
		FirstChunkDeadline: s.opts.FirstChunkDeadline,
		Hub:                &s.hub, Closed: s.isClosed, Query: s.query, Recent: &s.recent,
	}
	if s.ck, err = sql.Open("sqlite", dsn("")); err != nil {
		s.w.Close()
		s.r.Close()
		return nil, fmt.Errorf("durable/sqlite: open %s: %w", path, err)
	}
	s.ck.SetMaxOpenConns(1)
	go s.writer()
	go s.checkpointer()
	return s, nil
}

// checkpointInterval is how often the checkpointer copies the WAL back
// into the database.
const checkpointInterval = 250 * time.Millisecond

// checkpointer runs the WAL checkpoints on a connection of its own, so that
// no commit of the writer pays for one (SQLite's automatic checkpoint runs
// inside the commit that crosses its threshold, stalling every append
// queued behind it). A passive checkpoint never waits for readers or the
// writer.
func (s *Store) checkpointer() {
	defer close(s.ckDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if _, err := s.ck.Exec(`PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
				s.opts.Logger.Warn("durable/sqlite: checkpoint failed", "error", err)
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
		s.hub.Close()
		s.st.close()
		err = errors.Join(s.w.Close(), s.r.Close(), s.ck.Close())
	})
	return err
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// exec runs fn in the writer's next group transaction and waits for the
// commit. Once queued, a write is not abandoned because ctx ends: the caller
// learns its outcome.
func (s *Store) exec(ctx context.Context, wake string, fn func(tx *sql.Tx) error) error {
	return s.execThen(ctx, wake, fn, nil)
}

// execThen is exec with committed run after a successful commit, before
// the wake-up.
func (s *Store) execThen(ctx context.Context, wake string, fn func(tx *sql.Tx) error, committed func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &op{fn: fn, committed: committed, wake: wake, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return durable.ErrStoreClosed
	}
	select {
	case s.ops <- o:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	return <-o.done
}

func (s *Store) writer() {
	defer close(s.stopped)
	group := make([]*op, 0, s.opts.MaxGroup)
	for {
		group = group[:0]
		select {
		case o := <-s.ops:
			group = append(group, o)
		case <-s.stop:
			// Run whatever was queued before Shutdown.
			for {
				select {
				case o := <-s.ops:
					group = append(group, o)
					if len(group) == s.opts.MaxGroup {
						s.commit(group)
						group = group[:0]
					}
					continue
				default:
				}
				break
			}
			if len(group) > 0 {
				s.commit(group)
			}
			return
		}
	fill:
		for len(group) < s.opts.MaxGroup {
			select {
			case o := <-s.ops:
				group = append(group, o)
			default:
				break fill
			}
		}
		s.commit(group)
	}
}

// commit runs a group of ops in one transaction, each in a savepoint, and
// reports each op's outcome after the commit.
func (s *Store) commit(group []*op) {
	ctx := context.Background()
	fail := func(err error) {
		for _, o := range group {
			o.done <- err
		}
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		fail(fmt.Errorf("durable/sqlite: begin: %w", err))
		return
	}
	if len(group) == 1 {
		// Alone in its transaction, an op needs no savepoint: its failure
		// rolls back the transaction.
		o := group[0]
		if err := o.fn(tx); err != nil {
			tx.Rollback()
			o.done <- err
			return
		}
		s.finish(tx, group, []error{nil})
		return
	}
	errs := make([]error, len(group))
	for i, o := range group {
		if _, err := tx.Stmt(s.st.savepoint).Exec(); err != nil {
			tx.Rollback()
			fail(fmt.Errorf("durable/sqlite: savepoint: %w", err))
			return
		}
		errs[i] = o.fn(tx)
		if errs[i] != nil {
			if _, err := tx.Stmt(s.st.rollbackTo).Exec(); err != nil {
				tx.Rollback()
				fail(fmt.Errorf("durable/sqlite: rollback to savepoint: %w", err))
				return
			}
		}
		if _, err := tx.Stmt(s.st.release).Exec(); err != nil {
			tx.Rollback()
			fail(fmt.Errorf("durable/sqlite: release savepoint: %w", err))
			return
		}
	}
	s.finish(tx, group, errs)
}

// finish commits tx and reports each op's outcome (errs[i] for group[i]).
func (s *Store) finish(tx *sql.Tx, group []*op, errs []error) {
	if err := tx.Commit(); err != nil {
		for _, o := range group {
			o.done <- fmt.Errorf("durable/sqlite: commit: %w", err)
		}
		return
	}
	for i, o := range group {
		if errs[i] == nil && o.committed != nil {
			o.committed()
		}
		if errs[i] == nil && o.wake != "" {
			s.hub.Wake(o.wake)
		}
		o.done <- errs[i]
	}
}
