//go:build unix

package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// A store that is its file's only writer queries a cancel poll only for
// the runs it has not found without a cancel since the last write of one.
func TestCancelPollsQueryWhatMayHaveChanged(t *testing.T) {
	ctx := context.Background()
	for _, one := range []bool{false, true} {
		t.Run(fmt.Sprint("OneProcess=", one), func(t *testing.T) {
			s, err := Open(filepath.Join(t.TempDir(), "goai.db"), &Options{OneProcess: one})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown()
			ids := make([]string, 50)
			for i := range ids {
				ids[i] = fmt.Sprintf("r%02d", i)
				if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: ids[i], ThreadID: "t", StartedAt: time.Now()}); err != nil {
					t.Fatal(err)
				}
			}
			poll := func(ids []string, want string, queries int64) {
				t.Helper()
				before := s.cancelQueries.Load()
				got, err := s.CancelRequested(ctx, ids)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Sort(got); fmt.Sprint(got) != want {
					t.Fatalf("CancelRequested = %v, want %s", got, want)
				}
				if !one {
					queries = 1 // every poll asks the file, which others may write
				}
				if n := s.cancelQueries.Load() - before; n != queries {
					t.Fatalf("the poll queried %d times, want %d", n, queries)
				}
			}
			poll(ids, "[]", 1)
			poll(ids, "[]", 0)
			poll(ids[:10], "[]", 0)
			// A write that is not a cancel moves nothing.
			if err := s.Update(ctx, "r03", durable.RunPatch{SandboxKey: durable.Set("k")}); err != nil {
				t.Fatal(err)
			}
			poll(ids, "[]", 0)
			// A run not asked about before is asked about alone.
			if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "late", ThreadID: "t", StartedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			poll(append(ids, "late"), "[]", 1)
			poll(append(ids, "late"), "[]", 0)
			// A cancel recorded: the next poll asks again, and a run found
			// cancelled is asked about at every poll.
			if err := s.Update(ctx, "r07", durable.RunPatch{CancelRequested: durable.Set(true)}); err != nil {
				t.Fatal(err)
			}
			poll(ids, "[r07]", 1)
			poll(ids, "[r07]", 1)
		})
	}
}

// Cancels recorded while polls run are all seen by the polls after them.
func TestCancelPollsBesideCancels(t *testing.T) {
	ctx := context.Background()
	s := openOneProcess(t, filepath.Join(t.TempDir(), "goai.db"))
	ids := make([]string, 40)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%02d", i)
		if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: ids[i], ThreadID: "t", StartedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	defer func() { close(done); wg.Wait() }()
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := s.CancelRequested(ctx, ids); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i, id := range ids {
		if i%2 == 0 {
			if err := s.Update(ctx, id, durable.RunPatch{CancelRequested: durable.Set(true)}); err != nil {
				t.Fatal(err)
			}
			// Each cancel is seen by the next poll, whatever the polls
			// beside it found.
			got, err := s.CancelRequested(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(got, id) || len(got) != i/2+1 {
				t.Fatalf("after cancelling %s: CancelRequested = %v", id, got)
			}
		}
	}
}

// BenchmarkCancelRequested is a server's cancel poll of n runs it
// produces, none cancelled, on a store that is its file's only writer
// and on one that is not.
func BenchmarkCancelRequested(b *testing.B) {
	ctx := context.Background()
	for _, one := range []bool{false, true} {
		for _, n := range []int{100, 10000} {
			b.Run(fmt.Sprintf("OneProcess=%v/runs=%d", one, n), func(b *testing.B) {
				s, err := Open(filepath.Join(b.TempDir(), "goai.db"), &Options{OneProcess: one})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Shutdown()
				ids := make([]string, n)
				for i := range ids {
					ids[i] = fmt.Sprintf("run-%06d", i)
					if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: ids[i], ThreadID: "t", StartedAt: time.Now()}); err != nil {
						b.Fatal(err)
					}
				}
				for b.Loop() {
					if _, err := s.CancelRequested(ctx, ids); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
