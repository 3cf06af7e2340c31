package server_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
)

// BenchmarkPlainStream serves one plain (not durable) run per iteration
// over loopback HTTP: an unpaced scripted answer of 200 stamped tokens, read
// to its end by a client in the same process. It reports the events
// written and the cost per event (client included).
//
//	go test -run '^$' -bench PlainStream -benchmem ./server/
func BenchmarkPlainStream(b *testing.B) {
	const tokens = 200
	var sc strings.Builder
	sc.WriteString(`{"stampYield":true,"cycle":true,"turns":[[{"type":"RUN_STARTED","runId":"r","threadId":"t","model":"m"},` +
		`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant","model":"m"},`)
	for j := range tokens {
		fmt.Fprintf(&sc, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"w%d ","model":"m"},`, j)
	}
	sc.WriteString(`{"type":"TEXT_MESSAGE_END","messageId":"m","model":"m"},` +
		`{"type":"RUN_FINISHED","runId":"r","threadId":"t","model":"m","finishReason":"stop"}]]}`)
	s, err := scripted.Parse([]byte(sc.String()))
	if err != nil {
		b.Fatal(err)
	}
	adapter := scripted.New(s)
	h := server.ChatHandler(server.Config{RequestsPerSecond: -1, Logger: slog.New(slog.DiscardHandler), Options: func(*server.Request) (chat.Options, error) {
		return chat.Options{Adapter: adapter, Debug: chat.DebugNone()}, nil
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := []byte(`{"threadId":"t","runId":"r","state":{},"messages":[{"id":"u","role":"user","content":"hi"}],"tools":[],"context":[],"forwardedProps":{}}`)
	events := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("HTTP %d %v: %.200s", resp.StatusCode, err, out)
		}
		events += bytes.Count(out, []byte("\ndata:")) + 1
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}
