package durabletest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// benchEvent is a typical encoded AG-UI event (~100 bytes).
func benchEvent(i int) []byte {
	return fmt.Appendf(nil, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-000001","delta":"token %08d of the answer"}`, i)
}

// Bench runs the storage benchmarks against logs from newLog (a new, empty
// log per call, cleaned up by the callee):
//
//   - Append/batch=N: appends b.N events in batches of N from one producer;
//   - Append/parallel: 16 producers on 16 runs, batches of 32 (group commit),
//     and 100 producers on 100 runs appending one event at a time (paced
//     models: small groups);
//   - Replay100k: catch-up read of a closed 100,000-event log;
//   - FanOut100: one producer, 100 live readers of the same run.
//
// Each reports events/s.
func Bench(b *testing.B, newLog func(tb testing.TB) durable.Log) {
	ctx := context.Background()
	for _, size := range []int{1, 32} {
		b.Run(fmt.Sprintf("Append/batch=%d", size), func(b *testing.B) {
			l := newLog(b)
			batch := make([][]byte, size)
			for i := range batch {
				batch[i] = benchEvent(i)
			}
			b.ResetTimer()
			for n := 0; n < b.N; n += size {
				if _, err := l.Append(ctx, "bench", batch[:min(size, b.N-n)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
	for _, shape := range []struct{ producers, size int }{{16, 32}, {100, 1}} {
		b.Run(fmt.Sprintf("Append/parallel=%dxbatch=%d", shape.producers, shape.size), func(b *testing.B) {
			l := newLog(b)
			batch := make([][]byte, shape.size)
			for i := range batch {
				batch[i] = benchEvent(i)
			}
			per := (b.N + shape.producers - 1) / shape.producers
			b.ResetTimer()
			var wg sync.WaitGroup
			for p := range shape.producers {
				wg.Go(func() {
					run := fmt.Sprint("bench-", p)
					for n := 0; n < per; n += shape.size {
						if _, err := l.Append(ctx, run, batch[:min(shape.size, per-n)]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(per*shape.producers)/b.Elapsed().Seconds(), "events/s")
		})
	}
	b.Run("Replay100k", func(b *testing.B) {
		const total = 100_000
		l := newLog(b)
		batch := make([][]byte, 1000)
		for n := 0; n < total; n += len(batch) {
			for i := range batch {
				batch[i] = benchEvent(n + i)
			}
			if _, err := l.Append(ctx, "replay", batch); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Close(ctx, "replay"); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			n := 0
			for _, err := range l.Read(ctx, "replay", durable.FromStart) {
				if err != nil {
					b.Fatal(err)
				}
				n++
			}
			if n != total {
				b.Fatalf("replayed %d events, want %d", n, total)
			}
		}
		b.ReportMetric(float64(total*b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/replay")
	})
	b.Run("FanOut100", func(b *testing.B) {
		const readers = 100
		l := newLog(b)
		if _, err := l.Append(ctx, "fan", [][]byte{benchEvent(0)}); err != nil {
			b.Fatal(err)
		}
		want := b.N + 1
		var wg sync.WaitGroup
		var started sync.WaitGroup
		started.Add(readers)
		errs := make(chan error, readers)
		for range readers {
			wg.Go(func() {
				n := 0
				defer func() {
					if n == 0 {
						started.Done()
					}
				}()
				rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				defer cancel()
				for _, err := range l.Read(rctx, "fan", durable.FromStart) {
					if err != nil {
						errs <- err
						return
					}
					if n++; n == 1 {
						started.Done()
					}
				}
				if n != want {
					errs <- fmt.Errorf("reader got %d events, want %d (ctx: %v)", n, want, rctx.Err())
				}
			})
		}
		started.Wait()
		batch := make([][]byte, 32)
		for i := range batch {
			batch[i] = benchEvent(i)
		}
		b.ResetTimer()
		for n := 0; n < b.N; n += 32 {
			if _, err := l.Append(ctx, "fan", batch[:min(32, b.N-n)]); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Close(ctx, "fan"); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(b.N*readers)/b.Elapsed().Seconds(), "deliveries/s")
	})
}
