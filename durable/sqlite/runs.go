package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/goai-sdk/goai/durable"
)

const runColumns = `run_id, thread_id, status, started_at, finished_at, error_message, error_code, usage,
	sandbox_key, detached_since, cancel_requested, driver_epoch, owner`

// runMutableColumns are the columns an update writes (durable.RunPatch's):
// SQLite rewrites the entries of every index on a column that an UPDATE
// sets, changed or not, so leaving out the run id, thread, start and owner
// spares the run id's index a write of its random-key page.
const runMutableColumns = `status, finished_at, error_message, error_code, usage,
	sandbox_key, detached_since, cancel_requested, driver_epoch`

type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner) (durable.RunRecord, error) {
	var (
		r                            durable.RunRecord
		status                       string
		started                      int64
		finished, detached, epoch    sql.NullInt64
		errMsg, errCode, usage, sbox sql.NullString
		cancel                       sql.NullBool
	)
	if err := sc.Scan(&r.RunID, &r.ThreadID, &status, &started, &finished, &errMsg, &errCode, &usage,
		&sbox, &detached, &cancel, &epoch, &r.Owner); err != nil {
		return r, err
	}
	r.Status = durable.RunStatus(status)
	r.StartedAt = time.UnixMilli(started).UTC()
	if finished.Valid {
		r.FinishedAt = durable.Ptr(time.UnixMilli(finished.Int64).UTC())
	}
	if errMsg.Valid {
		r.Error = &durable.RunError{Message: errMsg.String, Code: errCode.String}
	}
	if usage.Valid {
		r.Usage = json.RawMessage(usage.String)
	}
	if sbox.Valid {
		r.SandboxKey = durable.Ptr(sbox.String)
	}
	if detached.Valid {
		r.DetachedSince = durable.Ptr(time.UnixMilli(detached.Int64).UTC())
	}
	if cancel.Valid {
		r.CancelRequested = durable.Ptr(cancel.Bool)
	}
	if epoch.Valid {
		r.DriverEpoch = durable.Ptr(epoch.Int64)
	}
	return r, nil
}

// runArgs returns the column values of r in runColumns order.
func runArgs(r durable.RunRecord) []any {
	m := mutableArgs(r)
	return []any{r.RunID, r.ThreadID, m[0], r.StartedAt.UnixMilli(), m[1], m[2], m[3], m[4],
		m[5], m[6], m[7], m[8], r.Owner}
}

// mutableArgs returns the column values of r in runMutableColumns order.
func mutableArgs(r durable.RunRecord) [9]any {
	var finished, detached, epoch, errMsg, errCode, usage, sbox, cancel any
	if r.FinishedAt != nil {
		finished = r.FinishedAt.UnixMilli()
	}
	if r.Error != nil {
		errMsg = r.Error.Message
		if r.Error.Code != "" {
			errCode = r.Error.Code
		}
	}
	if r.Usage != nil {
		usage = string(r.Usage)
	}
	if r.SandboxKey != nil {
		sbox = *r.SandboxKey
	}
	if r.DetachedSince != nil {
		detached = r.DetachedSince.UnixMilli()
	}
	if r.CancelRequested != nil {
		cancel = *r.CancelRequested
	}
	if r.DriverEpoch != nil {
		epoch = *r.DriverEpoch
	}
	return [9]any{string(r.Status), finished, errMsg, errCode, usage, sbox, detached, cancel, epoch}
}

func (s *Store) getTx(tx *writeTx, runID string) (durable.RunRecord, bool, error) {
	r, err := scanRun(tx.Stmt(s.st.runGet).QueryRow(runID))
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("durable/sqlite: %w", err)
	}
	return r, true, nil
}

func (s *Store) putTx(tx *writeTx, r durable.RunRecord) error {
	m := mutableArgs(r)
	_, err := tx.Stmt(s.st.runUpdate).Exec(append(m[:], r.RunID)...)
	if err != nil {
		return fmt.Errorf("durable/sqlite: update run: %w", err)
	}
	return nil
}

// CreateOrResume implements durable.RunStore.
func (s *Store) CreateOrResume(ctx context.Context, rec durable.RunRecord) (durable.RunRecord, error) {
	if err := durable.CheckRunID(rec.RunID); err != nil {
		return rec, err
	}
	if rec.Status == "" {
		rec.Status = durable.StatusRunning
	}
	if !rec.Status.Valid() {
		return durable.RunRecord{}, fmt.Errorf("durable: invalid run status %q", rec.Status)
	}
	var out durable.RunRecord
	err := s.exec(ctx, oneRun(rec.RunID), func(tx *writeTx) error {
		if _, err := tx.Stmt(s.st.runInsert).Exec(runArgs(rec)...); err != nil {
			return fmt.Errorf("durable/sqlite: create run: %w", err)
		}
		var err error
		out, _, err = s.getTx(tx, rec.RunID)
		return err
	})
	return out, err
}

