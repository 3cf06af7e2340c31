package server_test

import (
	"context"
	"iter"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable/sqlite"
	"github.com/goai-sdk/goai/server"
)

// pacedAdapter yields n tokens 20-100 ms apart, each carrying the time it
// was yielded (Unix nanoseconds) as its delta.
type pacedAdapter struct{ n int }

func (pacedAdapter) Name() string  { return "paced" }
func (pacedAdapter) Model() string { return "paced-1" }
func (a pacedAdapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		if !yield(agui.Event{Type: agui.RunStarted, ThreadID: req.ThreadID, RunID: req.RunID}, nil) ||
			!yield(agui.Event{Type: agui.TextMessageStart, MessageID: "m", Role: "assistant"}, nil) {
			return
		}
		for range a.n {
			select {
			case <-time.After(time.Duration(20+rand.IntN(81)) * time.Millisecond):
			case <-ctx.Done():
				return
			}
			if !yield(agui.Event{Type: agui.TextMessageContent, MessageID: "m", Delta: strconv.FormatInt(time.Now().UnixNano(), 10)}, nil) {
				return
			}
		}
		if yield(agui.Event{Type: agui.TextMessageEnd, MessageID: "m"}, nil) {
			yield(agui.Event{Type: agui.RunFinished, ThreadID: req.ThreadID, RunID: req.RunID, FinishReason: "stop"}, nil)
		}
	}
}

// BenchmarkDurableDeliveryLatency measures what durable delivery adds
// between the model yielding a token and the client reading it, with
// tokens paced 20-100 ms apart, on SQLite. Each iteration is one run of 40
// tokens; it reports p50, p99 and max of the added latency.
//
//	go test -run '^$' -bench DurableDeliveryLatency -benchtime 5x ./server/
func BenchmarkDurableDeliveryLatency(b *testing.B) {
	store, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Shutdown()
	h := server.ChatHandler(server.Config{
		Store: store,
		Options: func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: pacedAdapter{n: 40}, Debug: chat.DebugNone()}, nil
		},
		RequestsPerSecond: -1,
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		run := "lat-" + strconv.Itoa(i)
		res := post(b, context.Background(), srv.URL+"/api/chat", map[string]string{"X-Run-Id": run}, chatBody("t-"+run, run))
		for f, err := range agui.ReadSSE(res.Body) {
			if err != nil {
				b.Fatal(err)
			}
			if f.Event.Type == agui.TextMessageContent {
				at, _ := strconv.ParseInt(f.Event.Delta, 10, 64)
				lat = append(lat, time.Since(time.Unix(0, at)))
			}
		}
		res.Body.Close()
	}
	b.StopTimer()
	h.Wait()
	slices.Sort(lat)
	if len(lat) == 0 {
		b.Fatal("no tokens read")
	}
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
}
