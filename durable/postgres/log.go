package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/internal/tail"
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
		s.recent.Add(scheme, runID, *first, data) // and wakes its readers
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
	s.recent.Forget(runID)
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
	mint := durable.NewOffsetMinter(scheme, runID)
	var seq int64
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&seq, &data}, func() error {
		out = append(out, durable.Entry{Offset: mint.Offset(seq), Data: data})
		data = nil // a fresh slice per row
		return nil
	})
	if err != nil {
		return nil, wrap("snapshot", err)
	}
	return out, nil
}

// query reads the log state and up to limit entries after seq after, in
// one statement (one snapshot).
func (s *Store) query(ctx context.Context, runID string, after int64, limit int) (*tail.State, error) {
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
	st := &tail.State{}
	mint := durable.NewOffsetMinter(scheme, runID)
	var seq *int64
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&st.Last, &st.Closed, &seq, &data}, func() error {
		st.Exists = true
		if seq != nil {
			if data == nil {
				data = []byte{}
			}
			st.Entries = append(st.Entries, durable.Entry{Offset: mint.Offset(*seq), Data: data})
		}
		data = nil
		return nil
	})
	if err != nil {
		return nil, wrap("read", err)
	}
	return st, nil
}

// Read implements durable.Log.
func (s *Store) Read(ctx context.Context, runID, after string) iter.Seq2[durable.Entry, error] {
	return s.tail.Read(ctx, runID, after)
}

// ReadBatches implements durable.BatchReader.
func (s *Store) ReadBatches(ctx context.Context, runID, after string) iter.Seq2[[]durable.Entry, error] {
	return s.tail.ReadBatches(ctx, runID, after)
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
		     p AS (DELETE FROM goai_producers WHERE run_id IN (SELECT run_id FROM d)),
		     r AS (DELETE FROM goai_runs WHERE finished_at <= $1 AND status IN ('completed', 'failed', 'aborted') RETURNING run_id),
		     l AS (DELETE FROM goai_leases WHERE run_id IN (SELECT run_id FROM r)),
		     q AS (DELETE FROM goai_run_requests WHERE run_id IN (SELECT run_id FROM r))
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
	s.recent.Forget(runID)
	s.hub.Wake(runID)
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Offset
	}
	return out, nil
}
