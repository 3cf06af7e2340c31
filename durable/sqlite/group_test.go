package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// holdWriter makes s's writer run a write that waits for release, so that
// what is queued meanwhile is taken together; wg waits for that write too.
func holdWriter(s *Store, wg *sync.WaitGroup) (release func()) {
	hold, held := make(chan struct{}), make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.exec(context.Background(), noRun, func(*writeTx) error { close(held); <-hold; return nil })
	}()
	<-held
	return func() { close(hold) }
}

// openWithClosedLog opens a store, shut down when t ends, in which the log
// of "run-closed" is closed: appending to it fails a group.
func openWithClosedLog(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "goai.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	if err := s.Close(context.Background(), "run-closed"); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGroupFailureIsolated queues appends to several logs behind a write
// that holds the writer, so that they share one group transaction, with
// one of them appending to a closed log. That one must fail alone: every
// other append is stored whole, the closed log gains nothing, and a batch
// larger than one multi-row insert keeps its order.
func TestGroupFailureIsolated(t *testing.T) {
	s := openWithClosedLog(t)
	ctx := context.Background()

	var wg sync.WaitGroup
	release := holdWriter(s, &wg)

	const runs = 5
	batch := func(run string, n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = fmt.Appendf(nil, `{"run":%q,"i":%d}`, run, i)
		}
		return out
	}
	errs := make([]error, runs+1)
	for i := 0; i <= runs; i++ {
		run, n := fmt.Sprintf("run-%d", i), putMany*2+3
		if i == runs {
			run, n = "run-closed", 2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Append(ctx, run, batch(run, n))
		}()
	}
	for len(s.ops) < runs+1 {
		time.Sleep(time.Millisecond) // wait for all of them to be queued
	}
	release()
	wg.Wait()

	for i := 0; i < runs; i++ {
		if errs[i] != nil {
			t.Fatalf("append to run-%d failed with its group: %v", i, errs[i])
		}
		run := fmt.Sprintf("run-%d", i)
		got, err := s.Snapshot(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		want := batch(run, putMany*2+3)
		if len(got) != len(want) {
			t.Fatalf("%s: %d entries stored, want %d", run, len(got), len(want))
		}
		for j, e := range got {
			if string(e.Data) != string(want[j]) || e.Offset != durable.FormatOffset(scheme, run, int64(j+1)) {
				t.Fatalf("%s entry %d: %s at %s, want %s", run, j, e.Data, e.Offset, want[j])
			}
		}
	}
	if !errors.Is(errs[runs], durable.ErrLogClosed) {
		t.Fatalf("append to the closed log: %v, want ErrLogClosed", errs[runs])
	}
	if got, _ := s.Snapshot(ctx, "run-closed"); len(got) != 0 {
		t.Fatalf("closed log gained %d entries", len(got))
	}
}

// A queued append takes its batch when it runs, not when it is queued:
// what the producer adds while the writer is busy goes in the same append.
func TestQueuedAppendTakesItsBatchWhenItRuns(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "durable.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	var wg sync.WaitGroup
	defer wg.Wait()
	release := holdWriter(s, &wg) // the writer is busy
	var mu sync.Mutex
	queued := [][]byte{[]byte(`{"n":0}`)}
	var taken [][][]byte
	take := func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		b := queued
		queued = nil
		taken = append(taken, b)
		return b
	}
	outcome := make(chan error, 1)
	s.AppendQueued("r", durable.AppendOptions{}, take, func(err error) bool { outcome <- err; return false })
	for i := 1; i < 5; i++ {
		mu.Lock()
		queued = append(queued, fmt.Appendf(nil, `{"n":%d}`, i))
		mu.Unlock()
	}
	release()
	if err := <-outcome; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(taken) != 1 || len(taken[0]) != 5 {
		t.Fatalf("taken %d batches, the first of %d entries; want one of 5", len(taken), len(taken[0]))
	}
	es, err := s.Snapshot(context.Background(), "r")
	if err != nil || len(es) != 5 {
		t.Fatalf("%d entries stored, %v", len(es), err)
	}
}

