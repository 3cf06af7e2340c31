package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/goai-sdk/goai/durable"
)

var _ durable.RequestStore = (*Store)(nil)

// SaveRequest implements durable.RequestStore.
func (s *Store) SaveRequest(ctx context.Context, runID string, body []byte) error {
	if err := durable.CheckRunID(runID); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO goai_run_requests (run_id, body) VALUES ($1, $2)
		ON CONFLICT (run_id) DO UPDATE SET body = excluded.body`, runID, body)
	return wrap("save request", err)
}

// LoadRequest implements durable.RequestStore.
func (s *Store) LoadRequest(ctx context.Context, runID string) ([]byte, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	var body []byte
	err := s.pool.QueryRow(ctx, `SELECT body FROM goai_run_requests WHERE run_id = $1`, runID).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("durable/postgres: request of run %q: %w", runID, durable.ErrRunNotFound)
	}
	return body, wrap("load request", err)
}
