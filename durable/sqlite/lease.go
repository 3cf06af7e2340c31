package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
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

// HeartbeatAll implements durable.BatchLeaser, in writer ops of at most
// heartbeatsPerOp claims, so that appends are not held up behind one long
// op. A heartbeat changes no log state and no epoch, so the writer keeps
// what it remembers of the runs.
func (s *Store) HeartbeatAll(ctx context.Context, claims []durable.Claim) ([]string, error) {
	var lost []string
	for len(claims) > 0 {
		part := claims[:min(len(claims), heartbeatsPerOp)]
		l, err := s.heartbeatSome(ctx, part)
		if err != nil {
			return nil, err
		}
		lost = append(lost, l...)
		claims = claims[len(part):]
	}
	return lost, nil
}

// heartbeatsPerOp bounds the claims one writer op renews: about a
// millisecond of the writer's time.
const heartbeatsPerOp = 256

// heartbeatSome renews claims in one writer op. The upsert names the runs it
// renewed; only when some were not renewed does a second query tell the
// lost ones from the unknown ones.
func (s *Store) heartbeatSome(ctx context.Context, claims []durable.Claim) ([]string, error) {
	type held struct {
		RunID string `json:"r"`
		Epoch int64  `json:"e"`
	}
	list := make([]held, len(claims))
	for i, c := range claims {
		list[i] = held{c.RunID, c.Epoch}
	}
	enc, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	var lost []string
	err = s.exec(ctx, noRun, func(tx *sql.Tx) error {
		lost = lost[:0]
		res, err := tx.Exec(`INSERT INTO goai_leases (run_id, heartbeat_at)
			SELECT r.run_id, ? FROM json_each(?) c JOIN goai_runs r ON r.run_id = c.value->>'r'
			WHERE coalesce(r.driver_epoch, 0) = c.value->>'e'
			ON CONFLICT (run_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`, s.opts.Now().UnixMilli(), string(enc))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == int64(len(claims)) {
			return err
		}
		rows, err := tx.Query(`SELECT r.run_id FROM json_each(?) c JOIN goai_runs r ON r.run_id = c.value->>'r'
			WHERE coalesce(r.driver_epoch, 0) <> c.value->>'e'`, string(enc))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			lost = append(lost, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("durable/sqlite: heartbeats: %w", err)
	}
	return lost, nil
}

// ListStale implements durable.Leaser.
func (s *Store) ListStale(ctx context.Context, olderThan time.Duration) ([]durable.RunRecord, error) {
	const seen = `coalesce((SELECT l.heartbeat_at FROM goai_leases l WHERE l.run_id = goai_runs.run_id), started_at)`
	return s.list(ctx, `status = 'running' AND `+seen+` <= ? ORDER BY `+seen+`, id`,
		s.opts.Now().Add(-olderThan).UnixMilli())
}
