//go:build unix

package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

func openOneProcess(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, &Options{OneProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	return s
}

func wantOwner(t *testing.T, s *Store, thread, owner string, found bool) {
	t.Helper()
	got, ok, err := s.ThreadOwner(context.Background(), thread)
	if err != nil || got != owner || ok != found {
		t.Fatalf("ThreadOwner(%q) = %q, %v, %v; want %q, %v, nil", thread, got, ok, err, owner, found)
	}
}

// A store that is its file's only writer answers who owns a thread from
// memory: a thread it has never seen without a query, a thread asked
// before without another; and what the file held when it was opened,
// what it wrote since and what a prune removed all show in the answers.
func TestThreadOwnersFromMemory(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "goai.db")
	s := openOneProcess(t, path)
	if _, err := s.ClaimThread(ctx, "claimed", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "r1", ThreadID: "ran", StartedAt: time.Now(), Owner: "bob"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}

	s = openOneProcess(t, path)
	queries := func() int64 { return s.ownerQueries.Load() }
	// Answers are right while the threads load, and come from memory
	// once they have.
	wantOwner(t, s, "claimed", "alice", true)
	wantOwner(t, s, "nobody's", "", false)
	<-s.ownersLoaded
	wantOwner(t, s, "claimed", "alice", true)
	wantOwner(t, s, "ran", "bob", true)
	q := queries()
	wantOwner(t, s, "claimed", "alice", true)
	wantOwner(t, s, "ran", "bob", true)
	for i := range 100 {
		wantOwner(t, s, fmt.Sprintf("new-%d", i), "", false)
	}
	// A false "maybe" of the filter costs a query: a few at most.
	if n := queries() - q; n > 5 {
		t.Fatalf("%d queries for threads asked before and threads never seen; want (almost) none", n)
	}

	// A run on a thread with none before, recorded after a run that
	// started later: the earliest started run's owner, as the query says.
	later := time.Now()
	if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "r3", ThreadID: "t", StartedAt: later, Owner: "carol"}); err != nil {
		t.Fatal(err)
	}
	wantOwner(t, s, "t", "carol", true)
	if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "r2", ThreadID: "t", StartedAt: later.Add(-time.Minute), Owner: "dave"}); err != nil {
		t.Fatal(err)
	}
	wantOwner(t, s, "t", "dave", true)
	// A saved thread's owner comes first.
	if err := s.SaveThread(ctx, durable.Thread{ThreadID: "t", Messages: []byte(`[]`), RunID: "r3", UpdatedAt: later, Owner: "erin"}); err != nil {
		t.Fatal(err)
	}
	wantOwner(t, s, "t", "erin", true)

	// A prune that removes the only run of a thread without a row takes
	// its owner with it.
	if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "r4", ThreadID: "brief", StartedAt: later, Owner: "frank"}); err != nil {
		t.Fatal(err)
	}
	wantOwner(t, s, "brief", "frank", true)
	if err := s.Update(ctx, "r4", durable.RunPatch{Status: durable.Set(durable.StatusCompleted), FinishedAt: durable.Set(later)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx, later.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	wantOwner(t, s, "brief", "", false)
}

// Without OneProcess another process may write the file: every answer
// is queried.
func TestThreadOwnersQueriedWithoutOneProcess(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "goai.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	wantOwner(t, s, "x", "", false)
	wantOwner(t, s, "x", "", false)
	if n := s.ownerQueries.Load(); n != 2 {
		t.Fatalf("%d queries, want 2", n)
	}
}

// An owner given by a write that has returned is seen by every later
// request, however requests and writes interleave: the cache never keeps
// an answer read before a write to its thread. Each writer changes the
// owner of its threads twice (a run's, then a saved thread's) while
// readers keep asking about the thread it is writing.
func TestThreadOwnersAfterWrites(t *testing.T) {
	ctx := context.Background()
	s := openOneProcess(t, filepath.Join(t.TempDir(), "goai.db"))
	const writers, threads = 4, 100
	var current [writers]atomic.Pointer[string]
	errs := make(chan error, 2*writers)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := range 2 * writers {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if p := current[r%writers].Load(); p != nil {
					if _, _, err := s.ThreadOwner(ctx, *p); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	check := func(thread, want string) error {
		got, found, err := s.ThreadOwner(ctx, thread)
		if err != nil || !found || got != want {
			return fmt.Errorf("after the write, ThreadOwner(%q) = %q, %v, %v; want %q, true", thread, got, found, err, want)
		}
		return nil
	}
	var ws sync.WaitGroup
	for w := range writers {
		ws.Go(func() {
			for i := range threads {
				thread := fmt.Sprintf("t-%d-%d", w, i)
				current[w].Store(&thread)
				runner, saver := fmt.Sprintf("runner-%d", w), fmt.Sprintf("saver-%d", w)
				if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "r-" + thread, ThreadID: thread, StartedAt: time.Now(), Owner: runner}); err != nil {
					errs <- err
					return
				}
				if err := check(thread, runner); err != nil {
					errs <- err
					return
				}
				if err := s.SaveThread(ctx, durable.Thread{ThreadID: thread, Messages: []byte(`[]`), UpdatedAt: time.Now(), Owner: saver}); err != nil {
					errs <- err
					return
				}
				if err := check(thread, saver); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	ws.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The filter never forgets a thread it was given, across the layers it
// grows, and says "maybe" for few it was not.
func TestThreadFilter(t *testing.T) {
	var f threadFilter
	c := newOwnerCache()
	const n = 5 * firstFilterCap
	for i := range n {
		f.add(c.hash(fmt.Sprintf("thread-%d", i)))
	}
	if len(f.layers) < 3 {
		t.Fatalf("%d layers for %d threads; want the filter to have grown", len(f.layers), n)
	}
	for i := range n {
		if !f.mayHave(c.hash(fmt.Sprintf("thread-%d", i))) {
			t.Fatalf("thread-%d forgotten", i)
		}
	}
	maybes := 0
	for i := range n {
		if f.mayHave(c.hash(fmt.Sprintf("other-%d", i))) {
			maybes++
		}
	}
	// Each layer says "maybe" for about 1 % of strangers.
	if maybes > n*len(f.layers)*2/100 {
		t.Fatalf("%d of %d strangers were maybe", maybes, n)
	}
}

// BenchmarkThreadOwnerBusy asks who owns a thread while the writer keeps
// committing (a busy server: each commit drops the readers' page cache),
// on a store that queries every answer and on a OneProcess store, for a
// thread seen before and for a new one.
func BenchmarkThreadOwnerBusy(b *testing.B) {
	for _, kind := range []struct {
		name string
		opts *Options
	}{{"queried", nil}, {"cached", &Options{OneProcess: true}}} {
		b.Run(kind.name, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "goai.db"), kind.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Shutdown()
			ctx := context.Background()
			for i := range 1000 {
				rec := durable.RunRecord{RunID: fmt.Sprintf("r-%d", i), ThreadID: fmt.Sprintf("thread-%d", i), StartedAt: time.Now(), Owner: "alice"}
				if _, err := s.CreateOrResume(ctx, rec); err != nil {
					b.Fatal(err)
				}
			}
			<-s.ownersLoaded
			stop, done := make(chan struct{}), make(chan struct{})
			go func() { // the writer commits all the while
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := s.Append(ctx, "busy", [][]byte{[]byte(`{"type":"TEXT_MESSAGE_CONTENT","delta":"x"}`)}); err != nil {
						return
					}
				}
			}()
			defer func() { close(stop); <-done }()
			b.Run("seen", func(b *testing.B) {
				i := 0
				for b.Loop() {
					if _, ok, err := s.ThreadOwner(ctx, fmt.Sprintf("thread-%d", i%1000)); err != nil || !ok {
						b.Fatal(ok, err)
					}
					i++
				}
			})
			b.Run("new", func(b *testing.B) {
				i := 0
				for b.Loop() {
					if _, ok, err := s.ThreadOwner(ctx, fmt.Sprintf("new-%d", i)); err != nil || ok {
						b.Fatal(ok, err)
					}
					i++
				}
			})
		})
	}
}

// BenchmarkThreadOwnersLoad loads the owners' filter from a file of
// 100,000 threads (what a OneProcess store does beside its writer after
// Open); threads/s is the rate.
func BenchmarkThreadOwnersLoad(b *testing.B) {
	const threads = 100_000
	path := filepath.Join(b.TempDir(), "goai.db")
	s, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown()
	err = s.exec(context.Background(), noRun, func(tx *writeTx) error {
		for i := range threads {
			if _, err := tx.Exec(`INSERT INTO goai_runs (run_id, thread_id, status, started_at, owner) VALUES (?, ?, 'completed', ?, '')`,
				fmt.Sprintf("run-%08d", i), fmt.Sprintf("thread-%08d-%016x", i, i*7919), i); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := newOwnerCache().load(s.r, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(threads)*float64(b.N)/b.Elapsed().Seconds(), "threads/s")
}
