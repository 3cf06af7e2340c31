package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/goai-sdk/goai/durable"
)

var _ durable.RequestStore = (*Store)(nil)

// SaveRequest implements durable.RequestStore.
func (s *Store) SaveRequest(ctx context.Context, runID string, body []byte) error {
	if err := durable.CheckRunID(runID); err != nil {
		return err
	}
	return s.execLogFree(ctx, oneRun(runID), func(tx *writeTx) error {
		if _, err := tx.Stmt(s.st.requestPut).Exec(runID, body); err != nil {
			return fmt.Errorf("durable/sqlite: save request: %w", err)
		}
		return nil
	})
}

// LoadRequest implements durable.RequestStore.
func (s *Store) LoadRequest(ctx context.Context, runID string) ([]byte, error) {
	if s.isClosed() {
		return nil, durable.ErrStoreClosed
	}
	var body []byte
	err := s.st.readRequest.QueryRowContext(ctx, runID).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("durable/sqlite: request of run %q: %w", runID, durable.ErrRunNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("durable/sqlite: load request: %w", err)
	}
	return body, nil
}
