package otel_test

import (
	"context"
	"fmt"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/middleware/internal/mwtest"
	otelmw "github.com/goai-sdk/goai/middleware/otel"
)

// BenchmarkOtelPerChunk compares a run with no middleware and with the
// otel middleware (SDK tracer with an in-memory exporter behind a batcher,
// and a meter) over text turns of 64, 512 and 4096 deltas, with a no-op
// OnChunk middleware as a second baseline. The spans cost per run; what
// remains per chunk is the OnChunk call.
func BenchmarkOtelPerChunk(b *testing.B) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	}()
	noop := &chat.Middleware{Name: "noop", OnChunk: func(*chat.Context, *agui.Event) (chat.ChunkAction, error) { return chat.Pass, nil }}
	for _, n := range []int{64, 512, 4096} {
		turn := mwtest.BenchTurn(n, 8)
		b.Run(fmt.Sprintf("none/%d", n), func(b *testing.B) { mwtest.Bench(b, turn, nil) })
		b.Run(fmt.Sprintf("noop-onchunk/%d", n), func(b *testing.B) { mwtest.Bench(b, turn, []*chat.Middleware{noop}) })
		for _, capture := range []bool{false, true} {
			mw, err := otelmw.New(otelmw.Options{Tracer: tp.Tracer("bench"), Meter: mp.Meter("bench"), CaptureContent: capture})
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("otel-capture=%v/%d", capture, n), func(b *testing.B) {
				mwtest.Bench(b, turn, []*chat.Middleware{mw})
				exp.Reset()
			})
		}
	}
}
