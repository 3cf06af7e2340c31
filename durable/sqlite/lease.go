package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/goai-sdk/goai/durable"
)

func (s *Store) beatTx(tx *sql.Tx, runID string) error {
	if _, err := tx.Exec(`INSERT INTO goai_leases (run_id, heartbeat_at) VALUES (?, ?)
		ON CONFLICT (run_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`, runID, s.opts.Now().UnixMilli()); err != nil {
		return fmt.Errorf("durable/sqlite: heartbeat: %w", err)
	}
	return nil
}

// ClaimIf implements durable.Leaser.
func (s *Store) ClaimIf(ctx context.Context, runID string, epoch int64) (durable.Claim, error) {
	return s.claim(ctx, runID, &epoch)
}

// Heartbeat implements durable.Leaser.
func (s *Store) Heartbeat(ctx context.Context, claim durable.Claim) error {
	return s.exec(ctx, oneRun(claim.RunID), func(tx *sql.Tx) error {
		r, ok, err := getTx(tx, claim.RunID)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("%w: %q", durable.ErrRunNotFound, claim.RunID)
		}
		var cur int64
		if r.DriverEpoch != nil {
			cur = *r.DriverEpoch
		}
		if cur != claim.Epoch {
			return &durable.ClaimLostError{RunID: claim.RunID, Held: claim.Epoch, Observed: cur}
		}
		return s.beatTx(tx, claim.RunID)
	})
}

// ListStale implements durable.Leaser.
func (s *Store) ListStale(ctx context.Context, olderThan time.Duration) ([]durable.RunRecord, error) {
	const seen = `coalesce((SELECT l.heartbeat_at FROM goai_leases l WHERE l.run_id = goai_runs.run_id), started_at)`
	return s.list(ctx, `status = 'running' AND `+seen+` <= ? ORDER BY `+seen+`, id`,
		s.opts.Now().Add(-olderThan).UnixMilli())
}
