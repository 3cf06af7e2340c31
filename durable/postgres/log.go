package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/internal/flight"
	"github.com/jackc/pgx/v5"
)

func offsets(runID string, first, n int64) []string {
	return durable.FormatOffsets(scheme, runID, first, n)
}

// Append implements durable.Log.
func (s *Store) Append(ctx context.Context, runID string, batch [][]byte) ([]string, error) {
	return s.AppendWith(ctx, runID, batch, durable.AppendOptions{})
}

// AppendWith implements durable.Log in one round trip and one transaction.
func (s *Store) AppendWith(ctx context.Context, runID string, batch [][]byte, opts durable.AppendOptions) ([]string, error) {
	if err := durable.CheckRunID(runID); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if len(batch) == 0 {
		return []string{}, ctx.Err()
	}
	data := make([][]byte, len(batch))
	for i, b := range batch {
		if b == nil {
			b = []byte{}
		}
		data[i] = b
	}
	res, err := s.submit(ctx, &appendReq{runID: runID, data: data, opts: opts, now: s.opts.Now().UnixMilli()})
	if err != nil {
		return nil, err
	}
	first, n, code, observed := res.first, res.n, res.code, res.observed
	switch code {
	case "ok":
		s.hub.Wake(runID)
	case "dup":
		if *n != int64(len(batch)) {
			return nil, fmt.Errorf("%w: run %q producer %q seq %d", durable.ErrProducerConflict, runID, opts.Producer.ID, opts.Producer.Seq)
		}
	case "lost":
		return nil, &durable.ClaimLostError{RunID: runID, Held: opts.Epoch, Observed: *observed}
	case "closed":
		return nil, fmt.Errorf("%w: run %q", durable.ErrLogClosed, runID)
	default:
		return nil, fmt.Errorf("durable/postgres: append: unexpected result %q", code)
	}
	return offsets(runID, *first, *n), nil
}

// Close implements durable.Log.
func (s *Store) Close(ctx context.Context, runID string) error {
	if err := durable.CheckRunID(runID); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `SELECT goai_close($1, $2, $3)`, runID, s.opts.Now().UnixMilli(), s.opts.Channel)
	if err != nil {
		return wrap("close", err)
	}
	s.hub.Wake(runID)
	return nil
}

// Snapshot implements durable.Log.
func (s *Store) Snapshot(ctx context.Context, runID string) ([]durable.Entry, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, data FROM goai_entries WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return nil, wrap("snapshot", err)
	}
	out := []durable.Entry{}
	var seq int64
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&seq, &data}, func() error {
		out = append(out, durable.Entry{Offset: durable.FormatOffset(scheme, runID, seq), Data: data})
		data = nil // a fresh slice per row
		return nil
	})
	if err != nil {
		return nil, wrap("snapshot", err)
	}
	return out, nil
}

// state is one consistent view of a log: its tail, whether it is closed,
// and a page of entries after some seq. States are shared between coalesced
// readers and must not be modified.
type state struct {
	exists  bool
	last    int64
	closed  bool
	entries []durable.Entry
}

type fetchKey struct {
	run   string
	after int64
	limit int
}

// fetch reads the log state and up to limit entries after seq after, in one
// statement (one snapshot). Tailers woken together share one query, under
// the rules of package flight, so that none can be handed a state that
// predates its wait and park on a wake-up that already happened.
func (s *Store) fetch(ctx context.Context, runID string, after int64, limit int, tok flight.Token) (*state, error) {
	return s.flight.Do(ctx, fetchKey{runID, after, limit}, tok, func(ctx context.Context) (*state, error) {
		return s.query(ctx, runID, after, limit)
	})
}

