package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/goai-sdk/goai/durable"
)

func (s *Store) beatTx(tx *writeTx, runID string) error {
	if _, err := tx.Stmt(s.st.leaseBeat).Exec(runID, s.opts.Now().UnixMilli()); err != nil {
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
	return s.execUrgent(ctx, oneRun(claim.RunID), func(tx *writeTx) error {
		r, ok, err := s.getTx(tx, claim.RunID)
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
// op; they go ahead of the queued writes (execUrgent). A heartbeat
// changes no log state and no epoch, so the writer keeps what it
// remembers of the runs.
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
	err = s.execUrgent(ctx, noRun, func(tx *writeTx) error {
		lost = lost[:0]
		res, err := tx.Stmt(s.st.leaseBeatAll).Exec(s.opts.Now().UnixMilli(), string(enc))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == int64(len(claims)) {
			return err
		}
		rows, err := tx.Stmt(s.st.leaseLost).Query(string(enc))
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
	return list(ctx, s.st.listStale, s.opts.Now().Add(-olderThan).UnixMilli())
}
