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

// SaveThread implements durable.ThreadStore.
func (s *Store) SaveThread(ctx context.Context, t durable.Thread) error {
	if err := t.Validate(); err != nil {
		return err
	}
	var interrupts any
	if t.Interrupts != nil {
		interrupts = string(t.Interrupts)
	}
	return s.execLogFree(ctx, noRun, func(tx *writeTx) error {
		s.addingThread(t.ThreadID)
		_, err := tx.Stmt(s.st.threadPut).Exec(t.ThreadID, string(t.Messages), t.RunID, interrupts, t.UpdatedAt.UnixMilli(), t.Owner)
		if err != nil {
			return fmt.Errorf("durable/sqlite: save thread: %w", err)
		}
		return nil
	})
}

// LoadThread implements durable.ThreadStore.
func (s *Store) LoadThread(ctx context.Context, threadID string) (durable.Thread, bool, error) {
	if s.isClosed() {
		return durable.Thread{}, false, durable.ErrStoreClosed
	}
	var (
		t          = durable.Thread{ThreadID: threadID}
		msgs       string
		interrupts sql.NullString
		updated    int64
	)
	err := s.st.readThread.QueryRowContext(ctx, threadID).
		Scan(&msgs, &t.RunID, &interrupts, &updated, &t.Owner)
	if errors.Is(err, sql.ErrNoRows) {
		return durable.Thread{}, false, nil
	}
	if err != nil {
		return durable.Thread{}, false, fmt.Errorf("durable/sqlite: load thread: %w", err)
	}
	t.Messages = json.RawMessage(msgs)
	if interrupts.Valid {
		t.Interrupts = json.RawMessage(interrupts.String)
	}
	t.UpdatedAt = time.UnixMilli(updated).UTC()
	return t, true, nil
}

// ThreadOwner implements durable.ThreadOwners: the owner column alone,
// without the transcript.
func (s *Store) ThreadOwner(ctx context.Context, threadID string) (string, bool, error) {
	if s.isClosed() {
		return "", false, durable.ErrStoreClosed
	}
	var gen uint64
	if s.owners != nil {
		owner, found, known, g := s.owners.lookup(threadID)
		if known {
			return owner, found, nil
		}
		gen = g
	}
	s.ownerQueries.Add(1)
	var owner sql.NullString
	if err := s.st.readOwner.QueryRowContext(ctx, threadID).Scan(&owner); err != nil {
		return "", false, fmt.Errorf("durable/sqlite: thread owner: %w", err)
	}
	if s.owners != nil && owner.Valid {
		s.owners.remember(threadID, owner.String, gen)
	}
	return owner.String, owner.Valid, nil
}

// addingThread tells the owners' cache, if any, that the writer's
// transaction is about to give thread a row, a run or an owner.
func (s *Store) addingThread(thread string) {
	if s.owners != nil {
		s.owners.adding(thread)
	}
}

// ClaimThread implements durable.ThreadClaimer. It runs on the writer, so
// no other claim, save or run can come between its read and its insert.
func (s *Store) ClaimThread(ctx context.Context, threadID, owner string) (string, error) {
	if !durable.ValidRunID(threadID) {
		return "", fmt.Errorf("durable/sqlite: invalid thread id %q", threadID)
	}
	var got string
	err := s.exec(ctx, noRun, func(tx *writeTx) error {
		s.addingThread(threadID)
		res, err := tx.Stmt(s.st.threadClaim).Exec(threadID, s.opts.Now().UnixMilli(), owner)
		if err != nil {
			return fmt.Errorf("durable/sqlite: claim thread: %w", err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			got = owner
			return nil
		}
		var had sql.NullString
		if err := tx.Stmt(s.st.ownerGet).QueryRow(threadID).Scan(&had); err != nil {
			return fmt.Errorf("durable/sqlite: claim thread: the owner: %w", err)
		}
		if !had.Valid {
			// Impossible in the writer's transaction: the insert found a
			// thread or a run.
			return fmt.Errorf("durable/sqlite: claim thread %q: neither claimed nor owned", threadID)
		}
		got = had.String
		return nil
	})
	return got, err
}
