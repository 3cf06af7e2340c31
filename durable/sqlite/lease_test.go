package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/sqlite"
)

// claimedRuns creates n running runs, run-00000 on, and claims each.
func claimedRuns(tb testing.TB, s *sqlite.Store, n int) []durable.Claim {
	tb.Helper()
	ctx := context.Background()
	claims := make([]durable.Claim, n)
	for i := range claims {
		id := fmt.Sprintf("run-%05d", i)
		if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: id, ThreadID: "t", StartedAt: time.Now()}); err != nil {
			tb.Fatal(err)
		}
		c, err := s.ClaimIf(ctx, id, 0)
		if err != nil {
			tb.Fatal(err)
		}
		claims[i] = c
	}
	return claims
}

// BenchmarkHeartbeats renews the leases of many running runs, as a server
// producing them does every heartbeat interval: one HeartbeatAll against
// one Heartbeat per run. ns/lease is the cost per lease renewed.
func BenchmarkHeartbeats(b *testing.B) {
	ctx := context.Background()
	for _, runs := range []int{100, 10_000} {
		s := open(b, filepath.Join(b.TempDir(), "durable.db"))
		claims := claimedRuns(b, s, runs)
		b.Run(fmt.Sprintf("all/runs=%d", runs), func(b *testing.B) {
			for b.Loop() {
				if lost, err := s.HeartbeatAll(ctx, claims); err != nil || len(lost) != 0 {
					b.Fatal(lost, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*runs), "ns/lease")
		})
		b.Run(fmt.Sprintf("each/runs=%d", runs), func(b *testing.B) {
			for b.Loop() {
				for _, c := range claims {
					if err := s.Heartbeat(ctx, c); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*runs), "ns/lease")
		})
	}
}

// More claims than one writer op renews: every op's lost claims are
// reported.
func TestHeartbeatAllAcrossOps(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	claims := claimedRuns(t, s, 600)
	for _, id := range []string{"run-00010", "run-00300", "run-00599"} {
		if _, err := s.Claim(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	lost, err := s.HeartbeatAll(ctx, claims)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Sort(lost); fmt.Sprint(lost) != "[run-00010 run-00300 run-00599]" {
		t.Fatalf("lost %v", lost)
	}
}

// A run StartRun creates is claimed by its insert, and its start is its
// first heartbeat: no lease row is written for it, and it goes stale a
// lease after its start like a run whose claim beat then. A start time
// far from the store's clock gets a heartbeat of the clock's time.
func TestStartRunBeatsWithItsStart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "goai.db")
	now := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s := openWith(t, path, &sqlite.Options{Now: clock})
	start := func(id string, at time.Time) {
		t.Helper()
		rec, claim, claimed, err := s.StartRun(ctx, durable.RunRecord{RunID: id, ThreadID: "t-" + id, StartedAt: at, Owner: "u"})
		if err != nil || !claimed || claim.Epoch != 1 || rec.DriverEpoch == nil || *rec.DriverEpoch != 1 {
			t.Fatalf("StartRun(%s) = %+v, %+v, %v, %v", id, rec, claim, claimed, err)
		}
		if got, err := s.Get(ctx, id); err != nil || got.DriverEpoch == nil || *got.DriverEpoch != 1 || got.Status != durable.StatusRunning {
			t.Fatalf("stored %s: %+v, %v", id, got, err)
		}
	}
	start("fresh", now)
	start("old", now.Add(-time.Hour)) // a start an hour back: beaten now
	start("ahead", now.Add(time.Hour))

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	leased := queryStrings(t, db, `SELECT run_id FROM goai_leases ORDER BY run_id`)
	if want := []string{"ahead", "old"}; !slices.Equal(leased, want) {
		t.Fatalf("lease rows for %v, want %v", leased, want)
	}

	stale := func(after time.Duration) []string {
		t.Helper()
		rs, err := s.ListStale(ctx, after)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.RunID)
		}
		return ids
	}
	if got := stale(time.Minute); len(got) != 0 {
		t.Fatalf("stale a minute after their start: %v", got)
	}
	now = now.Add(2 * time.Minute)
	if got := stale(time.Minute); len(got) != 3 {
		t.Fatalf("stale two minutes after start or heartbeat: %v, want all three", got)
	}
	// A second claim fences the first as ever.
	if _, err := s.ClaimIf(ctx, "fresh", 0); err == nil {
		t.Fatal("a claim at epoch 0 of a run started at epoch 1 was granted")
	}
	if c, err := s.ClaimIf(ctx, "fresh", 1); err != nil || c.Epoch != 2 {
		t.Fatalf("ClaimIf(fresh, 1) = %+v, %v", c, err)
	}
	if got := stale(time.Minute); slices.Contains(got, "fresh") {
		t.Fatalf("a run whose claim just beat is stale: %v", got)
	}
}
