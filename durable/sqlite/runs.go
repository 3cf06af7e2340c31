package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	tx.cancels = true // every mutable column, cancel_requested too
	_, err := tx.Stmt(s.st.runUpdate).Exec(append(m[:], r.RunID)...)
	if err != nil {
		return fmt.Errorf("durable/sqlite: update run: %w", err)
	}
	return nil
}

// CreateOrResume implements durable.RunStore.
func (s *Store) CreateOrResume(ctx context.Context, rec durable.RunRecord) (durable.RunRecord, error) {
	rec, err := durable.CheckNewRun(rec)
	if err != nil {
		return durable.RunRecord{}, err
	}
	var out durable.RunRecord
	err = s.exec(ctx, oneRun(rec.RunID), func(tx *writeTx) error {
		var err error
		out, err = s.createTx(tx, rec)
		return err
	})
	return out, err
}

// insertTx records rec unless its run exists, and reports whether it did.
func (s *Store) insertTx(tx *writeTx, rec durable.RunRecord) (bool, error) {
	s.addingThread(rec.ThreadID)
	tx.cancels = tx.cancels || rec.CancelRequested != nil
	res, err := tx.Stmt(s.st.runInsert).Exec(runArgs(rec)...)
	if err != nil {
		return false, fmt.Errorf("durable/sqlite: create run: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("durable/sqlite: create run: %w", err)
	}
	return n == 1, nil
}

// createTx records rec unless its run exists, and returns the run as
// stored.
func (s *Store) createTx(tx *writeTx, rec durable.RunRecord) (durable.RunRecord, error) {
	inserted, err := s.insertTx(tx, rec)
	if err != nil {
		return durable.RunRecord{}, err
	}
	if inserted {
		// Inserted: the row is rec, and reading it back (a query and a
		// scan of thirteen columns, on the writer) would say so.
		return asStored(rec), nil
	}
	out, _, err := s.getTx(tx, rec.RunID)
	return out, err
}

// StartRun implements durable.RunStarter.
func (s *Store) StartRun(ctx context.Context, rec durable.RunRecord) (durable.RunRecord, durable.Claim, bool, error) {
	rec, err := durable.CheckNewRun(rec)
	if err != nil {
		return durable.RunRecord{}, durable.Claim{}, false, err
	}
	if err := s.checkFile(); err != nil {
		return durable.RunRecord{}, durable.Claim{}, false, err
	}
	var (
		out     durable.RunRecord
		claim   durable.Claim
		claimed bool
	)
	// A new run is inserted claimed (epoch 1), and its start is its first
	// heartbeat (leaseSeen): one statement where a claim and a lease row
	// took two more, a fifth of the writer's work for a short run, and the
	// lease row a WAL page of its own. A start time more than a second
	// from the store's clock gets its heartbeat row.
	claimable := rec.Status == durable.StatusRunning &&
		(rec.DriverEpoch == nil || *rec.DriverEpoch == 0) &&
		(rec.CancelRequested == nil || !*rec.CancelRequested)
	fresh := rec
	fresh.DriverEpoch = durable.Ptr(int64(1))
	skew := s.opts.Now().Sub(rec.StartedAt)
	beat := skew > time.Second || skew < -time.Second
	err = s.execLogFree(ctx, oneRun(rec.RunID), func(tx *writeTx) error {
		claimed = false
		var err error
		if claimable {
			var inserted bool
			if inserted, err = s.insertTx(tx, fresh); err != nil {
				return err
			}
			if inserted {
				s.jt.forget(rec.RunID)
				s.jt.setStarted(rec.RunID, 1)
				out = asStored(fresh)
				claim, claimed = durable.Claim{RunID: rec.RunID, Epoch: 1}, true
				if beat {
					return s.beatTx(tx, rec.RunID)
				}
				return nil
			}
			out, _, err = s.getTx(tx, rec.RunID) // it exists: as stored
		} else {
			out, err = s.createTx(tx, rec)
		}
		if err != nil {
			return err
		}
		if out.Owner != rec.Owner || out.Status != durable.StatusRunning || (out.CancelRequested != nil && *out.CancelRequested) {
			return nil
		}
		s.jt.forget(rec.RunID)
		var epoch int64
		switch err := tx.Stmt(s.st.runClaimIf).QueryRow(rec.RunID, 0).Scan(&epoch); {
		case errors.Is(err, sql.ErrNoRows):
			return nil // another driver holds it
		case err != nil:
			return fmt.Errorf("durable/sqlite: claim: %w", err)
		}
		claim, claimed = durable.Claim{RunID: rec.RunID, Epoch: epoch}, true
		out.DriverEpoch = durable.Ptr(epoch)
		return s.beatTx(tx, rec.RunID)
	})
	return out, claim, claimed, err
}

// asStored returns r as a read of its row returns it: times at the
// millisecond precision of the columns, in UTC, and nothing shared with r.
func asStored(r durable.RunRecord) durable.RunRecord {
	r.StartedAt = durable.Millis(r.StartedAt)
	if r.FinishedAt != nil {
		r.FinishedAt = durable.Ptr(durable.Millis(*r.FinishedAt))
	}
	if r.DetachedSince != nil {
		r.DetachedSince = durable.Ptr(durable.Millis(*r.DetachedSince))
	}
	if r.Error != nil {
		r.Error = durable.Ptr(*r.Error)
	}
	if r.Usage != nil {
		r.Usage = append(json.RawMessage{}, r.Usage...)
	}
	if r.SandboxKey != nil {
		r.SandboxKey = durable.Ptr(*r.SandboxKey)
	}
	if r.CancelRequested != nil {
		r.CancelRequested = durable.Ptr(*r.CancelRequested)
	}
	if r.DriverEpoch != nil {
		r.DriverEpoch = durable.Ptr(*r.DriverEpoch)
	}
	return r
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
// go in as one JSON array). With Options.OneProcess it asks only about
// the runs it has not found without a cancel since the last write of one
// (cancelMemo).
func (s *Store) CancelRequested(ctx context.Context, runIDs []string) ([]string, error) {
	if s.isClosed() {
		return nil, durable.ErrStoreClosed
	}
	if s.lock == nil {
		return s.queryCancels(ctx, runIDs)
	}
	gen := s.cancels.writes.Load()
	ask := s.cancels.unknown(gen, runIDs)
	if len(ask) == 0 {
		return []string{}, nil
	}
	out, err := s.queryCancels(ctx, ask)
	if err != nil {
		return nil, err
	}
	s.cancels.found(gen, ask, out)
	return out, nil
}

// queryCancels is CancelRequested's query.
func (s *Store) queryCancels(ctx context.Context, runIDs []string) ([]string, error) {
	s.cancelQueries.Add(1)
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
	shape, cols, args := patchArgs(patch)
	args = append(args, runID)
	if shape.fenced {
		args = append(args, patch.IfEpoch)
	}
	return s.execLogFree(ctx, oneRun(runID), func(tx *writeTx) error {
		tx.cancels = tx.cancels || !patch.CancelRequested.Untouched()
		if shape.columns != 0 {
			st, err := s.patchStmt(shape, cols)
			if err != nil {
				return err
			}
			res, err := tx.Stmt(st).Exec(args...)
			if err != nil {
				return fmt.Errorf("durable/sqlite: update run: %w", err)
			}
			if n, err := res.RowsAffected(); err == nil && n == 1 {
				return nil
			}
			// No row: the run is unknown (nothing to update), or the
			// fence names another epoch. The read below says which.
		}
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

// patchShape is which columns a run patch sets (a bit per column, in
// patchArgs' order) and whether it is fenced by an epoch: one UPDATE
// statement per shape.
type patchShape struct {
	columns uint16
	fenced  bool
}

// patchArgs returns p's shape, the columns it sets and their values, in
// the order of its statement (patchStmt): the values Apply would leave in
// the record and putTx would write.
func patchArgs(p durable.RunPatch) (patchShape, []string, []any) {
	shape := patchShape{fenced: p.IfEpoch > 0}
	cols := make([]string, 0, 9)
	args := make([]any, 0, 11)
	bit := uint16(1)
	column := func(touched bool, name string, value any) {
		if touched {
			shape.columns |= bit
			cols = append(cols, name)
			args = append(args, value)
		}
		bit <<= 1
	}
	millis := func(pt durable.Patch[time.Time]) any {
		if t, ok := pt.IsSet(); ok {
			return t.UnixMilli()
		}
		return nil
	}
	// set is v when the patch sets it (ok), else nil: a clear.
	set := func(v any, ok bool) any {
		if ok {
			return v
		}
		return nil
	}
	status, _ := p.Status.IsSet()
	column(!p.Status.Untouched(), "status", string(status))
	column(!p.FinishedAt.Untouched(), "finished_at", millis(p.FinishedAt))
	var errMsg, errCode any
	if e, ok := p.Error.IsSet(); ok {
		errMsg = e.Message
		if e.Code != "" {
			errCode = e.Code
		}
	}
	column(!p.Error.Untouched(), "error_message", errMsg)
	column(!p.Error.Untouched(), "error_code", errCode)
	var usage any
	if u, ok := p.Usage.IsSet(); ok && u != nil {
		usage = string(u)
	}
	column(!p.Usage.Untouched(), "usage", usage)
	column(!p.SandboxKey.Untouched(), "sandbox_key", set(p.SandboxKey.IsSet()))
	column(!p.DetachedSince.Untouched(), "detached_since", millis(p.DetachedSince))
	column(!p.CancelRequested.Untouched(), "cancel_requested", set(p.CancelRequested.IsSet()))
	column(!p.DriverEpoch.Untouched(), "driver_epoch", set(p.DriverEpoch.IsSet()))
	return shape, cols, args
}

// patchStmt returns the writer's UPDATE of cols for patches of shape,
// preparing it the first time. Its parameters are the columns' values,
// then the run id and the fence's epoch. Only the set columns are
// written: SQLite rewrites the index entries of every column an UPDATE
// sets.
func (s *Store) patchStmt(shape patchShape, cols []string) (*sql.Stmt, error) {
	if st, ok := s.st.patches[shape]; ok {
		return st, nil
	}
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = fmt.Sprintf("%s = ?%d", c, i+1)
	}
	q := fmt.Sprintf("UPDATE goai_runs SET %s WHERE run_id = ?%d", strings.Join(set, ", "), len(cols)+1)
	if shape.fenced {
		q += fmt.Sprintf(" AND coalesce(driver_epoch, 0) = ?%d", len(cols)+2)
	}
	st, err := s.wc.PrepareContext(context.Background(), q)
	if err != nil {
		return nil, fmt.Errorf("durable/sqlite: preparing a run update: %w", err)
	}
	if s.st.patches == nil {
		s.st.patches = make(map[patchShape]*sql.Stmt)
	}
	s.st.patches[shape] = st
	s.st.writer[st] = true
	return st, nil
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
		var row *sql.Row
		if ifEpoch == nil {
			row = tx.Stmt(s.st.runClaim).QueryRow(runID)
		} else {
			row = tx.Stmt(s.st.runClaimIf).QueryRow(runID, *ifEpoch)
		}
		var epoch int64
		switch err := row.Scan(&epoch); {
		case errors.Is(err, sql.ErrNoRows):
			return s.whyNoClaim(tx, runID)
		case err != nil:
			return fmt.Errorf("durable/sqlite: claim: %w", err)
		}
		c = durable.Claim{RunID: runID, Epoch: epoch}
		if ifEpoch == nil {
			return nil
		}
		return s.beatTx(tx, runID)
	})
	return c, err
}

// terminalStatuses is the SQL list of the statuses of ended runs
// (durable.RunStatus.Terminal).
const terminalStatuses = `('` + string(durable.StatusCompleted) + `', '` + string(durable.StatusFailed) + `', '` + string(durable.StatusAborted) + `')`

// whyNoClaim is the error of a claim of runID that changed no row.
func (s *Store) whyNoClaim(tx *writeTx, runID string) error {
	r, ok, err := s.getTx(tx, runID)
	switch {
	case err != nil:
		return err
	case !ok:
		return &durable.ClaimError{RunID: runID, Reason: durable.ClaimUnknown}
	case r.Status.Terminal():
		return &durable.ClaimError{RunID: runID, Reason: durable.ClaimTerminal}
	}
	return &durable.ClaimError{RunID: runID, Reason: durable.ClaimTaken}
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
