package sqlite_test

import (
	"context"
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
