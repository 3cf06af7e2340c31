package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/jackc/pgx/v5"
)

// Heartbeats are stamped and compared with the database's clock, so that
// replicas with skewed clocks agree on which producers are alive.
const dbNowMillis = `(extract(epoch from clock_timestamp()) * 1000)::bigint`

const upsertLease = `INSERT INTO goai_leases (run_id, heartbeat_at) VALUES ($1, ` + dbNowMillis + `)
	ON CONFLICT (run_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`

// ClaimIf implements durable.Leaser.
func (s *Store) ClaimIf(ctx context.Context, runID string, epoch int64) (durable.Claim, error) {
	if err := s.checkOpen(); err != nil {
		return durable.Claim{}, err
	}
	var c durable.Claim
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var status string
		var cur *int64
		err := tx.QueryRow(ctx, `SELECT status, driver_epoch FROM goai_runs WHERE run_id = $1 FOR UPDATE`, runID).Scan(&status, &cur)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return &durable.ClaimError{RunID: runID, Reason: durable.ClaimUnknown}
		case err != nil:
			return err
		case durable.RunStatus(status).Terminal():
			return &durable.ClaimError{RunID: runID, Reason: durable.ClaimTerminal}
		}
		var have int64
		if cur != nil {
			have = *cur
		}
		if have != epoch {
			return &durable.ClaimError{RunID: runID, Reason: durable.ClaimTaken}
		}
		if _, err := tx.Exec(ctx, `UPDATE goai_runs SET driver_epoch = $2 WHERE run_id = $1`, runID, have+1); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, upsertLease, runID); err != nil {
			return err
		}
		c = durable.Claim{RunID: runID, Epoch: have + 1}
		return nil
	})
	var ce *durable.ClaimError
	if errors.As(err, &ce) {
		return durable.Claim{}, err
	}
	return c, wrap("claim", err)
}

// StartRun implements durable.RunStarter: the insert, the read of the
// run (locked, in a statement of its own, so it sees a concurrent creator
// that committed while the insert waited) and the claim, in one
// transaction.
func (s *Store) StartRun(ctx context.Context, rec durable.RunRecord) (durable.RunRecord, durable.Claim, bool, error) {
	rec, err := durable.CheckNewRun(rec)
	if err != nil {
		return durable.RunRecord{}, durable.Claim{}, false, err
	}
	if err := s.checkOpen(); err != nil {
		return rec, durable.Claim{}, false, err
	}
	var (
		out     durable.RunRecord
		claim   durable.Claim
		claimed bool
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		claimed = false
		if _, err := tx.Exec(ctx, `INSERT INTO goai_runs (`+runColumns+`) VALUES `+values13+`
			ON CONFLICT (run_id) DO NOTHING`, runArgs(rec)...); err != nil {
			return err
		}
		var err error
		out, err = scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+` FROM goai_runs WHERE run_id = $1 FOR UPDATE`, rec.RunID))
		if err != nil {
			return err
		}
		if out.Owner != rec.Owner || out.Status != durable.StatusRunning || (out.CancelRequested != nil && *out.CancelRequested) ||
			(out.DriverEpoch != nil && *out.DriverEpoch != 0) {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE goai_runs SET driver_epoch = 1 WHERE run_id = $1`, rec.RunID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, upsertLease, rec.RunID); err != nil {
			return err
		}
		out.DriverEpoch = durable.Ptr(int64(1))
		claim, claimed = durable.Claim{RunID: rec.RunID, Epoch: 1}, true
		return nil
	})
	if err != nil {
		return durable.RunRecord{}, durable.Claim{}, false, wrap("start run", err)
	}
	return out, claim, claimed, nil
}

// Heartbeat implements durable.Leaser.
func (s *Store) Heartbeat(ctx context.Context, claim durable.Claim) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var cur *int64
		err := tx.QueryRow(ctx, `SELECT driver_epoch FROM goai_runs WHERE run_id = $1 FOR SHARE`, claim.RunID).Scan(&cur)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("%w: %q", durable.ErrRunNotFound, claim.RunID)
		case err != nil:
			return err
		}
		var have int64
		if cur != nil {
			have = *cur
		}
		if have != claim.Epoch {
			return &durable.ClaimLostError{RunID: claim.RunID, Held: claim.Epoch, Observed: have}
		}
		_, err = tx.Exec(ctx, upsertLease, claim.RunID)
		return err
	})
	if errors.Is(err, durable.ErrClaimLost) || errors.Is(err, durable.ErrRunNotFound) {
		return err
	}
	return wrap("heartbeat", err)
}

// HeartbeatAll implements durable.BatchLeaser: one transaction for every
// claim, holding each run's row as Heartbeat does, so a concurrent claim
// either precedes the check or follows the heartbeat.
func (s *Store) HeartbeatAll(ctx context.Context, claims []durable.Claim) ([]string, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if len(claims) == 0 {
		return nil, nil
	}
	ids := make([]string, len(claims))
	held := make(map[string]int64, len(claims))
	for i, c := range claims {
		ids[i] = c.RunID
		held[c.RunID] = c.Epoch
	}
	var lost []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		lost = lost[:0]
		rows, err := tx.Query(ctx, `SELECT run_id, coalesce(driver_epoch, 0) FROM goai_runs
			WHERE run_id = ANY($1) ORDER BY run_id FOR SHARE`, ids)
		if err != nil {
			return err
		}
		var beat []string
		for rows.Next() {
			var id string
			var epoch int64
			if err := rows.Scan(&id, &epoch); err != nil {
				rows.Close()
				return err
			}
			if epoch == held[id] {
				beat = append(beat, id)
			} else {
				lost = append(lost, id)
			}
		}
		if rows.Close(); rows.Err() != nil {
			return rows.Err()
		}
		if len(beat) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO goai_leases (run_id, heartbeat_at)
			SELECT id, `+dbNowMillis+` FROM unnest($1::text[]) AS id
			ON CONFLICT (run_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`, beat)
		return err
	})
	if err != nil {
		return nil, wrap("heartbeats", err)
	}
	return lost, nil
}

// ListStale implements durable.Leaser.
func (s *Store) ListStale(ctx context.Context, olderThan time.Duration) ([]durable.RunRecord, error) {
	const seen = `coalesce((SELECT l.heartbeat_at FROM goai_leases l WHERE l.run_id = goai_runs.run_id), started_at)`
	return s.list(ctx, `status = 'running' AND `+seen+` <= `+dbNowMillis+` - $1 ORDER BY `+seen+`, id`,
		olderThan.Milliseconds())
}