// Get implements durable.RunStore.
func (s *Store) Get(ctx context.Context, runID string) (durable.RunRecord, error) {
	r, err := scanRun(s.st.readRun.QueryRowContext(ctx, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%w: %q", durable.ErrRunNotFound, runID)
	}
	if err != nil {
		return r, fmt.Errorf("durable/sqlite: get run: %w", err)
	}
	return r, nil
}

// CancelRequested implements durable.CancelLister, in one query (the ids
// go in as one JSON array).
func (s *Store) CancelRequested(ctx context.Context, runIDs []string) ([]string, error) {
	if s.isClosed() {
		return nil, durable.ErrStoreClosed
	}
	ids, err := json.Marshal(runIDs)
	if err != nil {
		return nil, err
	}
	rows, err := s.st.readCancels.QueryContext(ctx, string(ids))
	if err != nil {
		return nil, fmt.Errorf("durable/sqlite: cancel requests: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("durable/sqlite: cancel requests: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable/sqlite: cancel requests: %w", err)
	}
	return out, nil
}

// Update implements durable.RunStore.
func (s *Store) Update(ctx context.Context, runID string, patch durable.RunPatch) error {
	if err := patch.Validate(); err != nil {
		return err
	}
	return s.exec(ctx, oneRun(runID), func(tx *writeTx) error {
		r, ok, err := s.getTx(tx, runID)
		if err != nil || !ok {
			return err
		}
		if err := patch.CheckEpoch(r); err != nil {
			return err
		}
		patch.Apply(&r)
		return s.putTx(tx, r)
	})
}

// Claim implements durable.RunStore.
func (s *Store) Claim(ctx context.Context, runID string) (durable.Claim, error) {
	return s.claim(ctx, runID, nil)
}

// claim moves a live run's driver epoch one up in one transaction. With
// ifEpoch (ClaimIf) the run must be at that epoch, and the claim is also
// the run's first heartbeat.
func (s *Store) claim(ctx context.Context, runID string, ifEpoch *int64) (durable.Claim, error) {
	var c durable.Claim
	if err := s.checkFile(); err != nil {
		return c, err
	}
	err := s.exec(ctx, oneRun(runID), func(tx *writeTx) error {
		// Whoever held the run before may have appended to it from
		// another process: read its tail afresh.
		s.jt.forget(runID)
		r, ok, err := s.getTx(tx, runID)
		switch {
		case err != nil:
			return err
		case !ok:
			return &durable.ClaimError{RunID: runID, Reason: durable.ClaimUnknown}
		case r.Status.Terminal():
			return &durable.ClaimError{RunID: runID, Reason: durable.ClaimTerminal}
		}
		var cur int64
		if r.DriverEpoch != nil {
			cur = *r.DriverEpoch
		}
		if ifEpoch != nil && cur != *ifEpoch {
			return &durable.ClaimError{RunID: runID, Reason: durable.ClaimTaken}
		}
		if _, err := tx.Stmt(s.st.runEpoch).Exec(cur+1, runID); err != nil {
			return fmt.Errorf("durable/sqlite: claim: %w", err)
		}
		c = durable.Claim{RunID: runID, Epoch: cur + 1}
		if ifEpoch == nil {
			return nil
		}
		return s.beatTx(tx, runID)
	})
	return c, err
}

// list runs one of the statements that list run records (listSQL).
func list(ctx context.Context, st *sql.Stmt, args ...any) ([]durable.RunRecord, error) {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("durable/sqlite: list runs: %w", err)
	}
	defer rows.Close()
	out := []durable.RunRecord{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("durable/sqlite: list runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable/sqlite: list runs: %w", err)
	}
	return out, nil
}

// FindActiveRun implements durable.RunStore.
func (s *Store) FindActiveRun(ctx context.Context, threadID string) (durable.RunRecord, bool, error) {
	rs, err := list(ctx, s.st.listActive, threadID)
	if err != nil || len(rs) == 0 {
		return durable.RunRecord{}, false, err
	}
	return rs[0], true, nil
}

// ListByThread implements durable.RunStore.
func (s *Store) ListByThread(ctx context.Context, threadID string) ([]durable.RunRecord, error) {
	return list(ctx, s.st.listByThread, threadID)
}

// ListReclaimable implements durable.RunStore.
func (s *Store) ListReclaimable(ctx context.Context, now time.Time, ttl time.Duration) ([]durable.RunRecord, error) {
	return list(ctx, s.st.listReclaimable, now.Add(-ttl).UnixMilli())
}
