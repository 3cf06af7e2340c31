package server

import (
	"context"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// A read that found no run retries only for a run starting that is the
// reader's own: a run created since by another principal is not served.
func TestStartingElsewhereIsTheOwners(t *testing.T) {
	store := durable.NewMemory(nil)
	h := ChatHandler(Config{Store: store})
	ctx := context.Background()
	if _, err := store.CreateOrResume(ctx, durable.RunRecord{RunID: "r", ThreadID: "t", Status: durable.StatusRunning, StartedAt: time.Now(), Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	if h.startingElsewhere(ctx, "bob", "r", deadline) {
		t.Fatal("bob's read waits for alice's run")
	}
	if !h.startingElsewhere(ctx, "alice", "r", deadline) {
		t.Fatal("alice's read does not wait for her own run starting")
	}
}
