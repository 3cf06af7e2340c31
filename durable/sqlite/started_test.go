package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// The first append to a run this store started creates its log without
// reading the log's state or the run's epoch; anything else (a log that was
// there, closed or open; a fence naming another epoch; a run created and
// claimed apart) is asked of the database, as before.
func TestFirstAppendOfAStartedRun(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "goai.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	start := func(id string) {
		t.Helper()
		if _, _, claimed, err := s.StartRun(ctx, durable.RunRecord{RunID: id, ThreadID: "t", StartedAt: time.Now()}); err != nil || !claimed {
			t.Fatalf("StartRun(%s): claimed %v, %v", id, claimed, err)
		}
	}
	queries := func() int64 { return s.stateQueries.Load() }
	read := func(id string) []string {
		t.Helper()
		es, err := s.Snapshot(ctx, id)
		if err != nil {
			t.Fatalf("Snapshot(%s): %v", id, err)
		}
		var out []string
		for _, e := range es {
			out = append(out, string(e.Data))
		}
		return out
	}

	start("fresh")
	q := queries()
	if _, err := s.AppendWith(ctx, "fresh", [][]byte{[]byte("a"), []byte("b")}, durable.AppendOptions{Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "fresh", [][]byte{[]byte("c")}); err != nil {
		t.Fatal(err)
	}
	if n := queries() - q; n != 0 {
		t.Fatalf("%d state queries for the appends of a run the store started; want 0", n)
	}
	if got := read("fresh"); len(got) != 3 || got[0] != "a" || got[2] != "c" {
		t.Fatalf("the started run's log holds %q", got)
	}

	// A fence naming another epoch stores nothing and creates no log.
	start("fenced")
	var lost *durable.ClaimLostError
	if _, err := s.AppendWith(ctx, "fenced", [][]byte{[]byte("x")}, durable.AppendOptions{Epoch: 7}); !errors.As(err, &lost) || lost.Observed != 1 {
		t.Fatalf("an append fenced at epoch 7 of a run at 1: %v", err)
	}
	var logs int
	if err := s.r.QueryRow(`SELECT count(*) FROM goai_logs WHERE run_id = 'fenced'`).Scan(&logs); err != nil || logs != 0 {
		t.Fatalf("a refused append left %d logs (%v)", logs, err)
	}

	// A log closed before its run was started stays closed.
	if _, err := s.Append(ctx, "closed", [][]byte{[]byte("old")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx, "closed"); err != nil {
		t.Fatal(err)
	}
	start("closed")
	q = queries()
	if _, err := s.Append(ctx, "closed", [][]byte{[]byte("new")}); !errors.Is(err, durable.ErrLogClosed) {
		t.Fatalf("an append to a closed log of a started run: %v", err)
	}
	if queries()-q != 1 {
		t.Fatalf("a log that was there was not asked about (%d queries)", queries()-q)
	}

	// An open log from before the start goes on from its tail.
	if _, err := s.Append(ctx, "open", [][]byte{[]byte("1")}); err != nil {
		t.Fatal(err)
	}
	start("open")
	if _, err := s.AppendWith(ctx, "open", [][]byte{[]byte("2")}, durable.AppendOptions{Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if got := read("open"); len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Fatalf("the open log holds %q", got)
	}

	// A run created and claimed apart is asked about once.
	if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "apart", ThreadID: "t", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimIf(ctx, "apart", 0); err != nil {
		t.Fatal(err)
	}
	q = queries()
	if _, err := s.AppendWith(ctx, "apart", [][]byte{[]byte("z")}, durable.AppendOptions{Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if queries()-q != 1 {
		t.Fatalf("%d state queries for a run claimed apart; want 1", queries()-q)
	}
}
