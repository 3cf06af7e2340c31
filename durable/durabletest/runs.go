package durabletest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

var t0 = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func mustCreate(t *testing.T, s durable.RunStore, rec durable.RunRecord) durable.RunRecord {
	t.Helper()
	got, err := s.CreateOrResume(ctxT(t), rec)
	if err != nil {
		t.Fatalf("CreateOrResume(%q): %v", rec.RunID, err)
	}
	return got
}

func mustGet(t *testing.T, s durable.RunStore, id string) durable.RunRecord {
	t.Helper()
	got, err := s.Get(ctxT(t), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return got
}

func mustUpdate(t *testing.T, s durable.RunStore, id string, p durable.RunPatch) {
	t.Helper()
	if err := s.Update(ctxT(t), id, p); err != nil {
		t.Fatalf("Update(%q): %v", id, err)
	}
}

func recString(r durable.RunRecord) string {
	s := fmt.Sprintf("{%s thread=%s status=%s started=%d", r.RunID, r.ThreadID, r.Status, r.StartedAt.UnixMilli())
	if r.FinishedAt != nil {
		s += fmt.Sprintf(" finished=%d", r.FinishedAt.UnixMilli())
	}
	if r.Error != nil {
		s += fmt.Sprintf(" error=%+v", *r.Error)
	}
	if r.Usage != nil {
		s += " usage=" + string(r.Usage)
	}
	if r.SandboxKey != nil {
		s += " sandboxKey=" + *r.SandboxKey
	}
	if r.DetachedSince != nil {
		s += fmt.Sprintf(" detachedSince=%d", r.DetachedSince.UnixMilli())
	}
	if r.CancelRequested != nil {
		s += fmt.Sprintf(" cancelRequested=%v", *r.CancelRequested)
	}
	if r.DriverEpoch != nil {
		s += fmt.Sprintf(" driverEpoch=%d", *r.DriverEpoch)
	}
	return s + "}"
}

func equalRec(t *testing.T, what string, got, want durable.RunRecord) {
	t.Helper()
	if g, w := recString(got), recString(want); g != w {
		t.Fatalf("%s:\n got  %s\n want %s", what, g, w)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

func ids(rs []durable.RunRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.RunID
	}
	return out
}

// countingStore counts the appends that reach the store.
type countingStore struct {
	durable.Store
	appends atomic.Int64
}

func (c *countingStore) AppendWith(ctx context.Context, runID string, batch [][]byte, opts durable.AppendOptions) ([]string, error) {
	c.appends.Add(1)
	return c.Store.AppendWith(ctx, runID, batch, opts)
}

// RunStore runs the run-store and claim conformance suite (docs/durable.md §8, items 29-36).
// newStore must return a new, empty store on each call and register its own
// cleanup.
func RunStore(t *testing.T, newStore func(t *testing.T) durable.Store, opts *Options) {
	sub := func(name string, f func(t *testing.T, s durable.Store)) {
		t.Run(name, func(t *testing.T) {
			leakCheck(t)
			f(t, newStore(t))
		})
	}

	sub("29_create_or_resume_returns_existing_unchanged", func(t *testing.T, s durable.Store) {
		if _, err := s.Get(ctxT(t), "r1"); !errors.Is(err, durable.ErrRunNotFound) {
			t.Fatalf("Get(missing): %v, want ErrRunNotFound", err)
		}
		want := durable.RunRecord{RunID: "r1", ThreadID: "t1", Status: durable.StatusRunning, StartedAt: ms(1)}
		got := mustCreate(t, s, durable.RunRecord{RunID: "r1", ThreadID: "t1", StartedAt: ms(1)})
		equalRec(t, "created (status defaults to running)", got, want)
		equalRec(t, "get", mustGet(t, s, "r1"), want)
		got = mustCreate(t, s, durable.RunRecord{RunID: "r1", ThreadID: "other", StartedAt: ms(99)})
		equalRec(t, "resume with other thread/startedAt", got, want)

		mustUpdate(t, s, "r1", durable.RunPatch{SandboxKey: durable.Set("sb")})
		want.SandboxKey = durable.Ptr("sb")
		got = mustCreate(t, s, durable.RunRecord{RunID: "r1", ThreadID: "other", StartedAt: ms(99)})
		equalRec(t, "resume after update", got, want)

		mustUpdate(t, s, "r1", durable.RunPatch{Status: durable.Set(durable.StatusCompleted), FinishedAt: durable.Set(ms(50))})
		want.Status, want.FinishedAt = durable.StatusCompleted, durable.Ptr(ms(50))
		got = mustCreate(t, s, durable.RunRecord{RunID: "r1", ThreadID: "t1", StartedAt: ms(1), Status: durable.StatusRunning})
		equalRec(t, "terminal run is not revived", got, want)
		equalRec(t, "terminal run is not revived (get)", mustGet(t, s, "r1"), want)

		// What CreateOrResume returns of a new run is what Get reads of it.
		sub := ms(5).Add(123 * time.Microsecond)
		rich := durable.RunRecord{RunID: "r2", ThreadID: "t2", Status: durable.StatusInterrupted, StartedAt: sub,
			FinishedAt: durable.Ptr(sub), Error: &durable.RunError{Message: "m"}, Usage: json.RawMessage(`{"u":1}`),
			SandboxKey: durable.Ptr("k"), DetachedSince: durable.Ptr(sub), CancelRequested: durable.Ptr(false), DriverEpoch: durable.Ptr(int64(2)), Owner: "o"}
		created := mustCreate(t, s, rich)
		stored := mustGet(t, s, "r2")
		equalRec(t, "a new run as created and as read", created, stored)
		if !created.StartedAt.Equal(stored.StartedAt) || !created.FinishedAt.Equal(*stored.FinishedAt) || created.Owner != "o" || stored.Owner != "o" {
			t.Fatalf("times or owner differ: created %v %v %q, read %v %v %q", created.StartedAt, *created.FinishedAt, created.Owner, stored.StartedAt, *stored.FinishedAt, stored.Owner)
		}

		if _, err := s.CreateOrResume(ctxT(t), durable.RunRecord{RunID: "r2", ThreadID: "t", StartedAt: ms(1), Status: "bogus"}); err == nil {
			t.Fatal("CreateOrResume accepted an invalid status")
		}
		// Sub-millisecond precision is dropped, consistently.
		got = mustCreate(t, s, durable.RunRecord{RunID: "r3", ThreadID: "t", StartedAt: ms(7).Add(123456)})
		if !got.StartedAt.Equal(ms(7)) || !mustGet(t, s, "r3").StartedAt.Equal(ms(7)) {
			t.Fatalf("startedAt %v, want %v", got.StartedAt, ms(7))
		}
	})

	sub("owner_is_recorded_and_never_updated", func(t *testing.T, s durable.Store) {
		got := mustCreate(t, s, durable.RunRecord{RunID: "r1", ThreadID: "t1", StartedAt: ms(1), Owner: "alice"})
		if got.Owner != "alice" || mustGet(t, s, "r1").Owner != "alice" {
			t.Fatalf("owner %q, want alice", got.Owner)
		}
		if got := mustCreate(t, s, durable.RunRecord{RunID: "r1", ThreadID: "t1", StartedAt: ms(1), Owner: "bob"}); got.Owner != "alice" {
			t.Fatalf("a second create changed the owner to %q", got.Owner)
		}
		mustUpdate(t, s, "r1", durable.RunPatch{Status: durable.Set(durable.StatusCompleted), FinishedAt: durable.Set(ms(2))})
		if got := mustGet(t, s, "r1"); got.Owner != "alice" {
			t.Fatalf("an update lost the owner: %q", got.Owner)
		}
		if got := mustCreate(t, s, durable.RunRecord{RunID: "r2", ThreadID: "t1", StartedAt: ms(1)}); got.Owner != "" {
			t.Fatalf("no owner reads back as %q", got.Owner)
		}
	})

	sub("cancel_requests_listed_in_one_call", func(t *testing.T, s durable.Store) {
		cl, ok := s.(durable.CancelLister)
		if !ok {
			t.Skip("store does not implement durable.CancelLister")
		}
		// A poll between every write, as a server's producers poll while
		// cancels are recorded: no write may go unseen by the next poll.
		all := []string{"c1", "c2", "c3", "c4", "unknown"}
		poll := func(want string) {
			t.Helper()
			for range 2 { // the same answer twice: nothing changed in between
				got, err := cl.CancelRequested(ctxT(t), all)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Sort(got); fmt.Sprint(got) != want {
					t.Fatalf("CancelRequested = %v, want %s", got, want)
				}
			}
		}
		for _, id := range []string{"c1", "c2", "c3"} {
			mustCreate(t, s, durable.RunRecord{RunID: id, ThreadID: "t", StartedAt: ms(0)})
		}
		poll("[]")
		for _, id := range []string{"c1", "c3"} {
			if err := s.Update(ctxT(t), id, durable.RunPatch{CancelRequested: durable.Set(true)}); err != nil {
				t.Fatal(err)
			}
		}
		poll("[c1 c3]")
		if err := s.Update(ctxT(t), "c3", durable.RunPatch{CancelRequested: durable.Clear[bool]()}); err != nil {
			t.Fatal(err)
		}
		poll("[c1]")
		// A run created with a cancel, after polls that found it unknown.
		mustCreate(t, s, durable.RunRecord{RunID: "c4", ThreadID: "t", StartedAt: ms(0), CancelRequested: durable.Ptr(true)})
		poll("[c1 c4]")
		// A patch of several columns, one of them the cancel.
		if err := s.Update(ctxT(t), "c2", durable.RunPatch{Status: durable.Set(durable.StatusRunning), CancelRequested: durable.Set(true)}); err != nil {
			t.Fatal(err)
		}
		poll("[c1 c2 c4]")
		if got, err := cl.CancelRequested(ctxT(t), []string{"c3"}); err != nil || len(got) != 0 {
			t.Fatalf("CancelRequested of a run with none = %v, %v", got, err)
		}
	})

	sub("30_update_is_a_partial_patch_with_explicit_clears", func(t *testing.T, s durable.Store) {
		mustUpdate(t, s, "missing", durable.RunPatch{Status: durable.Set(durable.StatusFailed)})
		if _, err := s.Get(ctxT(t), "missing"); !errors.Is(err, durable.ErrRunNotFound) {
			t.Fatalf("Update of an unknown run created it: %v", err)
		}
		want := mustCreate(t, s, durable.RunRecord{RunID: "r", ThreadID: "t", StartedAt: ms(1)})
		if want.SandboxKey != nil || want.DetachedSince != nil || want.CancelRequested != nil || want.DriverEpoch != nil {
			t.Fatalf("fresh run has durable fields set: %s", recString(want))
		}
		full := durable.RunPatch{
			SandboxKey:      durable.Set("key-1"),
			DetachedSince:   durable.Set(ms(10)),
			CancelRequested: durable.Set(true),
			DriverEpoch:     durable.Set(int64(3)),
			Error:           durable.Set(durable.RunError{Message: "boom", Code: "E42"}),
			Usage:           durable.Set(json.RawMessage(`{"inputTokens":5}`)),
		}
		mustUpdate(t, s, "r", full)
		full.Apply(&want)
		equalRec(t, "all fields round-trip", mustGet(t, s, "r"), want)

		mustUpdate(t, s, "r", durable.RunPatch{DriverEpoch: durable.Set(int64(7))})
		want.DriverEpoch = durable.Ptr(int64(7))
		equalRec(t, "driverEpoch overwrite", mustGet(t, s, "r"), want)

		mustUpdate(t, s, "r", durable.RunPatch{}) // nothing
		equalRec(t, "empty patch", mustGet(t, s, "r"), want)

		clears := []struct {
			name string
			p    durable.RunPatch
			f    func(r *durable.RunRecord)
		}{
			{"sandboxKey", durable.RunPatch{SandboxKey: durable.Clear[string]()}, func(r *durable.RunRecord) { r.SandboxKey = nil }},
			{"detachedSince", durable.RunPatch{DetachedSince: durable.Clear[time.Time]()}, func(r *durable.RunRecord) { r.DetachedSince = nil }},
			{"cancelRequested", durable.RunPatch{CancelRequested: durable.Clear[bool]()}, func(r *durable.RunRecord) { r.CancelRequested = nil }},
			{"driverEpoch", durable.RunPatch{DriverEpoch: durable.Clear[int64]()}, func(r *durable.RunRecord) { r.DriverEpoch = nil }},
			{"error", durable.RunPatch{Error: durable.Clear[durable.RunError]()}, func(r *durable.RunRecord) { r.Error = nil }},
			{"usage", durable.RunPatch{Usage: durable.Clear[json.RawMessage]()}, func(r *durable.RunRecord) { r.Usage = nil }},
		}
		for _, c := range clears {
			mustUpdate(t, s, "r", c.p)
			c.f(&want)
			equalRec(t, "after clearing "+c.name, mustGet(t, s, "r"), want)
		}
		// Setting no usage clears it; a finish time is kept to the
		// millisecond, and can be cleared.
		mustUpdate(t, s, "r", durable.RunPatch{Usage: durable.Set(json.RawMessage(`{"a":1}`)), FinishedAt: durable.Set(ms(30).Add(999 * time.Microsecond))})
		mustUpdate(t, s, "r", durable.RunPatch{Usage: durable.Set[json.RawMessage](nil)})
		if got := mustGet(t, s, "r"); got.Usage != nil || got.FinishedAt == nil || !got.FinishedAt.Equal(ms(30)) {
			t.Fatalf("after setting a sub-millisecond finish and no usage: %s", recString(got))
		}
		mustUpdate(t, s, "r", durable.RunPatch{FinishedAt: durable.Clear[time.Time]()})
		if got := mustGet(t, s, "r"); got.FinishedAt != nil {
			t.Fatalf("after clearing finishedAt: %s", recString(got))
		}
		mustUpdate(t, s, "r", durable.RunPatch{CancelRequested: durable.Set(false), DriverEpoch: durable.Set(int64(0))})
		got := mustGet(t, s, "r")
		if got.CancelRequested == nil || *got.CancelRequested || got.DriverEpoch == nil || *got.DriverEpoch != 0 {
			t.Fatalf("cancelRequested=false / driverEpoch=0 read back as %s", recString(got))
		}
		mustUpdate(t, s, "r", durable.RunPatch{Error: durable.Set(durable.RunError{Message: "no code"})})
		if got := mustGet(t, s, "r"); got.Error == nil || *got.Error != (durable.RunError{Message: "no code"}) {
			t.Fatalf("error without code read back as %s", recString(got))
		}
		mustUpdate(t, s, "r", durable.RunPatch{Status: durable.Set(durable.StatusFailed), FinishedAt: durable.Set(ms(20))})
		got = mustGet(t, s, "r")
		if got.Status != durable.StatusFailed || got.FinishedAt == nil || !got.FinishedAt.Equal(ms(20)) || got.ThreadID != "t" {
			t.Fatalf("status write read back as %s", recString(got))
		}
		if err := s.Update(ctxT(t), "r", durable.RunPatch{Status: durable.Set(durable.RunStatus("nope"))}); err == nil {
			t.Fatal("Update accepted an invalid status")
		}
		if err := s.Update(ctxT(t), "r", durable.RunPatch{Status: durable.Clear[durable.RunStatus]()}); err == nil {
			t.Fatal("Update accepted clearing the status")
		}
	})

	sub("31_find_active_run_newest_running_of_thread", func(t *testing.T, s durable.Store) {
		ctx := ctxT(t)
		find := func(thread string) string {
			t.Helper()
			r, ok, err := s.FindActiveRun(ctx, thread)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return ""
			}
			return r.RunID
		}
		if got := find("t"); got != "" {
			t.Fatalf("empty store: active run %q", got)
		}
		mustCreate(t, s, durable.RunRecord{RunID: "old", ThreadID: "t", StartedAt: ms(1)})
		mustCreate(t, s, durable.RunRecord{RunID: "new", ThreadID: "t", StartedAt: ms(5)})
		mustCreate(t, s, durable.RunRecord{RunID: "mid", ThreadID: "t", StartedAt: ms(3)})
		mustCreate(t, s, durable.RunRecord{RunID: "other-thread", ThreadID: "u", StartedAt: ms(9)})
		mustCreate(t, s, durable.RunRecord{RunID: "paused", ThreadID: "t", StartedAt: ms(8), Status: durable.StatusInterrupted})
		if got := find("t"); got != "new" {
			t.Fatalf("active run %q, want new", got)
		}
		mustUpdate(t, s, "new", durable.RunPatch{Status: durable.Set(durable.StatusCompleted)})
		if got := find("t"); got != "mid" {
			t.Fatalf("after the newest completed: %q, want mid", got)
		}
		mustUpdate(t, s, "mid", durable.RunPatch{Status: durable.Set(durable.StatusAborted)})
		mustUpdate(t, s, "old", durable.RunPatch{Status: durable.Set(durable.StatusFailed)})
		if got := find("t"); got != "" {
			t.Fatalf("no running run: got %q", got)
		}
		if got := find("u"); got != "other-thread" {
			t.Fatalf("thread u: %q", got)
		}
		rs, err := s.ListByThread(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		equalStrings(t, "ListByThread ascending", ids(rs), []string{"old", "mid", "new", "paused"})
	})

	sub("32_list_reclaimable_inclusive_cutoff", func(t *testing.T, s durable.Store) {
		ctx := ctxT(t)
		now, ttl := ms(100_000), 30*time.Second
		cutoff := now.Add(-ttl)
		mk := func(id string, status durable.RunStatus, detached *time.Time) {
			mustCreate(t, s, durable.RunRecord{RunID: id, ThreadID: "t", StartedAt: ms(1), Status: status})
			if detached != nil {
				mustUpdate(t, s, id, durable.RunPatch{DetachedSince: durable.Set(*detached)})
			}
		}
		mk("at-cutoff", durable.StatusRunning, durable.Ptr(cutoff))
		mk("before-cutoff", durable.StatusRunning, durable.Ptr(cutoff.Add(-time.Second)))
		mk("too-recent", durable.StatusRunning, durable.Ptr(cutoff.Add(time.Millisecond)))
		mk("never-detached", durable.StatusRunning, nil)
		mk("completed", durable.StatusCompleted, durable.Ptr(cutoff.Add(-time.Hour)))
		mk("failed", durable.StatusFailed, durable.Ptr(cutoff.Add(-time.Hour)))
		mk("interrupted", durable.StatusInterrupted, durable.Ptr(cutoff.Add(-time.Hour)))
		mk("at-now", durable.StatusRunning, durable.Ptr(now))
		list := func(now time.Time, ttl time.Duration) []string {
			t.Helper()
			rs, err := s.ListReclaimable(ctx, now, ttl)
			if err != nil {
				t.Fatal(err)
			}
			got := ids(rs)
			slices.Sort(got)
			return got
		}
		equalStrings(t, "reclaimable", list(now, ttl), []string{"at-cutoff", "before-cutoff"})
		equalStrings(t, "ttl 0", list(now, 0), []string{"at-cutoff", "at-now", "before-cutoff", "too-recent"})
		mustUpdate(t, s, "at-cutoff", durable.RunPatch{DetachedSince: durable.Clear[time.Time]()})
		equalStrings(t, "after clearing detachedSince", list(now, ttl), []string{"before-cutoff"})
	})

	sub("33_claim_refuses_unknown_and_terminal_and_increments_epoch", func(t *testing.T, s durable.Store) {
		ctx := ctxT(t)
		var ce *durable.ClaimError
		if _, err := s.Claim(ctx, "missing"); !errors.As(err, &ce) || ce.Reason != durable.ClaimUnknown || !errors.Is(err, durable.ErrClaimNotAcquired) {
			t.Fatalf("claim of unknown run: %v", err)
		}
		if _, err := s.Get(ctx, "missing"); !errors.Is(err, durable.ErrRunNotFound) {
			t.Fatalf("claim of unknown run created it: %v", err)
		}
		mustCreate(t, s, durable.RunRecord{RunID: "done", ThreadID: "t", StartedAt: ms(1), Status: durable.StatusCompleted})
		mustUpdate(t, s, "done", durable.RunPatch{DriverEpoch: durable.Set(int64(4))})
		if _, err := s.Claim(ctx, "done"); !errors.As(err, &ce) || ce.Reason != durable.ClaimTerminal {
			t.Fatalf("claim of terminal run: %v", err)
		}
		if got := mustGet(t, s, "done"); got.DriverEpoch == nil || *got.DriverEpoch != 4 {
			t.Fatalf("refused claim changed driverEpoch: %s", recString(got))
		}
		mustCreate(t, s, durable.RunRecord{RunID: "r", ThreadID: "t", StartedAt: ms(1)})
		for want := int64(1); want <= 3; want++ {
			c, err := s.Claim(ctx, "r")
			if err != nil || c.Epoch != want || c.RunID != "r" {
				t.Fatalf("claim %d = %+v, %v", want, c, err)
			}
			if got := mustGet(t, s, "r"); got.DriverEpoch == nil || *got.DriverEpoch != want {
				t.Fatalf("driverEpoch after claim: %s", recString(got))
			}
		}
		mustCreate(t, s, durable.RunRecord{RunID: "paused", ThreadID: "t", StartedAt: ms(1), Status: durable.StatusInterrupted})
		mustUpdate(t, s, "paused", durable.RunPatch{DriverEpoch: durable.Set(int64(9))})
		if c, err := s.Claim(ctx, "paused"); err != nil || c.Epoch != 10 {
			t.Fatalf("claim of interrupted run = %+v, %v; want epoch 10", c, err)
		}
		// Concurrent claims get distinct epochs.
		mustCreate(t, s, durable.RunRecord{RunID: "race", ThreadID: "t", StartedAt: ms(1)})
		var wg sync.WaitGroup
		epochs := make([]int64, 8)
		for i := range epochs {
			wg.Go(func() {
				c, err := s.Claim(ctx, "race")
				if err != nil {
					t.Error(err)
				}
				epochs[i] = c.Epoch
			})
		}
		wg.Wait()
		slices.Sort(epochs)
		if fmt.Sprint(epochs) != "[1 2 3 4 5 6 7 8]" {
			t.Fatalf("concurrent claim epochs %v", epochs)
		}
	})

	sub("34_successor_claim_fences_predecessor_appends", func(t *testing.T, s durable.Store) {
		ctx := ctxT(t)
		cs := &countingStore{Store: s}
		mustCreate(t, s, durable.RunRecord{RunID: runA, ThreadID: "t", StartedAt: ms(1)})
		c1, err := s.Claim(ctx, runA)
		if err != nil {
			t.Fatal(err)
		}
		f1 := durable.NewFence(cs, c1, testLogger(t))
		if _, err := f1.Append(ctx, evs(0, 2)); err != nil {
			t.Fatalf("append under a held claim: %v", err)
		}
		c2, err := s.Claim(ctx, runA)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f1.Append(ctx, evs(2, 1))
		var lost *durable.ClaimLostError
		if !errors.As(err, &lost) || !errors.Is(err, durable.ErrClaimLost) || lost.Held != 1 || lost.Observed != 2 {
			t.Fatalf("predecessor append after successor claim: %v, want ClaimLostError held 1 observed 2", err)
		}
		reached := cs.appends.Load()
		for range 3 {
			if _, err := f1.Append(ctx, evs(3, 1)); !errors.Is(err, durable.ErrClaimLost) {
				t.Fatalf("later predecessor append: %v", err)
			}
		}
		if n := cs.appends.Load(); n != reached {
			t.Fatalf("latched appends reached the store %d times", n-reached)
		}
		// The store itself refuses a stale epoch, whatever the wrapper does.
		if _, err := s.AppendWith(ctx, runA, evs(3, 1), durable.AppendOptions{Epoch: c1.Epoch}); !errors.Is(err, durable.ErrClaimLost) {
			t.Fatalf("raw append with a stale epoch: %v", err)
		}
		f2 := durable.NewFence(s, c2, testLogger(t))
		if _, err := f2.Append(ctx, evs(2, 2)); err != nil {
			t.Fatalf("successor append: %v", err)
		}
		if err := f1.Close(ctx); err != nil {
			t.Fatalf("Close by the predecessor: %v", err)
		}
		equalData(t, "log", datas(mustSnapshot(t, s, runA)), evs(0, 4))
		if _, err := s.AppendWith(ctx, "no-record", evs(0, 1), durable.AppendOptions{Epoch: 1}); !errors.Is(err, durable.ErrClaimLost) {
			t.Fatalf("fenced append to a run with no record: %v", err)
		}
	})

	sub("35_fenced_run_store_drops_terminal_writes_of_lost_claim", func(t *testing.T, s durable.Store) {
		ctx := ctxT(t)
		mustCreate(t, s, durable.RunRecord{RunID: "r", ThreadID: "t", StartedAt: ms(1)})
		c1, _ := s.Claim(ctx, "r")
		f1 := durable.NewFence(s, c1, testLogger(t))
		if err := f1.Update(ctx, durable.RunPatch{SandboxKey: durable.Set("k")}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		// Not yet latched: the store's epoch check drops it.
		if err := f1.Update(ctx, durable.RunPatch{Status: durable.Set(durable.StatusFailed), Error: durable.Set(durable.RunError{Message: "lost"})}); err != nil {
			t.Fatalf("dropped terminal write returned %v, want nil", err)
		}
		if f1.Lost() == nil {
			t.Fatal("fence did not latch on a refused terminal write")
		}
		// Latched: dropped without asking the store.
		if err := f1.Update(ctx, durable.RunPatch{Status: durable.Set(durable.StatusAborted)}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, "r")
		if got.Status != durable.StatusRunning || got.Error != nil {
			t.Fatalf("terminal write from a lost claim landed: %s", recString(got))
		}
		if err := f1.Update(ctx, durable.RunPatch{DetachedSince: durable.Set(ms(5)), Status: durable.Set(durable.StatusInterrupted)}); err != nil {
			t.Fatal(err)
		}
		got = mustGet(t, s, "r")
		if got.DetachedSince == nil || got.Status != durable.StatusInterrupted || got.SandboxKey == nil {
			t.Fatalf("non-terminal write from a lost claim was dropped: %s", recString(got))
		}
		// A raw fenced update with the current epoch applies.
		if err := s.Update(ctx, "r", durable.RunPatch{Status: durable.Set(durable.StatusCompleted), IfEpoch: 2}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, "r"); got.Status != durable.StatusCompleted {
			t.Fatalf("fenced update with the held epoch: %s", recString(got))
		}
	})

	sub("34_fenced_append_is_atomic_with_claim", fencedAppendAtomicWithClaim)

	sub("36_two_concurrent_drivers_one_transcript", func(t *testing.T, s durable.Store) {
		ctx := ctxT(t)
		const run = "driven"
		mustCreate(t, s, durable.RunRecord{RunID: run, ThreadID: "t", StartedAt: ms(1)})
		transcript := evs(0, 40)
		var claimed, start sync.WaitGroup
		claimed.Add(2)
		start.Add(1)
		results := make([]error, 2)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				c, err := s.Claim(ctx, run)
				claimed.Done()
				if err != nil {
					results[i] = err
					return
				}
				start.Wait()
				f := durable.NewFence(s, c, testLogger(t))
				// Align with what is stored, then drive one chunk per append.
				stored, err := s.Snapshot(ctx, run)
				if err != nil {
					results[i] = err
					return
				}
				for _, chunk := range transcript[len(stored):] {
					if _, err := f.Append(ctx, [][]byte{chunk}); err != nil {
						// The loser's recovery: neither lands.
						if _, err2 := f.Append(ctx, [][]byte{[]byte(`{"type":"RUN_ERROR","message":"lost"}`)}); err2 == nil {
							t.Error("loser's RUN_ERROR was stored")
						}
						_ = f.Update(ctx, durable.RunPatch{Status: durable.Set(durable.StatusFailed), Error: durable.Set(durable.RunError{Message: "lost"})})
						results[i] = err
						return
					}
				}
				if err := f.Update(ctx, durable.RunPatch{Status: durable.Set(durable.StatusCompleted), FinishedAt: durable.Set(ms(9))}); err != nil {
					results[i] = err
					return
				}
				// A loser that found nothing left to append learns of the
				// loss from its dropped terminal write.
				results[i] = cmp.Or(f.Lost(), f.Close(ctx))
			})
		}
		claimed.Wait()
		start.Done()
		wg.Wait()
		nLost := 0
		for _, err := range results {
			if errors.Is(err, durable.ErrClaimLost) {
				nLost++
			} else if err != nil {
				t.Fatalf("driver: %v", err)
			}
		}
		if nLost != 1 {
			t.Fatalf("%d drivers lost their claim (%v), want exactly 1", nLost, results)
		}
		equalData(t, "stored log", datas(mustSnapshot(t, s, run)), transcript)
		got := mustGet(t, s, run)
		if got.Status != durable.StatusCompleted || got.Error != nil || got.DriverEpoch == nil || *got.DriverEpoch != 2 {
			t.Fatalf("record after two drivers: %s", recString(got))
		}
		all, err := readAll(t, s, run, durable.FromStart)
		if err != nil || len(all) != len(transcript) {
			t.Fatalf("log not closed or wrong: %d entries, %v", len(all), err)
		}
	})

	Leases(t, newStore)
}

