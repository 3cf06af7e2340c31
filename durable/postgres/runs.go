package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/jackc/pgx/v5"
)

const runColumns = `run_id, thread_id, status, started_at, finished_at, error_message, error_code, usage,
	sandbox_key, detached_since, cancel_requested, driver_epoch, owner`

func scanRun(row pgx.Row) (durable.RunRecord, error) {
	var (
		r                         durable.RunRecord
		status                    string
		started                   int64
		finished, detached, epoch *int64
		errMsg, errCode, usage    *string
		sbox                      *string
		cancel                    *bool
	)
	if err := row.Scan(&r.RunID, &r.ThreadID, &status, &started, &finished, &errMsg, &errCode, &usage,
		&sbox, &detached, &cancel, &epoch, &r.Owner); err != nil {
		return r, err
	}
	r.Status = durable.RunStatus(status)
	r.StartedAt = time.UnixMilli(started).UTC()
	if finished != nil {
		r.FinishedAt = durable.Ptr(time.UnixMilli(*finished).UTC())
	}
	if errMsg != nil {
		r.Error = &durable.RunError{Message: *errMsg}
		if errCode != nil {
			r.Error.Code = *errCode
		}
	}
	if usage != nil {
		r.Usage = json.RawMessage(*usage)
	}
	r.SandboxKey = sbox
	if detached != nil {
		r.DetachedSince = durable.Ptr(time.UnixMilli(*detached).UTC())
	}
	r.CancelRequested = cancel
	r.DriverEpoch = epoch
	return r, nil
}

// runArgs returns the column values of r in runColumns order.
func runArgs(r durable.RunRecord) []any {
	var (
		finished, detached     *int64
		errMsg, errCode, usage *string
	)
	if r.FinishedAt != nil {
		finished = durable.Ptr(r.FinishedAt.UnixMilli())
	}
	if r.Error != nil {
		errMsg = &r.Error.Message
		if r.Error.Code != "" {
			errCode = &r.Error.Code
		}
	}
	if r.Usage != nil {
		usage = durable.Ptr(string(r.Usage))
	}
	if r.DetachedSince != nil {
		detached = durable.Ptr(r.DetachedSince.UnixMilli())
	}
	return []any{r.RunID, r.ThreadID, string(r.Status), r.StartedAt.UnixMilli(), finished, errMsg, errCode, usage,
		r.SandboxKey, detached, r.CancelRequested, r.DriverEpoch, r.Owner}
}

const values13 = `($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`

// CreateOrResume implements durable.RunStore.
func (s *Store) CreateOrResume(ctx context.Context, rec durable.RunRecord) (durable.RunRecord, error) {
	rec, err := durable.CheckNewRun(rec)
	if err != nil {
		return durable.RunRecord{}, err
	}
	if err := s.checkOpen(); err != nil {
		return rec, err
	}
	var out durable.RunRecord
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO goai_runs (`+runColumns+`) VALUES `+values13+`
			ON CONFLICT (run_id) DO NOTHING`, runArgs(rec)...); err != nil {
			return err
		}
		// A new statement, so a new snapshot: it sees a row a concurrent
		// creator committed while the insert waited.
		var err error
		out, err = scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+` FROM goai_runs WHERE run_id = $1`, rec.RunID))
		return err
	})
	return out, wrap("create run", err)
}

// Get implements durable.RunStore.
func (s *Store) Get(ctx context.Context, runID string) (durable.RunRecord, error) {
	if err := s.checkOpen(); err != nil {
		return durable.RunRecord{}, err
	}
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM goai_runs WHERE run_id = $1`, runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("%w: %q", durable.ErrRunNotFound, runID)
	}
	return r, wrap("get run", err)
}

// CancelRequested implements durable.CancelLister, in one query.
func (s *Store) CancelRequested(ctx context.Context, runIDs []string) ([]string, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT run_id FROM goai_runs WHERE run_id = ANY($1) AND cancel_requested`, runIDs)
	if err != nil {
		return nil, wrap("cancel requests", err)
	}
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, wrap("cancel requests", err)
		}
		out = append(out, id)
	}
	return out, wrap("cancel requests", rows.Err())
}

// Update implements durable.RunStore. The record is read and written under
// a row lock, so the IfEpoch check and the write are atomic.
func (s *Store) Update(ctx context.Context, runID string, patch durable.RunPatch) error {
	if err := patch.Validate(); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+` FROM goai_runs WHERE run_id = $1 FOR UPDATE`, runID))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := patch.CheckEpoch(r); err != nil {
			return err
		}
		patch.Apply(&r)
		_, err = tx.Exec(ctx, `UPDATE goai_runs SET (`+runColumns+`) = `+values13+` WHERE run_id = $1`, runArgs(r)...)
		return err
	})
	return wrap("update run", err)
}

// Claim implements durable.RunStore in one statement in the common case.
func (s *Store) Claim(ctx context.Context, runID string) (durable.Claim, error) {
	if err := s.checkOpen(); err != nil {
		return durable.Claim{}, err
	}
	var epoch int64
	err := s.pool.QueryRow(ctx, `
		UPDATE goai_runs SET driver_epoch = coalesce(driver_epoch, 0) + 1
		WHERE run_id = $1 AND status NOT IN ('completed', 'failed', 'aborted')
		RETURNING driver_epoch`, runID).Scan(&epoch)
	if err == nil {
		return durable.Claim{RunID: runID, Epoch: epoch}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return durable.Claim{}, wrap("claim", err)
	}
	var status string
	err = s.pool.QueryRow(ctx, `SELECT status FROM goai_runs WHERE run_id = $1`, runID).Scan(&status)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return durable.Claim{}, &durable.ClaimError{RunID: runID, Reason: durable.ClaimUnknown}
	case err != nil:
		return durable.Claim{}, wrap("claim", err)
	case durable.RunStatus(status).Terminal():
		return durable.Claim{}, &durable.ClaimError{RunID: runID, Reason: durable.ClaimTerminal}
	}
	// Became claimable between the two statements: try again.
	return s.Claim(ctx, runID)
}

func (s *Store) list(ctx context.Context, query string, args ...any) ([]durable.RunRecord, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM goai_runs WHERE `+query, args...)
	if err != nil {
		return nil, wrap("list runs", err)
	}
	defer rows.Close()
	out := []durable.RunRecord{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, wrap("list runs", err)
		}
		out = append(out, r)
	}
	return out, wrap("list runs", rows.Err())
}

// FindActiveRun implements durable.RunStore.
func (s *Store) FindActiveRun(ctx context.Context, threadID string) (durable.RunRecord, bool, error) {
	rs, err := s.list(ctx, `thread_id = $1 AND status = 'running' ORDER BY started_at DESC, id DESC LIMIT 1`, threadID)
	if err != nil || len(rs) == 0 {
		return durable.RunRecord{}, false, err
	}
	return rs[0], true, nil
}

// ListByThread implements durable.RunStore.
func (s *Store) ListByThread(ctx context.Context, threadID string) ([]durable.RunRecord, error) {
	return s.list(ctx, `thread_id = $1 ORDER BY started_at, id`, threadID)
}

// ListReclaimable implements durable.RunStore.
func (s *Store) ListReclaimable(ctx context.Context, now time.Time, ttl time.Duration) ([]durable.RunRecord, error) {
	return s.list(ctx, `status = 'running' AND detached_since IS NOT NULL AND detached_since <= $1 ORDER BY detached_since, id`,
		now.Add(-ttl).UnixMilli())
}
