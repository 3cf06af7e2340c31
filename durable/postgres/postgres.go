// Package postgres is the distributed durable backend: delivery logs, run
// records, fencing claims and threads in PostgreSQL (github.com/jackc/pgx/v5).
//
// An append is one round trip to a server-side function that, in one
// transaction, checks the writer's claim epoch against the run record
// (fencing), de-duplicates a retried producer tuple (idempotency), refuses a
// closed log, inserts the batch and notifies. Tailers park on in-process
// channels woken by LISTEN/NOTIFY (payload: the run id) through one
// listening connection per Store, and by local commits directly; they then
// re-query by seq. After the listening connection is re-established every
// tailer is woken, since notifications may have been missed meanwhile.
//
// Tables and functions are created in the connection's current schema (set
// search_path in the connection string to isolate deployments or tests).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/internal/notify"
	"github.com/goai-sdk/goai/durable/internal/tail"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const scheme = "pg"

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// FirstChunkDeadline bounds a sentinel read's wait for the first entry
	// of a run with no data. Zero means durable.DefaultFirstChunkDeadline;
	// negative means wait until the read's context is done.
	FirstChunkDeadline time.Duration
	// ReadPage is how many entries a reader fetches per query. Zero means
	// 1000.
	ReadPage int
	// Channel is the LISTEN/NOTIFY channel. Empty means "goai_durable".
	Channel string
	// MaxGroup caps how many queued appends share one transaction (group
	// commit). Zero means 256.
	MaxGroup int
	// Logger receives background errors; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock for log creation and close times; nil means
	// time.Now.
	Now func() time.Time
}

// Store is a durable.Store in PostgreSQL.
type Store struct {
	opts   Options
	pool   *pgxpool.Pool
	hub    notify.Hub
	recent tail.Recent
	tail   tail.Reader
	own    ownNotices // notifications of this store's appends not yet received

	ctx           context.Context // ends at Shutdown
	cancel        context.CancelFunc
	listenDone    chan struct{}
	appends       chan *appendReq
	committerDone chan struct{}
	once          sync.Once

	commits, writes atomic.Int64 // CommitStats

	mu     sync.RWMutex
	closed bool
}

var _ interface {
	durable.Store
	durable.BatchReader
	durable.Upserter
	durable.Pruner
	durable.Leaser
	durable.ThreadStore
	durable.CommitCounter
} = (*Store)(nil)