func (s *Store) query(ctx context.Context, runID string, after int64, limit int) (*state, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT l.last_seq, l.closed_at IS NOT NULL, e.seq, e.data
		FROM goai_logs l
		LEFT JOIN LATERAL (
			SELECT seq, data FROM goai_entries
			WHERE run_id = l.run_id AND seq > $2 AND seq <= l.last_seq
			ORDER BY seq LIMIT $3
		) e ON true
		WHERE l.run_id = $1`, runID, after, limit)
	if err != nil {
		return nil, wrap("read", err)
	}
	st := &state{}
	var seq *int64
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&st.last, &st.closed, &seq, &data}, func() error {
		st.exists = true
		if seq != nil {
			if data == nil {
				data = []byte{}
			}
			st.entries = append(st.entries, durable.Entry{Offset: durable.FormatOffset(scheme, runID, *seq), Data: data})
		}
		data = nil
		return nil
	})
	if err != nil {
		return nil, wrap("read", err)
	}
	return st, nil
}

// errQuiet ends a read without an error: its context is done.
var errQuiet = errors.New("quiet")

// Read implements durable.Log.
func (s *Store) Read(ctx context.Context, runID, after string) iter.Seq2[durable.Entry, error] {
	return func(yield func(durable.Entry, error) bool) {
		pos, err := s.start(ctx, runID, after)
		if err != nil {
			if err != errQuiet && ctx.Err() == nil {
				yield(durable.Entry{}, err)
			}
			return
		}
		for {
			wake, release := s.hub.Wait(runID)
			tok := s.flight.Token(wake)
			if s.isClosed() {
				release()
				yield(durable.Entry{}, durable.ErrStoreClosed)
				return
			}
			st, err := s.fetch(ctx, runID, pos, s.opts.ReadPage, tok)
			if err == nil && (!st.exists || (pos < st.last && len(st.entries) == 0)) {
				err = fmt.Errorf("%w: run %q was pruned during the read", durable.ErrRunNotFound, runID)
			}
			if err != nil {
				release()
				if ctx.Err() == nil {
					yield(durable.Entry{}, err)
				}
				return
			}
			for _, e := range st.entries {
				if ctx.Err() != nil || !yield(e, nil) {
					release()
					return
				}
				pos++
			}
			switch {
			case pos < st.last:
				release()
				continue // more pages
			case st.closed:
				release()
				return
			}
			select {
			case <-wake:
			case <-ctx.Done():
				release()
				return
			}
			release()
		}
	}
}

// start resolves after to the seq a read continues from.
func (s *Store) start(ctx context.Context, runID, after string) (int64, error) {
	if err := durable.CheckRunID(runID); err != nil {
		return 0, err
	}
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	if after != durable.FromStart && after != durable.Now {
		seq, err := durable.ParseOffset(scheme, runID, after)
		if err != nil {
			return 0, err
		}
		st, err := s.query(ctx, runID, 0, 0)
		if err != nil {
			return 0, err
		}
		switch {
		case !st.exists:
			return 0, fmt.Errorf("%w: run %q (unknown or expired)", durable.ErrRunNotFound, runID)
		case seq > st.last:
			return 0, durable.FutureOffsetError(runID, after)
		}
		return seq, nil
	}
	var deadline <-chan time.Time
	if s.opts.FirstChunkDeadline > 0 {
		t := time.NewTimer(s.opts.FirstChunkDeadline)
		defer t.Stop()
		deadline = t.C
	}
	start := int64(-1)
	for {
		wake, release := s.hub.Wait(runID)
		st, err := s.fetch(ctx, runID, 0, 0, s.flight.Token(wake))
		if err != nil {
			release()
			return 0, err
		}
		if start < 0 {
			start = 0
			if after == durable.Now {
				start = st.last
			}
		}
		if st.exists && (st.last > 0 || st.closed) {
			release()
			return start, nil
		}
		if s.isClosed() {
			release()
			return 0, durable.ErrStoreClosed
		}
		select {
		case <-wake:
		case <-deadline:
			release()
			return 0, fmt.Errorf("%w: run %q produced no data within %v", durable.ErrRunNotFound, runID, s.opts.FirstChunkDeadline)
		case <-ctx.Done():
			release()
			return 0, errQuiet
		}
		release()
	}
}

// Prune implements durable.Pruner.
func (s *Store) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	var n int
	err := s.pool.QueryRow(ctx, `
		WITH d AS (DELETE FROM goai_logs WHERE closed_at <= $1 RETURNING run_id),
		     e AS (DELETE FROM goai_entries WHERE run_id IN (SELECT run_id FROM d)),
		     p AS (DELETE FROM goai_producers WHERE run_id IN (SELECT run_id FROM d))
		SELECT count(*) FROM d`, cutoff.UnixMilli()).Scan(&n)
	return n, wrap("prune", err)
}

// Upsert implements durable.Upserter.
func (s *Store) Upsert(ctx context.Context, runID string, entries []durable.Entry) ([]string, error) {
	if err := durable.CheckRunID(runID); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return []string{}, nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var last int64
		var closed *int64
		err := tx.QueryRow(ctx, `SELECT last_seq, closed_at FROM goai_logs WHERE run_id = $1 FOR UPDATE`, runID).Scan(&last, &closed)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// Create (or wait for a concurrent creator) and lock.
			err = tx.QueryRow(ctx, `INSERT INTO goai_logs AS l (run_id, last_seq, created_at) VALUES ($1, 0, $2)
				ON CONFLICT (run_id) DO UPDATE SET last_seq = l.last_seq RETURNING l.last_seq, l.closed_at`,
				runID, s.opts.Now().UnixMilli()).Scan(&last, &closed)
			if err != nil {
				return err
			}
		case err != nil:
			return err
		}
		if closed != nil {
			return fmt.Errorf("%w: run %q", durable.ErrLogClosed, runID)
		}
		seqs, err := durable.PlanUpsert(scheme, runID, last, entries)
		if err != nil {
			return err
		}
		data := make([][]byte, len(entries))
		tail := last
		for i, e := range entries {
			data[i] = e.Data
			if data[i] == nil {
				data[i] = []byte{}
			}
			tail = max(tail, seqs[i])
		}
		if _, err := tx.Exec(ctx, `INSERT INTO goai_entries (run_id, seq, data)
			SELECT $1, t.seq, t.data FROM unnest($2::bigint[], $3::bytea[]) AS t(seq, data)
			ON CONFLICT (run_id, seq) DO UPDATE SET data = excluded.data`, runID, seqs, data); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE goai_logs SET last_seq = $2 WHERE run_id = $1`, runID, tail)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, CASE WHEN octet_length($2::text) <= 4000 THEN $2::text ELSE '' END)`, s.opts.Channel, runID)
		return err
	})
	if err != nil {
		var oe *durable.OffsetError
		if errors.As(err, &oe) {
			return nil, err
		}
		return nil, wrap("upsert", err)
	}
	s.hub.Wake(runID)
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Offset
	}
	return out, nil
}
