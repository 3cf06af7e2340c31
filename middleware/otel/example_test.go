package otel_test

import (
	"log"
	"strings"

	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/trace"

	"github.com/goai-sdk/goai/chat"
	otelmw "github.com/goai-sdk/goai/middleware/otel"
)

func Example() {
	// The application owns the SDK; the middleware needs only a Tracer and,
	// for the histograms, a Meter.
	tp := trace.NewTracerProvider()
	mp := metric.NewMeterProvider()
	tracing, err := otelmw.New(otelmw.Options{
		Tracer:         tp.Tracer("goai"),
		Meter:          mp.Meter("goai"),
		CaptureContent: true,
		Redact:         func(s string) string { return strings.ReplaceAll(s, "password", "[x]") },
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = chat.Options{Middleware: []*chat.Middleware{tracing}}
}