// Producers whose queued appends keep asking for another round do not
// starve the other writes: a round is queued behind what waits already.
func TestQueuedAppendsDoNotStarveOtherWrites(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "durable.db"), &Options{MaxGroup: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	var stop atomic.Bool
	var rounds atomic.Int64
	var wg sync.WaitGroup
	for p := range 20 {
		wg.Add(1)
		take := func() [][]byte { return [][]byte{[]byte(`{"type":"CUSTOM"}`)} }
		done := func(err error) bool {
			rounds.Add(1)
			if err != nil || stop.Load() {
				wg.Done()
				return false
			}
			return true
		}
		s.AppendQueued(fmt.Sprint("busy-", p), durable.AppendOptions{}, take, done)
	}
	for rounds.Load() < 100 { // every producer is going round
		time.Sleep(time.Millisecond)
	}
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append(context.Background(), "other", [][]byte{[]byte(`{}`)})
		appended <- err
	}()
	select {
	case err = <-appended:
	case <-time.After(30 * time.Second): // a hang guard
		err = errors.New("starved while the queued appends went round")
	}
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("an append beside endless queued appends: %v", err)
	}
}

// TestLeaseRenewalsGoFirst queues writes behind one that holds the writer,
// then a lease renewal: the renewal must run before every one of them. At
// 10,000 runs starting at once, a renewal queued behind the runs' writes
// timed out, and renewals that keep timing out get a live run ended as
// lost.
func TestLeaseRenewalsGoFirst(t *testing.T) {
	var (
		mu    sync.Mutex
		order []string
		armed atomic.Bool
	)
	record := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, what)
	}
	now := func() time.Time {
		if armed.Load() { // the renewal reads the clock in its transaction
			record("renewal")
		}
		return time.Now()
	}
	s, err := Open(filepath.Join(t.TempDir(), "goai.db"), &Options{MaxGroup: 4, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx := context.Background()
	if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: "leased", ThreadID: "t", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	claim, err := s.ClaimIf(ctx, "leased", 0)
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	release := holdWriter(s, &wg)
	const writes = 40
	for range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.exec(ctx, noRun, func(*writeTx) error { record("write"); return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	queued := func(n int) {
		for len(s.ops)+len(s.urgent) < n {
			time.Sleep(time.Millisecond)
		}
	}
	queued(writes)
	armed.Store(true)
	renewed := make(chan error, 1)
	go func() {
		lost, err := s.HeartbeatAll(ctx, []durable.Claim{claim})
		if err == nil && len(lost) > 0 {
			err = fmt.Errorf("lost %v", lost)
		}
		renewed <- err
	}()
	queued(writes + 1)
	release()
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(order) != writes+1 || order[0] != "renewal" {
		t.Fatalf("the renewal ran at %d of %d writes: %v", slices.Index(order, "renewal"), len(order), order)
	}
}

// A backlog that never empties (producers going round faster than the
// writer takes them) keeps a bounded array: what is taken is dropped from
// its front, not only when all of it has been taken.
func TestBacklogStaysBounded(t *testing.T) {
	s := &Store{opts: Options{MaxGroup: 256}}
	group := make([]*op, 0, 256)
	for range 300 {
		s.backlog = append(s.backlog, &op{})
	}
	for round := range 10_000 {
		group = s.takeBacklog(group[:0])
		if len(group) != 256 {
			t.Fatalf("round %d took %d writes, want 256", round, len(group))
		}
		for range 256 { // every write taken goes round again
			s.backlog = append(s.backlog, &op{})
		}
		if s.backlogged() != 300 {
			t.Fatalf("round %d: %d writes backlogged, want 300", round, s.backlogged())
		}
	}
	if c := cap(s.backlog); c > 4*300 {
		t.Fatalf("the backlog's array holds %d for 300 writes", c)
	}
}

// CommitStats counts a group as one commit of all its writes, and a group
// that failed as the commits of its writes that succeeded alone.
func TestCommitStatsCountGroups(t *testing.T) {
	s := openWithClosedLog(t)
	ctx := context.Background()
	if got := s.CommitStats(); got != (durable.CommitStats{Commits: 1, Writes: 1}) {
		t.Fatalf("after one write: %+v", got)
	}
	// queued holds the writer, queues an append to each of runs and
	// releases it once all are queued; it returns the appends' errors.
	queued := func(runs ...string) []error {
		var wg sync.WaitGroup
		release := holdWriter(s, &wg)
		errs := make([]error, len(runs))
		for i, run := range runs {
			wg.Go(func() { _, errs[i] = s.Append(ctx, run, [][]byte{[]byte(`{}`)}) })
		}
		for len(s.ops) < len(runs) {
			time.Sleep(time.Millisecond) // wait for all of them to be queued
		}
		release()
		wg.Wait()
		return errs
	}
	runs := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, err := range queued(runs...) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The held write, then the eight appends in one transaction.
	if got, want := s.CommitStats(), (durable.CommitStats{Commits: 3, Writes: 10}); got != want {
		t.Fatalf("after a group of eight: %+v, want %+v", got, want)
	}
	// A group with an append to a closed log fails, and each write runs
	// alone: the held write and three commits of one append.
	errs := queued("a", "b", "run-closed", "c")
	if !errors.Is(errs[2], durable.ErrLogClosed) || errs[0] != nil || errs[1] != nil || errs[3] != nil {
		t.Fatalf("appends: %v", errs)
	}
	if got, want := s.CommitStats(), (durable.CommitStats{Commits: 7, Writes: 14}); got != want {
		t.Fatalf("after a failed group: %+v, want %+v", got, want)
	}
}

// Under a commit gap the writer sleeps: appends queued meanwhile stay in
// its queue and are committed together when the gap ends, here at
// shutdown, since the gap is an hour.
func TestCommitGapHoldsQueuedWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "goai.db")
	s, err := Open(path, &Options{CommitGap: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A commit of two writes: several writers are about, so the next
	// commit waits for the gap.
	var wg sync.WaitGroup
	release := holdWriter(s, &wg)
	for _, run := range []string{"a", "b"} {
		wg.Go(func() {
			if _, err := s.Append(ctx, run, [][]byte{[]byte(`{}`)}); err != nil {
				t.Error(err)
			}
		})
	}
	for len(s.ops) < 2 {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	before := s.CommitStats()

	runs := []string{"c", "d", "e", "f", "g", "h", "i", "j"}
	errs := make([]error, len(runs))
	var appends sync.WaitGroup
	var stored atomic.Int32
	for i, run := range runs {
		appends.Go(func() {
			_, errs[i] = s.Append(ctx, run, [][]byte{[]byte(`{"run":"` + run + `"}`)})
			stored.Add(1)
		})
	}
	// The writer took the first and sleeps; the others wait in its queue.
	for len(s.ops) < len(runs)-1 {
		time.Sleep(time.Millisecond)
	}
	if n := stored.Load(); n != 0 {
		t.Fatalf("%d appends returned during the gap", n)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}
	appends.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append to %s: %v", runs[i], err)
		}
	}
	if got, want := s.CommitStats(), (durable.CommitStats{Commits: before.Commits + 1, Writes: before.Writes + int64(len(runs))}); got != want {
		t.Fatalf("after the gap: %+v, want %+v (one commit of every queued append)", got, want)
	}
	s, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	for _, run := range runs {
		n := 0
		for _, err := range s.Read(ctx, run, durable.FromStart) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			break
		}
		if n != 1 {
			t.Fatalf("run %s: %d entries after reopening, want 1", run, n)
		}
	}
}

// A writer whose last commit was full does not wait for the gap: the
// writes behind it are more than a commit takes already.
func TestCommitGapSkippedAfterAFullCommit(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "goai.db"), &Options{CommitGap: time.Hour, MaxGroup: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx := context.Background()
	var wg sync.WaitGroup
	release := holdWriter(s, &wg)
	runs := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, run := range runs {
		wg.Go(func() {
			if _, err := s.Append(ctx, run, [][]byte{[]byte(`{}`)}); err != nil {
				t.Error(err)
			}
		})
	}
	for len(s.ops) < len(runs) {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait() // an hour if the second group waited for the gap
	// The held write, then two full commits of four.
	if got, want := s.CommitStats(), (durable.CommitStats{Commits: 3, Writes: 9}); got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}

// The gap grows while commits carry few writes on average, up to
// CommitGapMax, and shrinks back to CommitGap once they carry more; bursts
// (a large commit among small ones) do not hold it at either end; a lone
// writer's commits, or a gap without room to grow, leave it where it is.
func TestCommitGapAdapts(t *testing.T) {
	const lo, hi = 2 * time.Millisecond, 5 * time.Millisecond
	g := gapper{min: lo, max: hi, gap: lo}
	for range 40 {
		g.committing(fewWrites/2, 256)
	}
	if g.gap != hi {
		t.Fatalf("after small commits the gap is %v, want %v", g.gap, hi)
	}
	for range 40 {
		g.committing(2*fewWrites, 256)
	}
	if g.gap != lo {
		t.Fatalf("after large commits the gap is %v, want %v", g.gap, lo)
	}
	// Bursts: every other commit large, the average well above the mark.
	for i := range 40 {
		g.committing([]int{4 * fewWrites, 2}[i%2], 256)
	}
	if g.gap != lo {
		t.Fatalf("with bursts averaging %d writes the gap is %v, want %v", (4*fewWrites+2)/2, g.gap, lo)
	}
	// A lone writer (as the writer starts): commits of one write each.
	lone := gapper{min: lo, max: hi, gap: lo, sinceShared: lonely}
	for range 2 * lonely {
		lone.committing(1, 256)
	}
	if lone.gap != lo {
		t.Fatalf("a lone writer moved the gap to %v", lone.gap)
	}
	fixed := gapper{min: lo, max: lo, gap: lo}
	for range 20 {
		fixed.committing(2, 256)
	}
	if fixed.gap != lo {
		t.Fatalf("a fixed gap moved to %v", fixed.gap)
	}
}

// A write that finds the writer idle, the gap long spent since its last
// commit, still waits CommitGap for the writes that come with it (paced
// streams' tokens come in bursts), and no longer; a lone writer's write
// does not wait.
func TestCommitGapAfterIdle(t *testing.T) {
	const lo, hi = time.Hour, 2 * time.Hour
	now := time.Now()
	g := gapper{min: lo, max: hi, gap: hi, lastCommit: now.Add(-3 * time.Hour), idleWrite: now}
	if w := g.wait(); w <= 0 || w > lo {
		t.Fatalf("a write at an idle writer waits %v, want up to %v", w, lo)
	}
	g.idleWrite = now.Add(-2 * lo)
	if w := g.wait(); w > 0 {
		t.Fatalf("a write that came CommitGap ago or more waits %v", w)
	}
	lone := gapper{min: lo, max: hi, gap: hi, lastCommit: now.Add(-3 * time.Hour), idleWrite: now, sinceShared: lonely}
	if w := lone.wait(); w > 0 {
		t.Fatalf("a lone writer's write waits %v", w)
	}
}

// Producers that batch (an unpaced model's appends, many entries a write)
// do not grow the gap, and a few of them are not made to wait for it:
// each has its next batch queued behind the one being stored. Many of them
// still share commits across the gap, and paced writers (an entry a write)
// wait for it as before.
func TestCommitGapBatching(t *testing.T) {
	const lo, hi = 2 * time.Millisecond, 5 * time.Millisecond
	commits := func(g *gapper, n, writes, entries int) {
		for range n {
			g.committing(writes, 256)
			g.carrying(writes, entries)
		}
	}
	// waits reports whether g would wait at all, whatever time it is: its
	// last commit is put an hour ahead, so that a gap left is never spent.
	waits := func(g *gapper) bool {
		g.lastCommit = time.Now().Add(time.Hour)
		return g.wait() > 0
	}
	few := gapper{min: lo, max: hi, gap: lo, avgWrites: fewWrites * 16}
	commits(&few, 40, 12, 12*25)
	if !few.batching() || few.gap != lo {
		t.Fatalf("a few batching producers: batching %v, gap %v; want true, %v", few.batching(), few.gap, lo)
	}
	if waits(&few) {
		t.Fatal("a few batching producers wait for the gap")
	}
	many := gapper{min: lo, max: hi, gap: lo, avgWrites: fewWrites * 16}
	commits(&many, 40, 4*fewWrites, 4*fewWrites*25)
	if !many.batching() || many.gap != lo || !waits(&many) {
		t.Fatalf("many batching producers: batching %v, gap %v, waiting %v; want true, %v, true", many.batching(), many.gap, waits(&many), lo)
	}
	paced := gapper{min: lo, max: hi, gap: lo, avgWrites: fewWrites * 16}
	commits(&paced, 40, 12, 12)
	if paced.batching() || paced.gap != hi || !waits(&paced) {
		t.Fatalf("paced writers: batching %v, gap %v; want false, %v, and a wait", paced.batching(), paced.gap, hi)
	}
	// Batching that stops (the model is paced again) lets the gap grow.
	commits(&few, 40, 12, 12)
	if few.batching() || few.gap != hi || !waits(&few) {
		t.Fatalf("after the batching stopped: batching %v, gap %v", few.batching(), few.gap)
	}
}

// Appends of many entries to several runs in one transaction queue their
// chunks (maxChunk entries at most each) and insert them together after
// the transaction's other appends: every run reads back exactly its own
// entries, from the database, in order.
func TestManyEntryAppendsShareChunkInserts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "goai.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runs := []string{"a", "b", "c", "d", "e"}
	want := map[string][]string{}
	for _, run := range runs {
		// The log exists and the writer knows its tail: the next append
		// runs no statement of its own.
		first := fmt.Sprintf(`{"run":%q,"n":0}`, run)
		if _, err := s.Append(ctx, run, [][]byte{[]byte(first)}); err != nil {
			t.Fatal(err)
		}
		want[run] = []string{first}
	}
	batches := map[string][][]byte{}
	for i, run := range runs {
		for k := range putMany + 30*i { // 16 to 136 entries: up to three chunks
			e := fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","run":%q,"n":%d,"delta":"tok %d "}`, run, k+1, k*k)
			batches[run] = append(batches[run], []byte(e))
			want[run] = append(want[run], e)
		}
	}
	var wg sync.WaitGroup
	release := holdWriter(s, &wg)
	before := s.CommitStats()
	for _, run := range runs {
		wg.Go(func() {
			if _, err := s.Append(ctx, run, batches[run]); err != nil {
				t.Error(err)
			}
		})
	}
	for len(s.ops) < len(runs) {
		time.Sleep(time.Millisecond)
	}
	// A small append joins them, last, to the journal.
	wg.Go(func() {
		if _, err := s.Append(ctx, "a", [][]byte{[]byte(`{"last":true}`)}); err != nil {
			t.Error(err)
		}
	})
	for len(s.ops) < len(runs)+1 {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	// The held write, then one commit of every append.
	if got, want := s.CommitStats(), (durable.CommitStats{Commits: before.Commits + 2, Writes: before.Writes + int64(len(runs)) + 2}); got != want {
		t.Fatalf("%+v, want %+v (one commit of the appends)", got, want)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// Read back from the file, not from the cache of recent entries.
	s, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	for _, run := range runs {
		w := want[run]
		if run == "a" {
			w = append(slices.Clone(w), `{"last":true}`)
		}
		got, err := s.Snapshot(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(w) {
			t.Fatalf("run %s: %d entries, want %d", run, len(got), len(w))
		}
		for i, e := range got {
			if string(e.Data) != w[i] {
				t.Fatalf("run %s entry %d: %s, want %s", run, i+1, e.Data, w[i])
			}
		}
	}
}

// An op that reads and writes no log's rows (a run's start, a thread or
// request save, a record update) runs with the rows of the appends before
// it still queued; any other op has them inserted first. Either way every
// row is stored when the transaction commits.
func TestLogFreeOpsLeaveRowsQueued(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "goai.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx := context.Background()
	for _, run := range []string{"a", "b"} {
		if _, err := s.Append(ctx, run, [][]byte{[]byte(`{"n":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var queuedAtFree, queuedAtOther int
	var wg sync.WaitGroup
	release := holdWriter(s, &wg)
	step := func(n int, f func()) {
		wg.Go(f)
		for len(s.ops) < n {
			time.Sleep(time.Millisecond)
		}
	}
	appendTo := func(run string) func() {
		return func() {
			if _, err := s.Append(ctx, run, [][]byte{[]byte(`{"n":2}`)}); err != nil {
				t.Error(err)
			}
		}
	}
	step(1, appendTo("a"))
	step(2, func() {
		if err := s.execLogFree(ctx, noRun, func(tx *writeTx) error {
			queuedAtFree = len(tx.journal) / 4
			_, err := tx.Stmt(s.st.requestPut).Exec("r", []byte("{}"))
			return err
		}); err != nil {
			t.Error(err)
		}
	})
	step(3, appendTo("b"))
	step(4, func() {
		if err := s.exec(ctx, noRun, func(tx *writeTx) error {
			queuedAtOther = len(tx.journal) / 4
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
	release()
	wg.Wait()
	if queuedAtFree != 1 || queuedAtOther != 0 {
		t.Fatalf("rows queued when the log-free op ran: %d, want 1; when the other ran: %d, want 0", queuedAtFree, queuedAtOther)
	}
	for _, run := range []string{"a", "b"} {
		got, err := s.Snapshot(ctx, run)
		if err != nil || len(got) != 2 {
			t.Fatalf("run %s: %d entries, %v; want 2", run, len(got), err)
		}
	}
	if body, err := s.LoadRequest(ctx, "r"); err != nil || string(body) != "{}" {
		t.Fatalf("the request saved by the log-free op: %q, %v", body, err)
	}
}
