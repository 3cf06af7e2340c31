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

// SaveThread implements durable.ThreadStore.
func (s *Store) SaveThread(ctx context.Context, t durable.Thread) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	var interrupts *string
	if t.Interrupts != nil {
		interrupts = durable.Ptr(string(t.Interrupts))
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO goai_threads (thread_id, messages, run_id, interrupts, updated_at, owner) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (thread_id) DO UPDATE SET messages = excluded.messages, run_id = excluded.run_id,
			interrupts = excluded.interrupts, updated_at = excluded.updated_at, owner = excluded.owner`,
		t.ThreadID, string(t.Messages), t.RunID, interrupts, t.UpdatedAt.UnixMilli(), t.Owner)
	return wrap("save thread", err)
}

// LoadThread implements durable.ThreadStore.
func (s *Store) LoadThread(ctx context.Context, threadID string) (durable.Thread, bool, error) {
	if err := s.checkOpen(); err != nil {
		return durable.Thread{}, false, err
	}
	var (
		t          = durable.Thread{ThreadID: threadID}
		msgs       string
		interrupts *string
		updated    int64
	)
	err := s.pool.QueryRow(ctx, `SELECT messages, run_id, interrupts, updated_at, owner FROM goai_threads WHERE thread_id = $1`, threadID).
		Scan(&msgs, &t.RunID, &interrupts, &updated, &t.Owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return durable.Thread{}, false, nil
	}
	if err != nil {
		return durable.Thread{}, false, wrap("load thread", err)
	}
	t.Messages = json.RawMessage(msgs)
	if interrupts != nil {
		t.Interrupts = json.RawMessage(*interrupts)
	}
	t.UpdatedAt = time.UnixMilli(updated).UTC()
	return t, true, nil
}

// ThreadOwner implements durable.ThreadOwners: the owner column alone,
// without the transcript.
func (s *Store) ThreadOwner(ctx context.Context, threadID string) (string, bool, error) {
	if err := s.checkOpen(); err != nil {
		return "", false, err
	}
	// coalesce evaluates the runs' query, which orders every run of the
	// thread, only when there is no saved thread.
	var owner *string
	err := s.pool.QueryRow(ctx, `SELECT coalesce(
			(SELECT owner FROM goai_threads WHERE thread_id = $1),
			(SELECT owner FROM goai_runs WHERE thread_id = $1 ORDER BY started_at, id LIMIT 1))`, threadID).Scan(&owner)
	if err != nil {
		return "", false, wrap("thread owner", err)
	}
	if owner == nil {
		return "", false, nil
	}
	return *owner, true, nil
}

// ClaimThread implements durable.ThreadClaimer. The insert is the claim:
// of concurrent claims (from any replica) the thread's unique key lets
// one insert, and the others read its owner once it has committed.
func (s *Store) ClaimThread(ctx context.Context, threadID, owner string) (string, error) {
	if !durable.ValidRunID(threadID) {
		return "", fmt.Errorf("durable/postgres: invalid thread id %q", threadID)
	}
	if err := s.checkOpen(); err != nil {
		return "", err
	}
	// A conflicting thread or run can be deleted between the two
	// statements (a run pruned by retention): then claim afresh.
	for range 3 {
		tag, err := s.pool.Exec(ctx, `INSERT INTO goai_threads (thread_id, messages, run_id, updated_at, owner)
			SELECT $1, '[]', '', $2, $3 WHERE NOT EXISTS (SELECT 1 FROM goai_runs WHERE thread_id = $1)
			ON CONFLICT (thread_id) DO NOTHING`, threadID, s.opts.Now().UnixMilli(), owner)
		if err != nil {
			return "", wrap("claim thread", err)
		}
		if tag.RowsAffected() == 1 {
			return owner, nil
		}
		got, found, err := s.ThreadOwner(ctx, threadID)
		if err != nil || found {
			return got, err
		}
	}
	return "", fmt.Errorf("durable/postgres: claim thread %q: its owner keeps disappearing", threadID)
}