const schema = `
CREATE TABLE IF NOT EXISTS goai_logs (
	run_id     text PRIMARY KEY,
	last_seq   bigint NOT NULL,
	created_at bigint NOT NULL,
	closed_at  bigint
);
CREATE INDEX IF NOT EXISTS goai_logs_closed ON goai_logs (closed_at) WHERE closed_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS goai_entries (
	run_id text NOT NULL,
	seq    bigint NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS goai_producers (
	run_id       text NOT NULL,
	producer_id  text NOT NULL,
	producer_seq bigint NOT NULL,
	first_seq    bigint NOT NULL,
	n            bigint NOT NULL,
	PRIMARY KEY (run_id, producer_id, producer_seq)
);
CREATE TABLE IF NOT EXISTS goai_runs (
	id               bigserial PRIMARY KEY,
	run_id           text NOT NULL UNIQUE,
	thread_id        text NOT NULL,
	status           text NOT NULL,
	started_at       bigint NOT NULL,
	finished_at      bigint,
	error_message    text,
	error_code       text,
	usage            text,
	sandbox_key      text,
	detached_since   bigint,
	cancel_requested boolean,
	driver_epoch     bigint
);
CREATE INDEX IF NOT EXISTS goai_runs_thread ON goai_runs (thread_id, status, started_at);
CREATE INDEX IF NOT EXISTS goai_runs_detached ON goai_runs (status, detached_since) WHERE detached_since IS NOT NULL;
CREATE TABLE IF NOT EXISTS goai_leases (
	run_id       text PRIMARY KEY,
	heartbeat_at bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS goai_threads (
	thread_id  text PRIMARY KEY,
	messages   text NOT NULL,
	run_id     text NOT NULL,
	interrupts text,
	updated_at bigint NOT NULL
);
-- Migration 2: owners (the principal that started a run or owns a thread).
ALTER TABLE goai_runs ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT '';
ALTER TABLE goai_threads ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS goai_runs_finished ON goai_runs (finished_at) WHERE finished_at IS NOT NULL;
-- Migration 3: the requests of runs a successor may take over.
CREATE TABLE IF NOT EXISTS goai_run_requests (
	run_id text PRIMARY KEY,
	body   bytea NOT NULL
);

-- goai_append stores a batch atomically with its fencing and idempotency
-- checks. code: ok | dup (producer tuple seen: first_seq, n are the original)
-- | lost (epoch mismatch: observed) | closed.
CREATE OR REPLACE FUNCTION goai_append(p_run text, p_data bytea[], p_epoch bigint,
	p_producer text, p_pseq bigint, p_now bigint, p_channel text)
RETURNS TABLE (first_seq bigint, n bigint, code text, observed bigint)
LANGUAGE plpgsql AS $$
DECLARE
	v_last   bigint;
	v_closed bigint;
	v_epoch  bigint;
	v_n      bigint := coalesce(array_length(p_data, 1), 0);
BEGIN
	IF p_epoch > 0 THEN
		-- FOR SHARE: a concurrent claim waits for this append to commit.
		SELECT r.driver_epoch INTO v_epoch FROM goai_runs r WHERE r.run_id = p_run FOR SHARE;
		IF coalesce(v_epoch, 0) <> p_epoch THEN
			code := 'lost'; observed := coalesce(v_epoch, 0);
			RETURN NEXT; RETURN;
		END IF;
	END IF;
	-- Create or lock the log row: appends to one run serialize here.
	INSERT INTO goai_logs AS l (run_id, last_seq, created_at) VALUES (p_run, 0, p_now)
	ON CONFLICT (run_id) DO UPDATE SET last_seq = l.last_seq
	RETURNING l.last_seq, l.closed_at INTO v_last, v_closed;
	IF p_producer <> '' THEN
		SELECT p.first_seq, p.n INTO first_seq, n FROM goai_producers p
		WHERE p.run_id = p_run AND p.producer_id = p_producer AND p.producer_seq = p_pseq;
		IF FOUND THEN
			code := 'dup';
			RETURN NEXT; RETURN;
		END IF;
	END IF;
	IF v_closed IS NOT NULL THEN
		code := 'closed';
		RETURN NEXT; RETURN;
	END IF;
	INSERT INTO goai_entries (run_id, seq, data)
	SELECT p_run, v_last + t.o, t.d FROM unnest(p_data) WITH ORDINALITY AS t(d, o);
	UPDATE goai_logs SET last_seq = v_last + v_n WHERE run_id = p_run;
	IF p_producer <> '' THEN
		INSERT INTO goai_producers (run_id, producer_id, producer_seq, first_seq, n)
		VALUES (p_run, p_producer, p_pseq, v_last + 1, v_n);
	END IF;
	PERFORM pg_notify(p_channel, CASE WHEN octet_length(p_run) <= 4000 THEN p_run ELSE '' END);
	first_seq := v_last + 1; n := v_n; code := 'ok';
	RETURN NEXT;
END
$$;

CREATE OR REPLACE FUNCTION goai_close(p_run text, p_now bigint, p_channel text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO goai_logs AS l (run_id, last_seq, created_at, closed_at) VALUES (p_run, 0, p_now, p_now)
	ON CONFLICT (run_id) DO UPDATE SET closed_at = coalesce(l.closed_at, excluded.closed_at);
	PERFORM pg_notify(p_channel, CASE WHEN octet_length(p_run) <= 4000 THEN p_run ELSE '' END);
END
$$;
`

