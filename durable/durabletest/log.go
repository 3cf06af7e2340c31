// Package durabletest is the conformance suite for durable backends. A
// backend's tests call Run for its durable.Log and RunStore for its
// durable.Store; every subtest name starts with the number of the behaviour
// of the spec (docs/durable.md §8) it checks.
package durabletest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// Options describe the backend under test. The zero value suits a backend
// with the default first-chunk deadline.
type Options struct {
	// FirstChunkDeadline is the deadline the logs returned by newLog apply
	// to a sentinel read of a run with no data. Zero means
	// durable.DefaultFirstChunkDeadline.
	FirstChunkDeadline time.Duration
	// Reopen, if set, returns a second, independent instance over the same
	// storage as l (for example the same database file opened again), for
	// item 11. Without it item 11 uses l itself.
	Reopen func(t *testing.T, l durable.Log) durable.Log
}

func (o *Options) deadline() time.Duration {
	if o == nil || o.FirstChunkDeadline == 0 {
		return durable.DefaultFirstChunkDeadline
	}
	return o.FirstChunkDeadline
}

// The run ids used by the suite exercise offset escaping.
const (
	runA = "run A/ä:1%"
	runB = "run-B"
)

// Run runs the delivery-log conformance suite. newLog must return a new,
// empty log with independent storage on each call and register its own
// cleanup with t.Cleanup.
func Run(t *testing.T, newLog func(t *testing.T) durable.Log, opts *Options) {
	sub := func(name string, f func(t *testing.T, l durable.Log)) {
		t.Run(name, func(t *testing.T) {
			leakCheck(t)
			f(t, newLog(t))
		})
	}

	sub("01_append_returns_distinct_offsets_in_order", func(t *testing.T, l durable.Log) {
		offs, err := l.Append(ctxT(t), runA, nil)
		if err != nil || len(offs) != 0 {
			t.Fatalf("empty Append = %q, %v; want no offsets, nil", offs, err)
		}
		a := mustAppend(t, l, runA, evs(0, 3))
		b := mustAppend(t, l, runA, evs(3, 1))
		all := append(a, b...)
		seen := map[string]bool{}
		for _, o := range all {
			if !durable.ValidOffset(o) {
				t.Fatalf("offset %q is not SSE-safe", o)
			}
			if seen[o] {
				t.Fatalf("offset %q repeated in %q", o, all)
			}
			seen[o] = true
		}
		snap := mustSnapshot(t, l, runA)
		equalStrings(t, "snapshot offsets", offsets(snap), all)
		equalData(t, "snapshot data", datas(snap), evs(0, 4))
		mustClose(t, l, runA)
		got, err := readAll(t, l, runA, durable.FromStart)
		if err != nil {
			t.Fatal(err)
		}
		equalStrings(t, "read offsets", offsets(got), all)
	})

	sub("02_reattach_replays_after_offset_then_tails_until_close", func(t *testing.T, l durable.Log) {
		offs := mustAppend(t, l, runA, evs(0, 5))
		r := startRead(t, l, runA, offs[1])
		got := r.take(t, 3)
		equalData(t, "replay", datas(got), evs(2, 3))
		equalStrings(t, "replay offsets", offsets(got), offs[2:])
		r.idle(t)
		live := mustAppend(t, l, runA, evs(5, 2))
		got = r.take(t, 2)
		equalData(t, "live", datas(got), evs(5, 2))
		equalStrings(t, "live offsets", offsets(got), live)
		live = mustAppend(t, l, runA, evs(7, 1))
		if e := r.next(t); e.Offset != live[0] {
			t.Fatalf("live entry offset %q, want %q", e.Offset, live[0])
		}
		r.idle(t)
		mustClose(t, l, runA)
		if err := r.end(t); err != nil {
			t.Fatalf("read ended with %v, want nil", err)
		}
	})

	sub("03_read_continues_past_intermediate_RUN_FINISHED", func(t *testing.T, l durable.Log) {
		transcript := [][]byte{
			[]byte(`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`),
			[]byte(`{"type":"TOOL_CALL_END","toolCallId":"c1"}`),
			[]byte(`{"type":"RUN_FINISHED","threadId":"t","runId":"r","finishReason":"tool_calls"}`),
		}
		rest := [][]byte{
			[]byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"done"}`),
			[]byte(`{"type":"RUN_FINISHED","threadId":"t","runId":"r","finishReason":"stop"}`),
		}
		// The first iteration is stored before the read starts: a read
		// racing the run's first append would depend on the first-chunk
		// deadline (item 09 tests that), not on what this item checks.
		mustAppend(t, l, runA, transcript)
		r := startRead(t, l, runA, durable.FromStart)
		equalData(t, "first iteration", datas(r.take(t, 3)), transcript)
		r.idle(t)
		mustAppend(t, l, runA, rest)
		equalData(t, "second iteration", datas(r.take(t, 2)), rest)
		r.idle(t)
		mustClose(t, l, runA)
		if err := r.end(t); err != nil {
			t.Fatal(err)
		}
	})

	sub("04_sentinels_from_start_and_now", func(t *testing.T, l durable.Log) {
		mustAppend(t, l, runA, evs(0, 3))
		all := startRead(t, l, runA, durable.FromStart)
		equalData(t, "from start", datas(all.take(t, 3)), evs(0, 3))
		now := startRead(t, l, runA, durable.Now)
		now.idle(t) // also lets the read resolve "now" before the next append
		mustAppend(t, l, runA, evs(3, 2))
		equalData(t, "now", datas(now.take(t, 2)), evs(3, 2))
		equalData(t, "from start, live", datas(all.take(t, 2)), evs(3, 2))
		mustClose(t, l, runA)
		for _, r := range []*reader{all, now} {
			if err := r.end(t); err != nil {
				t.Fatal(err)
			}
		}
		// "now" on a closed log ends at once with nothing.
		got, err := readAll(t, l, runA, durable.Now)
		if err != nil || len(got) != 0 {
			t.Fatalf("Read(now) on a closed log = %d entries, %v; want none", len(got), err)
		}
	})

	sub("05_caught_up_reader_returns_cleanly_on_cancel", func(t *testing.T, l durable.Log) {
		offs := mustAppend(t, l, runA, evs(0, 2))
		r := startRead(t, l, runA, offs[1])
		r.idle(t)
		start := time.Now()
		r.cancel()
		if err := r.end(t); err != nil {
			t.Fatalf("cancelled read ended with %v, want nil", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("cancelled read took %v to end", d)
		}
	})

	sub("06_close_wakes_parked_readers_and_is_idempotent", func(t *testing.T, l durable.Log) {
		offs := mustAppend(t, l, runA, evs(0, 2))
		var rs []*reader
		for range 3 {
			rs = append(rs, startRead(t, l, runA, offs[1]))
		}
		for _, r := range rs {
			r.idle(t)
		}
		mustClose(t, l, runA)
		for _, r := range rs {
			if err := r.end(t); err != nil {
				t.Fatal(err)
			}
		}
		got, err := readAll(t, l, runA, offs[1])
		if err != nil || len(got) != 0 {
			t.Fatalf("read from the last offset after close = %d entries, %v; want none", len(got), err)
		}
		if err := l.Close(ctxT(t), runA); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := l.Append(ctxT(t), runA, evs(2, 1)); !errors.Is(err, durable.ErrLogClosed) {
			t.Fatalf("Append after Close: %v, want ErrLogClosed", err)
		}
		// Close of a run with no log creates an empty closed log.
		mustClose(t, l, runB)
		got, err = readAll(t, l, runB, durable.FromStart)
		if err != nil || len(got) != 0 {
			t.Fatalf("read of a closed empty log = %d entries, %v; want none", len(got), err)
		}
	})

	sub("07_snapshot_never_waits_and_returns_a_copy", func(t *testing.T, l durable.Log) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		snap, err := l.Snapshot(ctx, runA)
		if err != nil || snap == nil || len(snap) != 0 {
			t.Fatalf("Snapshot(unknown) = %v, %v; want empty non-nil slice, nil", snap, err)
		}
		// A snapshot must not have created the run: a concrete offset for
		// it is still an unknown run.
		other := newLog(t)
		foreignOffs := mustAppend(t, other, runA, evs(0, 1))
		if _, err := readAll(t, l, runA, foreignOffs[0]); !errors.Is(err, durable.ErrRunNotFound) {
			t.Fatalf("read of a run only snapshotted: %v, want ErrRunNotFound", err)
		}
		mustAppend(t, l, runA, evs(0, 3))
		ctx, cancel = context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		snap, err = l.Snapshot(ctx, runA) // open log: must not park
		if err != nil {
			t.Fatal(err)
		}
		equalData(t, "snapshot of open log", datas(snap), evs(0, 3))
		snap[0].Data[0] = 'X'
		snap[1].Data = nil
		again := mustSnapshot(t, l, runA)
		equalData(t, "snapshot after mutating a previous one", datas(again), evs(0, 3))
	})

	sub("08_offset_of_another_run_or_malformed_or_future_is_rejected", func(t *testing.T, l durable.Log) {
		offsA := mustAppend(t, l, runA, evs(0, 3))
		mustAppend(t, l, runB, evs(0, 3))
		bad := []string{offsA[0], "", "garbage", " " + offsA[0], offsA[0] + "\n", "a\x00b", "-2", "NOW"}
		for _, off := range bad {
			_, err := readAll(t, l, runB, off)
			wantErr(t, fmt.Sprintf("Read(runB, %q)", off), err, durable.ErrInvalidOffset)
			var oe *durable.OffsetError
			if !errors.As(err, &oe) || oe.Offset != off || !strings.Contains(err.Error(), fmt.Sprintf("%q", off)) {
				t.Fatalf("Read(runB, %q): error %v does not name the offset", off, err)
			}
		}
		// A future offset: minted for the same run by a longer log elsewhere.
		other := newLog(t)
		longer := mustAppend(t, other, runB, evs(0, 5))
		_, err := readAll(t, l, runB, longer[4])
		wantErr(t, "future offset", err, durable.ErrInvalidOffset)
		// The valid offsets still work.
		mustClose(t, l, runB)
		got, err := readAll(t, l, runB, mustSnapshot(t, l, runB)[1].Offset)
		if err != nil || len(got) != 1 {
			t.Fatalf("read after rejected offsets = %d entries, %v; want 1", len(got), err)
		}
	})

	sub("09_unknown_run_errors_and_first_chunk_deadline", func(t *testing.T, l durable.Log) {
		d := opts.deadline()
		other := newLog(t)
		foreign := mustAppend(t, other, runA, evs(0, 2))
		// A concrete offset for a run this log does not have: an error, at once.
		start := time.Now()
		_, err := readAll(t, l, runA, foreign[0])
		wantErr(t, "concrete offset, unknown run", err, durable.ErrRunNotFound)
		if el := time.Since(start); el > time.Second {
			t.Fatalf("unknown-run error took %v", el)
		}
		// A from-start join with no data errors after the deadline.
		for _, s := range []string{durable.FromStart, durable.Now} {
			start = time.Now()
			_, err = readAll(t, l, runB, s)
			wantErr(t, "sentinel read of a run with no data", err, durable.ErrRunNotFound)
			if el := time.Since(start); el < d*9/10 || el > d+2*time.Second {
				t.Fatalf("Read(%q) of a run with no data failed after %v, want about %v", s, el, d)
			}
		}
		// Data arriving within the deadline is delivered.
		r := startRead(t, l, runB, durable.FromStart)
		time.Sleep(d / 4)
		mustAppend(t, l, runB, evs(0, 1))
		equalData(t, "first chunk", datas(r.take(t, 1)), evs(0, 1))
		// Once data exists the deadline no longer applies.
		time.Sleep(d)
		r.idle(t)
		caughtUp := startRead(t, l, runB, durable.FromStart)
		caughtUp.take(t, 1)
		time.Sleep(d)
		caughtUp.idle(t)
		mustClose(t, l, runB)
		if err := r.end(t); err != nil {
			t.Fatal(err)
		}
		if err := caughtUp.end(t); err != nil {
			t.Fatal(err)
		}
	})

	sub("10_retention_prunes_closed_logs_only", func(t *testing.T, l durable.Log) {
		p, ok := l.(durable.Pruner)
		if !ok {
			t.Skip("log does not implement durable.Pruner")
		}
		before := time.Now().Add(-time.Hour)
		a := mustAppend(t, l, runA, evs(0, 2))
		mustAppend(t, l, runB, evs(0, 2))
		mustAppend(t, l, "run-open", evs(0, 2))
		mustClose(t, l, runA)
		mustClose(t, l, runB)
		if n, err := p.Prune(ctxT(t), before); err != nil || n != 0 {
			t.Fatalf("Prune(an hour ago) = %d, %v; want 0 (logs closed just now)", n, err)
		}
		if n, err := p.Prune(ctxT(t), time.Now().Add(time.Second)); err != nil || n != 2 {
			t.Fatalf("Prune(now) = %d, %v; want 2", n, err)
		}
		if s := mustSnapshot(t, l, runA); len(s) != 0 {
			t.Fatalf("pruned log still has %d entries", len(s))
		}
		if _, err := readAll(t, l, runA, a[0]); !errors.Is(err, durable.ErrRunNotFound) {
			t.Fatalf("read of a pruned log: %v, want ErrRunNotFound", err)
		}
		if s := mustSnapshot(t, l, "run-open"); len(s) != 2 {
			t.Fatalf("open log lost entries to pruning: %d left", len(s))
		}
	})

	sub("11_second_instance_continues_the_sequence", func(t *testing.T, l durable.Log) {
		l2 := l
		if opts != nil && opts.Reopen != nil {
			l2 = opts.Reopen(t, l)
		}
		a := mustAppend(t, l, runA, evs(0, 3))
		r := startRead(t, l2, runA, a[2])
		r.idle(t)
		b := mustAppend(t, l2, runA, evs(3, 2))
		all := append(append([]string{}, a...), b...)
		seen := map[string]bool{}
		for _, o := range all {
			if seen[o] {
				t.Fatalf("second instance reused offset %q: %q", o, all)
			}
			seen[o] = true
		}
		got := r.take(t, 2)
		equalData(t, "live on the second instance", datas(got), evs(3, 2))
		equalStrings(t, "live offsets", offsets(got), b)
		mustClose(t, l2, runA)
		if err := r.end(t); err != nil {
			t.Fatal(err)
		}
		// The first instance serves the continued log too.
		got, err := readAll(t, l, runA, a[2])
		if err != nil {
			t.Fatal(err)
		}
		equalStrings(t, "first instance reading the second's entries", offsets(got), b)
		equalData(t, "snapshot", datas(mustSnapshot(t, l, runA)), evs(0, 5))
	})

	sub("12_retried_append_with_same_producer_tuple_is_stored_once", func(t *testing.T, l durable.Log) {
		ctx := ctxT(t)
		p := durable.Producer{ID: "producer-1", Seq: 0}
		first, err := l.AppendWith(ctx, runA, evs(0, 3), durable.AppendOptions{Producer: p})
		if err != nil {
			t.Fatal(err)
		}
		again, err := l.AppendWith(ctx, runA, evs(0, 3), durable.AppendOptions{Producer: p})
		if err != nil {
			t.Fatal(err)
		}
		equalStrings(t, "retry offsets", again, first)
		p.Seq = 1
		next, err := l.AppendWith(ctx, runA, evs(3, 1), durable.AppendOptions{Producer: p})
		if err != nil || len(next) != 1 {
			t.Fatalf("next request: %q, %v", next, err)
		}
		// Concurrent retries of one request.
		p.Seq = 2
		var wg sync.WaitGroup
		results := make([][]string, 8)
		errs := make([]error, 8)
		for i := range results {
			wg.Go(func() {
				results[i], errs[i] = l.AppendWith(ctx, runA, evs(4, 2), durable.AppendOptions{Producer: p})
			})
		}
		wg.Wait()
		for i := range results {
			if errs[i] != nil {
				t.Fatalf("concurrent retry %d: %v", i, errs[i])
			}
			equalStrings(t, "concurrent retry offsets", results[i], results[0])
		}
		// Another producer with the same seq is a different request.
		other, err := l.AppendWith(ctx, runA, evs(6, 1), durable.AppendOptions{Producer: durable.Producer{ID: "producer-2", Seq: 0}})
		if err != nil || len(other) != 1 {
			t.Fatalf("other producer: %q, %v", other, err)
		}
		equalData(t, "stored once", datas(mustSnapshot(t, l, runA)), evs(0, 7))
		if _, err := l.AppendWith(ctx, runA, evs(0, 1), durable.AppendOptions{Producer: durable.Producer{ID: "producer-1", Seq: 0}}); !errors.Is(err, durable.ErrProducerConflict) {
			t.Fatalf("tuple reused for a different batch: %v, want ErrProducerConflict", err)
		}
	})

	sub("13_resume_from_kth_record_of_a_batch", func(t *testing.T, l durable.Log) {
		offs := mustAppend(t, l, runA, evs(0, 6))
		mustClose(t, l, runA)
		for k := range offs {
			got, err := readAll(t, l, runA, offs[k])
			if err != nil {
				t.Fatalf("resume after record %d: %v", k, err)
			}
			equalData(t, fmt.Sprintf("resume after record %d", k), datas(got), evs(k+1, len(offs)-k-1))
			equalStrings(t, "offsets", offsets(got), offs[k+1:])
		}
	})

	sub("14_upsert_validates_whole_batch", func(t *testing.T, l durable.Log) {
		u, ok := l.(durable.Upserter)
		if !ok {
			t.Skip("log does not implement durable.Upserter")
		}
		ctx := ctxT(t)
		offs := mustAppend(t, l, runA, evs(0, 3))
		stored := mustSnapshot(t, l, runA)
		got, err := u.Upsert(ctx, runA, stored)
		if err != nil {
			t.Fatal(err)
		}
		equalStrings(t, "re-upsert offsets", got, offs)
		equalData(t, "after re-upsert", datas(mustSnapshot(t, l, runA)), evs(0, 3))

		foreign := mustAppend(t, l, runB, evs(0, 5))
		other := newLog(t)
		ahead := mustAppend(t, other, runA, evs(0, 6))
		reject := map[string][]durable.Entry{
			"foreign offset":        {{Offset: offs[0], Data: ev(9)}, {Offset: foreign[4], Data: ev(9)}},
			"intra-batch duplicate": {{Offset: offs[1], Data: ev(9)}, {Offset: offs[1], Data: ev(8)}},
			"hole":                  {{Offset: offs[2], Data: ev(9)}, {Offset: ahead[4], Data: ev(9)}},
			"malformed":             {{Offset: "nope", Data: ev(9)}},
		}
		for name, batch := range reject {
			if _, err := u.Upsert(ctx, runA, batch); !errors.Is(err, durable.ErrInvalidOffset) {
				t.Fatalf("%s: %v, want ErrInvalidOffset", name, err)
			}
			equalData(t, name+": log unmodified", datas(mustSnapshot(t, l, runA)), evs(0, 3))
		}
		// Replace in place and extend the tail.
		got, err = u.Upsert(ctx, runA, []durable.Entry{{Offset: offs[1], Data: ev(11)}, {Offset: ahead[3], Data: ev(13)}})
		if err != nil {
			t.Fatal(err)
		}
		equalStrings(t, "upsert offsets", got, []string{offs[1], ahead[3]})
		equalData(t, "after upsert", datas(mustSnapshot(t, l, runA)), [][]byte{ev(0), ev(11), ev(2), ev(13)})
	})

	sub("slow_reader_does_not_block_producer", func(t *testing.T, l durable.Log) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		blocked := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range l.Read(ctx, runA, durable.FromStart) {
				close(blocked)
				<-ctx.Done() // never consumes another entry
				return
			}
		}()
		mustAppend(t, l, runA, evs(0, 1))
		<-blocked
		start := time.Now()
		for i := 1; i < 2001; i += 50 {
			mustAppend(t, l, runA, evs(i, 50))
		}
		if el := time.Since(start); el > wait {
			t.Fatalf("appends took %v with a stalled reader", el)
		}
		mustClose(t, l, runA)
		got, err := readAll(t, l, runA, durable.FromStart)
		if err != nil || len(got) != 2001 {
			t.Fatalf("fresh reader got %d entries, %v", len(got), err)
		}
		cancel()
		<-done
	})

	sub("many_concurrent_readers_see_the_same_log", func(t *testing.T, l durable.Log) {
		const readers, total = 50, 400
		var rs []*reader
		mustAppend(t, l, runA, evs(0, 1))
		for range readers {
			rs = append(rs, startRead(t, l, runA, durable.FromStart))
		}
		var want []string
		want = append(want, mustSnapshot(t, l, runA)[0].Offset)
		for i := 1; i < total; i += 7 {
			n := min(7, total-i)
			want = append(want, mustAppend(t, l, runA, evs(i, n))...)
		}
		mustClose(t, l, runA)
		for i, r := range rs {
			got := r.take(t, total)
			equalStrings(t, fmt.Sprintf("reader %d offsets", i), offsets(got), want)
			equalData(t, fmt.Sprintf("reader %d data", i), datas(got), evs(0, total))
			if err := r.end(t); err != nil {
				t.Fatal(err)
			}
		}
	})

	sub("tailers_racing_appends_and_close_all_end", func(t *testing.T, l durable.Log) {
		// Many tailers woken together while appends and the close land:
		// none may miss the close (a lost wake-up parks it forever).
		for round := range 12 {
			run := fmt.Sprint("race-", round)
			mustAppend(t, l, run, evs(0, 1))
			const readers = 100
			var wg sync.WaitGroup
			counts := make([]int, readers)
			errs := make([]error, readers)
			// Generous: 100 tailers are slow under -race on a loaded machine;
			// a lost wake-up parks forever, so it still fails.
			ctx, cancel := context.WithTimeout(t.Context(), 4*wait)
			for i := range readers {
				wg.Go(func() {
					for _, err := range l.Read(ctx, run, durable.FromStart) {
						if err != nil {
							errs[i] = err
							return
						}
						counts[i]++
					}
				})
			}
			n := 1 + round*5
			for i := range n {
				mustAppend(t, l, run, evs(1+i, 1))
			}
			mustClose(t, l, run)
			wg.Wait()
			timedOut := ctx.Err() != nil
			cancel()
			if timedOut {
				t.Fatalf("round %d: tailers still parked %v after the close", round, 4*wait)
			}
			for i := range readers {
				if errs[i] != nil || counts[i] != 1+n {
					t.Fatalf("round %d reader %d: %d entries, %v; want %d", round, i, counts[i], errs[i], 1+n)
				}
			}
		}
	})

	sub("ctx_cancel_ends_read_during_replay_and_break_stops", func(t *testing.T, l durable.Log) {
		mustAppend(t, l, runA, evs(0, 3000))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		n := 0
		for _, err := range l.Read(ctx, runA, durable.FromStart) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			if n == 10 {
				cancel()
			}
			if n > 2500 {
				t.Fatal("read went on long after its context was cancelled")
			}
		}
		n = 0
		for range l.Read(t.Context(), runA, durable.FromStart) {
			n++
			if n == 5 {
				break
			}
		}
	})

	sub("batched_read_is_read_in_batches", func(t *testing.T, l durable.Log) {
		br, ok := l.(durable.BatchReader)
		if !ok {
			t.Skip("the log reads entry by entry only")
		}
		mustAppend(t, l, runA, evs(0, 10))
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		var got []durable.Entry
		var sizes []int
		for es, err := range br.ReadBatches(ctx, runA, durable.FromStart) {
			if err != nil {
				t.Fatal(err)
			}
			if len(es) == 0 {
				t.Fatal("an empty batch")
			}
			if len(sizes) == 0 { // then tail the entries appended while the read is on
				mustAppend(t, l, runA, evs(10, 5))
				mustAppend(t, l, runA, evs(15, 1))
				mustClose(t, l, runA)
			}
			sizes = append(sizes, len(es))
			got = append(got, es...)
		}
		if ctx.Err() != nil {
			t.Fatalf("ReadBatches did not end within %v after the close (batches %v)", wait, sizes)
		}
		if sizes[0] < 2 {
			t.Fatalf("the first batch held %d of the 10 entries stored before the read (batches %v)", sizes[0], sizes)
		}
		want, err := readAll(t, l, runA, durable.FromStart)
		if err != nil {
			t.Fatal(err)
		}
		equalData(t, "batched read", datas(got), evs(0, 16))
		equalStrings(t, "batched read's offsets", offsets(got), offsets(want))

		got = got[:0]
		for es, err := range br.ReadBatches(ctx, runA, want[12].Offset) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, es...)
		}
		equalStrings(t, "batched read after an offset", offsets(got), offsets(want[13:]))

		calls := 0
		for es, err := range br.ReadBatches(ctx, runA, "not-an-offset") {
			calls++
			if !errors.Is(err, durable.ErrInvalidOffset) || es != nil {
				t.Fatalf("batched read from a malformed offset: %d entries, %v; want ErrInvalidOffset", len(es), err)
			}
		}
		if calls != 1 {
			t.Fatalf("batched read from a malformed offset yielded %d times, want once", calls)
		}
	})

	sub("concurrent_appends_fail_independently", func(t *testing.T, l durable.Log) {
		mustAppend(t, l, runB, evs(0, 1))
		mustClose(t, l, runB)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := range 32 {
			wg.Go(func() {
				if _, err := l.Append(ctxT(t), runA, evs(i, 2)); err != nil {
					errs <- fmt.Errorf("append to the open log: %w", err)
				}
			})
			wg.Go(func() {
				if _, err := l.Append(ctxT(t), runB, evs(i, 2)); !errors.Is(err, durable.ErrLogClosed) {
					errs <- fmt.Errorf("append to the closed log: %v, want ErrLogClosed", err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if n := len(mustSnapshot(t, l, runA)); n != 64 {
			t.Fatalf("open log has %d entries, want 64", n)
		}
		if n := len(mustSnapshot(t, l, runB)); n != 1 {
			t.Fatalf("closed log has %d entries, want 1", n)
		}
	})

	sub("run_ids_must_be_valid", func(t *testing.T, l durable.Log) {
		for _, id := range []string{"", "a\nb", "a\rb"} {
			if _, err := l.Append(ctxT(t), id, evs(0, 1)); err == nil {
				t.Fatalf("Append with run id %q succeeded", id)
			}
		}
	})

	sub("append_keeps_no_reference_to_the_batch", func(t *testing.T, l durable.Log) {
		// Single entries and batches, enough of them to pass a backend's
		// internal thresholds (a journal moved every few rows), each
		// scribbled over once Append has returned, as a caller reusing
		// its buffers would.
		var want [][]byte
		for i := range 40 {
			batch := evs(len(want), 1+i%3)
			want = append(want, evs(len(want), len(batch))...)
			mustAppend(t, l, runA, batch)
			for _, e := range batch {
				for j := range e {
					e[j] = 'X'
				}
			}
		}
		equalData(t, "stored entries", datas(mustSnapshot(t, l, runA)), want)
		mustClose(t, l, runA)
		all, err := readAll(t, l, runA, durable.FromStart)
		if err != nil {
			t.Fatal(err)
		}
		equalData(t, "read entries", datas(all), want)
	})
}

// ReadAcrossInstances checks that a read on local, fed by local's own
// appends (which a backend may hand its readers from memory), still
// delivers what another instance over the same storage appends afterwards,
// and ends when that instance closes the log. other must be able to wake
// local's readers (Postgres notifications, SQLite's PollInterval).
func ReadAcrossInstances(t *testing.T, local, other durable.Log) {
	t.Helper()
	const run = "run across instances"
	first := mustAppend(t, local, run, evs(0, 1))
	r := startRead(t, local, run, first[0])
	r.idle(t)
	mustAppend(t, local, run, evs(1, 2))
	equalData(t, "local appends", datas(r.take(t, 2)), evs(1, 2))
	r.idle(t) // parked, caught up with what local appended
	theirs := mustAppend(t, other, run, evs(3, 2))
	got := r.take(t, 2)
	equalData(t, "the other instance's appends", datas(got), evs(3, 2))
	equalStrings(t, "their offsets", offsets(got), theirs)
	mustAppend(t, local, run, evs(5, 1))
	equalData(t, "local again", datas(r.take(t, 1)), evs(5, 1))
	mustClose(t, other, run)
	if err := r.end(t); err != nil {
		t.Fatalf("read after the other instance closed the log: %v", err)
	}
}
