package durabletest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// Leases runs the producer-liveness conformance suite for stores that
// implement durable.Leaser (compare-and-set claims, fenced heartbeats,
// stale-run listing); RunStore calls it. A store that is not a Leaser skips.
func Leases(t *testing.T, newStore func(t *testing.T) durable.Store) {
	sub := func(name string, f func(t *testing.T, s durable.Store, l durable.Leaser)) {
		t.Run(name, func(t *testing.T) {
			leakCheck(t)
			s := newStore(t)
			l, ok := s.(durable.Leaser)
			if !ok {
				t.Skip("store is not a durable.Leaser")
			}
			f(t, s, l)
		})
	}
	reason := func(t *testing.T, err error, want durable.ClaimReason) {
		t.Helper()
		var ce *durable.ClaimError
		if !errors.As(err, &ce) || ce.Reason != want || !errors.Is(err, durable.ErrClaimNotAcquired) {
			t.Fatalf("ClaimIf: %v, want a *ClaimError %q", err, want)
		}
	}
	epochOf := func(t *testing.T, s durable.Store, run string) int64 {
		t.Helper()
		r := mustGet(t, s, run)
		if r.DriverEpoch == nil {
			return 0
		}
		return *r.DriverEpoch
	}

	sub("lease_claim_if_is_compare_and_set", func(t *testing.T, s durable.Store, l durable.Leaser) {
		ctx := ctxT(t)
		_, err := l.ClaimIf(ctx, "missing", 0)
		reason(t, err, durable.ClaimUnknown)
		mustCreate(t, s, durable.RunRecord{RunID: "r", ThreadID: "t", StartedAt: ms(1)})
		c, err := l.ClaimIf(ctx, "r", 0)
		if err != nil || c.Epoch != 1 || c.RunID != "r" {
			t.Fatalf("first ClaimIf(0) = %+v, %v; want epoch 1", c, err)
		}
		_, err = l.ClaimIf(ctx, "r", 0)
		reason(t, err, durable.ClaimTaken)
		if e := epochOf(t, s, "r"); e != 1 {
			t.Fatalf("refused ClaimIf changed the epoch to %d", e)
		}
		c2, err := l.ClaimIf(ctx, "r", 1)
		if err != nil || c2.Epoch != 2 {
			t.Fatalf("ClaimIf(1) = %+v, %v; want epoch 2", c2, err)
		}
		// The successor's claim fences the predecessor's appends.
		if _, err := s.AppendWith(ctx, "r", evs(0, 1), durable.AppendOptions{Epoch: c.Epoch}); !errors.Is(err, durable.ErrClaimLost) {
			t.Fatalf("predecessor append after ClaimIf: %v, want ErrClaimLost", err)
		}
		mustUpdate(t, s, "r", durable.RunPatch{Status: durable.Set(durable.StatusFailed)})
		_, err = l.ClaimIf(ctx, "r", 2)
		reason(t, err, durable.ClaimTerminal)
		if e := epochOf(t, s, "r"); e != 2 {
			t.Fatalf("ClaimIf of a terminal run changed the epoch to %d", e)
		}
	})

	sub("lease_concurrent_claim_if_has_one_winner", func(t *testing.T, s durable.Store, l durable.Leaser) {
		ctx := ctxT(t)
		mustCreate(t, s, durable.RunRecord{RunID: "r", ThreadID: "t", StartedAt: ms(1)})
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, errs[i] = l.ClaimIf(ctx, "r", 0) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else {
				reason(t, err, durable.ClaimTaken)
			}
		}
		if won != 1 || epochOf(t, s, "r") != 1 {
			t.Fatalf("%d of %d concurrent ClaimIf(0) won, epoch %d; want 1 and 1", won, n, epochOf(t, s, "r"))
		}
	})

	sub("lease_start_run_records_and_claims_at_once", func(t *testing.T, s durable.Store, l durable.Leaser) {
		st, ok := l.(durable.RunStarter)
		if !ok {
			t.Skip("the store does not implement durable.RunStarter")
		}
		ctx := ctxT(t)
		start := func(rec durable.RunRecord, wantClaimed bool) durable.RunRecord {
			t.Helper()
			got, c, claimed, err := st.StartRun(ctx, rec)
			if err != nil || claimed != wantClaimed || (claimed && (c.RunID != rec.RunID || c.Epoch != 1)) {
				t.Fatalf("StartRun(%q) = claim %+v, claimed %v, %v; want claimed %v (epoch 1)", rec.RunID, c, claimed, err, wantClaimed)
			}
			return got
		}
		rec := durable.RunRecord{RunID: "r", ThreadID: "t", StartedAt: ms(1).Add(300 * time.Microsecond), Owner: "alice"}
		got := start(rec, true)
		stored := mustGet(t, s, "r")
		equalRec(t, "a started run as returned", got, durable.RunRecord{RunID: "r", ThreadID: "t", Status: durable.StatusRunning, StartedAt: ms(1), DriverEpoch: durable.Ptr(int64(1))})
		equalRec(t, "a started run as read", stored, got)
		if stored.DriverEpoch == nil || *stored.DriverEpoch != 1 || stored.Owner != "alice" || got.Owner != "alice" {
			t.Fatalf("after StartRun the run reads %s, owner %q; want epoch 1, alice's", recString(stored), stored.Owner)
		}
		// The same request again, another principal's, a cancelled run, an
		// ended run: recorded as they are, never claimed.
		if again := start(rec, false); again.Owner != "alice" || epochOf(t, s, "r") != 1 {
			t.Fatalf("a second StartRun moved the epoch to %d", epochOf(t, s, "r"))
		}
		if other := start(durable.RunRecord{RunID: "r", ThreadID: "t", StartedAt: ms(2), Owner: "bob"}, false); other.Owner != "alice" {
			t.Fatalf("StartRun by bob returned owner %q; want alice's run as stored", other.Owner)
		}
		mustCreate(t, s, durable.RunRecord{RunID: "c", ThreadID: "t", StartedAt: ms(1), Owner: "alice", CancelRequested: durable.Ptr(true)})
		start(durable.RunRecord{RunID: "c", ThreadID: "t", StartedAt: ms(1), Owner: "alice"}, false)
		mustCreate(t, s, durable.RunRecord{RunID: "d", ThreadID: "t", StartedAt: ms(1), Owner: "alice", Status: durable.StatusCompleted})
		start(durable.RunRecord{RunID: "d", ThreadID: "t", StartedAt: ms(1), Owner: "alice"}, false)
		if epochOf(t, s, "c") != 0 || epochOf(t, s, "d") != 0 {
			t.Fatalf("a cancelled or ended run was claimed: epochs %d, %d", epochOf(t, s, "c"), epochOf(t, s, "d"))
		}
		// Of concurrent starts of one new run, one claims it.
		const n = 8
		claimed := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, _, claimed[i], errs[i] = st.StartRun(ctx, durable.RunRecord{RunID: "race", ThreadID: "t", StartedAt: ms(1), Owner: "alice"})
			})
		}
		wg.Wait()
		won := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("concurrent StartRun: %v", errs[i])
			}
			if claimed[i] {
				won++
			}
		}
		if won != 1 || epochOf(t, s, "race") != 1 {
			t.Fatalf("%d of %d concurrent StartRun claimed, epoch %d; want 1 and 1", won, n, epochOf(t, s, "race"))
		}
	})

	sub("lease_heartbeat_is_fenced", func(t *testing.T, s durable.Store, l durable.Leaser) {
		ctx := ctxT(t)
		if err := l.Heartbeat(ctx, durable.Claim{RunID: "missing", Epoch: 1}); !errors.Is(err, durable.ErrRunNotFound) {
			t.Fatalf("Heartbeat(unknown run): %v, want ErrRunNotFound", err)
		}
		mustCreate(t, s, durable.RunRecord{RunID: "r", ThreadID: "t", StartedAt: ms(1)})
		c, err := l.ClaimIf(ctx, "r", 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Heartbeat(ctx, c); err != nil {
			t.Fatalf("Heartbeat of the holder: %v", err)
		}
		if _, err := s.Claim(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		err = l.Heartbeat(ctx, c)
		var lost *durable.ClaimLostError
		if !errors.As(err, &lost) || lost.Held != 1 || lost.Observed != 2 {
			t.Fatalf("Heartbeat of a superseded claim: %v, want ClaimLostError held 1 observed 2", err)
		}
	})

	sub("lease_heartbeats_renewed_in_one_call", func(t *testing.T, s durable.Store, l durable.Leaser) {
		bl, ok := l.(durable.BatchLeaser)
		if !ok {
			t.Skip("store is not a durable.BatchLeaser")
		}
		ctx := ctxT(t)
		// Three ancient runs with no heartbeat: all stale. Claim (unlike
		// ClaimIf) records no heartbeat, so "taken" stays stale.
		for _, id := range []string{"held", "unclaimed", "taken"} {
			mustCreate(t, s, durable.RunRecord{RunID: id, ThreadID: "t", StartedAt: ms(1)})
		}
		if _, err := s.Claim(ctx, "held"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, "taken"); err != nil {
			t.Fatal(err)
		}
		if lost, err := bl.HeartbeatAll(ctx, nil); err != nil || len(lost) != 0 {
			t.Fatalf("HeartbeatAll(none) = %v, %v", lost, err)
		}
		lost, err := bl.HeartbeatAll(ctx, []durable.Claim{
			{RunID: "held", Epoch: 1}, {RunID: "unclaimed", Epoch: 0},
			{RunID: "taken", Epoch: 0}, {RunID: "missing", Epoch: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(lost) != "[taken]" {
			t.Fatalf("HeartbeatAll lost = %v, want [taken] (the unknown run is left out)", lost)
		}
		rs, err := l.ListStale(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(rs); fmt.Sprint(got) != "[taken]" {
			t.Fatalf("ListStale(1h) after HeartbeatAll = %v, want [taken]: held claims are renewed, a lost one is not", got)
		}
		// Renewed like Heartbeat: a later claim still fences the holder.
		if _, err := s.Claim(ctx, "held"); err != nil {
			t.Fatal(err)
		}
		if lost, err := bl.HeartbeatAll(ctx, []durable.Claim{{RunID: "held", Epoch: 1}}); err != nil || fmt.Sprint(lost) != "[held]" {
			t.Fatalf("HeartbeatAll of a superseded claim = %v, %v; want [held]", lost, err)
		}
	})

	sub("lease_list_stale", func(t *testing.T, s durable.Store, l durable.Leaser) {
		ctx := ctxT(t)
		recent := time.Now()
		mustCreate(t, s, durable.RunRecord{RunID: "old-never-beat", ThreadID: "t", StartedAt: ms(1)})
		mustCreate(t, s, durable.RunRecord{RunID: "old-beating", ThreadID: "t", StartedAt: ms(2)})
		mustCreate(t, s, durable.RunRecord{RunID: "young", ThreadID: "t", StartedAt: recent})
		mustCreate(t, s, durable.RunRecord{RunID: "done", ThreadID: "t", StartedAt: ms(3), Status: durable.StatusCompleted})
		mustCreate(t, s, durable.RunRecord{RunID: "paused", ThreadID: "t", StartedAt: ms(4), Status: durable.StatusInterrupted})
		time.Sleep(5 * time.Millisecond)
		if _, err := l.ClaimIf(ctx, "old-beating", 0); err != nil {
			t.Fatal(err)
		}
		list := func(d time.Duration) []string {
			t.Helper()
			rs, err := l.ListStale(ctx, d)
			if err != nil {
				t.Fatalf("ListStale(%v): %v", d, err)
			}
			return ids(rs)
		}
		if got, want := list(time.Hour), []string{"old-never-beat"}; !slices.Equal(got, want) {
			t.Fatalf("ListStale(1h) = %v, want %v (a claim is a heartbeat; young, terminal and interrupted runs are not stale)", got, want)
		}
		time.Sleep(5 * time.Millisecond)
		if got, want := list(0), []string{"old-never-beat", "young", "old-beating"}; !slices.Equal(got, want) {
			t.Fatalf("ListStale(0) = %v, want %v (inclusive, oldest first)", got, want)
		}
		mustUpdate(t, s, "old-never-beat", durable.RunPatch{Status: durable.Set(durable.StatusFailed)})
		if got := list(time.Hour); len(got) != 0 {
			t.Fatalf("ListStale(1h) after finishing the stale run = %v, want none", got)
		}
	})
}