// Open connects to connString, creates the schema if needed and starts the
// listener. opts may be nil. Call Shutdown to release it.
func Open(ctx context.Context, connString string, opts *Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("durable/postgres: %w", err)
	}
	s := &Store{
		listenDone:    make(chan struct{}),
		appends:       make(chan *appendReq),
		committerDone: make(chan struct{}),
	}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.FirstChunkDeadline == 0 {
		s.opts.FirstChunkDeadline = durable.DefaultFirstChunkDeadline
	}
	if s.opts.ReadPage <= 0 {
		s.opts.ReadPage = 1000
	}
	if s.opts.MaxGroup <= 0 {
		s.opts.MaxGroup = 256
	}
	if s.opts.Channel == "" {
		s.opts.Channel = "goai_durable"
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.Default()
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("durable/postgres: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Serialize concurrent migrations of one database.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7244190113)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schema)
		return err
	})
	if err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("durable/postgres: create schema: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	ready := make(chan error, 1)
	go s.listen(cfg.ConnConfig.Copy(), ready)
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		s.cancel()
		<-s.listenDone
		s.pool.Close()
		return nil, fmt.Errorf("durable/postgres: listen: %w", err)
	}
	s.recent.Wakes = &s.hub
	// Another store's append reaches this one as a notification, which
	// forgets the log's cached tail before it wakes (appendedElsewhere).
	s.tail = tail.Reader{
		CachedTails: true, Scheme: scheme, Page: s.opts.ReadPage,
		FirstChunkDeadline: s.opts.FirstChunkDeadline,
		Hub:                &s.hub, Closed: s.isClosed, Query: s.query, Recent: &s.recent,
	}
	go s.committer()
	return s, nil
}

// Shutdown stops the listener, ends every Read with durable.ErrStoreClosed
// and closes the pool. Later calls return nil.
func (s *Store) Shutdown() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		<-s.listenDone
		<-s.committerDone
		s.hub.Close()
		s.pool.Close()
	})
	return nil
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// listen holds the LISTEN connection, reconnecting with backoff, and turns
// notifications into wake-ups. The first connection's outcome goes to ready.
func (s *Store) listen(cfg *pgx.ConnConfig, ready chan<- error) {
	defer close(s.listenDone)
	backoff := 50 * time.Millisecond
	first := true
	for s.ctx.Err() == nil {
		err := s.listenOnce(cfg, func() {
			backoff = 50 * time.Millisecond
			if first {
				first = false
				ready <- nil
			}
		})
		if s.ctx.Err() != nil {
			break
		}
		if first {
			ready <- err
			return
		}
		s.opts.Logger.Warn("durable/postgres: listener connection lost; reconnecting", "err", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-s.ctx.Done():
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	if first {
		ready <- s.ctx.Err()
	}
}

func (s *Store) listenOnce(cfg *pgx.ConnConfig, listening func()) error {
	conn, err := pgx.ConnectConfig(s.ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(s.ctx, "LISTEN "+pgx.Identifier{s.opts.Channel}.Sanitize()); err != nil {
		return err
	}
	// Anything committed while we were not listening was missed: the
	// cache of recent entries may lack another store's appends.
	s.own.reset()
	s.recent.Clear()
	s.hub.WakeAll()
	listening()
	for {
		n, err := conn.WaitForNotification(s.ctx)
		if err != nil {
			return err
		}
		switch {
		case n.Payload == "":
			s.recent.Clear()
			s.hub.WakeAll()
		case !s.own.received(n.Payload):
			s.appendedElsewhere(n.Payload)
		}
	}
}

// appendedElsewhere wakes runID's tailers for an append this store did not
// make: the cache of recent entries no longer holds the log's tail, so it
// forgets the log first (a tailer at the cached tail would otherwise park
// without a query).
func (s *Store) appendedElsewhere(runID string) {
	s.recent.Forget(runID)
	s.hub.Wake(runID)
}

func (s *Store) checkOpen() error {
	if s.isClosed() {
		return durable.ErrStoreClosed
	}
	return nil
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *durable.ClaimError
	var cl *durable.ClaimLostError
	if errors.As(err, &ce) || errors.As(err, &cl) || errors.Is(err, durable.ErrLogClosed) {
		return err
	}
	return fmt.Errorf("durable/postgres: %s: %w", op, err)
}

// Healthy implements durable.Healther: with deep, a round trip to the
// database.
func (s *Store) Healthy(ctx context.Context, deep bool) error {
	if err := s.checkOpen(); err != nil {
		return fmt.Errorf("%w: %w", durable.ErrStoreUnhealthy, err)
	}
	if deep {
		if err := s.pool.Ping(ctx); err != nil {
			return fmt.Errorf("%w: %w", durable.ErrStoreUnhealthy, err)
		}
	}
	return nil
}