// fencedAppendAtomicWithClaim checks that a claim and a concurrent fenced
// append are linearizable: once Claim returns, the predecessor can add
// nothing more to the log.
func fencedAppendAtomicWithClaim(t *testing.T, s durable.Store) {
	ctx := ctxT(t)
	for round := range 5 {
		run := fmt.Sprint("atomic-", round)
		mustCreate(t, s, durable.RunRecord{RunID: run, ThreadID: "t", StartedAt: ms(1)})
		c1, err := s.Claim(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		stopped := make(chan error, 1)
		go func() {
			for i := 0; ; i++ {
				if _, err := s.AppendWith(ctx, run, evs(i, 4), durable.AppendOptions{Epoch: c1.Epoch}); err != nil {
					stopped <- err
					return
				}
			}
		}()
		time.Sleep(20 * time.Millisecond)
		if _, err := s.Claim(ctx, run); err != nil {
			t.Fatal(err)
		}
		atClaim := len(mustSnapshot(t, s, run))
		if err := <-stopped; !errors.Is(err, durable.ErrClaimLost) {
			t.Fatalf("predecessor stopped with %v, want ErrClaimLost", err)
		}
		if after := len(mustSnapshot(t, s, run)); after != atClaim {
			t.Fatalf("round %d: predecessor stored %d entries after the successor's claim returned", round, after-atClaim)
		}
	}
}
