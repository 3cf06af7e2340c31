package server_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
)

// FuzzHandler drives the whole HTTP handler with random methods, paths,
// headers and bodies: whatever comes in, the handler answers without
// panicking (the guard would turn a panic into a 500: that fails too) and
// every error is the JSON {error, code} shape.
func FuzzHandler(f *testing.F) {
	for _, seed := range []struct{ method, path, hdr, body string }{
		{"POST", "/api/chat", "X-Run-Id: r1", body},
		{"POST", "/api/chat", "X-Run-Id: r1\nLast-Event-ID: memory:v1:r1:1", body},
		{"POST", "/api/chat", "X-Run-Id: r1\nLast-Event-ID: x7zQLzBO:2", body},
		{"POST", "/api/chat", "", `{"threadId":"t","runId":"r","messages":[],"tools":[],"context":[]}`},
		{"GET", "/api/chat?runId=r1&offset=-1", "", ""},
		{"GET", "/api/chat?threadId=t1", "", ""},
		{"POST", "/api/chat/cancel", "", `{"runId":"r1"}`},
		{"GET", "/api/chat/runs/r1?offset=now", "Accept: application/x-ndjson", ""},
		{"POST", "/api/login", "", `{"token":"x"}`},
		{"OPTIONS", "/api/chat", "Origin: https://a.example\nAccess-Control-Request-Method: POST", ""},
		{"PUT", "/api/chat", "Content-Type: text/plain", "\xff\xfe"},
		{"POST", "/api/chat", "Origin: https://evil.example\nSec-Fetch-Site: cross-site", `{"threadId":` + strings.Repeat("[", 100)},
		{"GET", "/metrics", "", ""},
	} {
		f.Add(seed.method, seed.path, seed.hdr, []byte(seed.body))
	}
	sc, err := scripted.Parse([]byte(`{"name":"f","turns":[[{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"ok"},{"type":"TEXT_MESSAGE_END","messageId":"m"},{"type":"RUN_FINISHED","threadId":"t","runId":"r","finishReason":"stop"}]]}`))
	if err != nil {
		f.Fatal(err)
	}
	store := durable.NewMemory(&durable.MemoryOptions{FirstChunkDeadline: 10 * time.Millisecond})
	h := server.ChatHandler(server.Config{
		Store:          store,
		AllowedOrigins: []string{"https://a.example"},
		Options: func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: scripted.New(sc), Debug: chat.DebugNone()}, nil
		},
		RequestsPerSecond: -1,
		CancelPoll:        5 * time.Millisecond,
	})
	f.Cleanup(func() { h.StopAll(context.Canceled); h.Wait() })
	f.Fuzz(func(t *testing.T, method, path string, hdr string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, "http://127.0.0.1"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request net/http would ever hand a handler
		}
		for _, line := range strings.Split(hdr, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				req.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		}
		if req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		if rec.Code == http.StatusInternalServerError && strings.Contains(rec.Body.String(), `"code":"internal"`) {
			t.Fatalf("the handler panicked: %s %q %q: %s", method, path, hdr, rec.Body.String())
		}
		if rec.Code >= 400 && strings.HasPrefix(path, "/api/") && rec.Header().Get("Content-Type") == "application/json" &&
			(!strings.Contains(rec.Body.String(), `"error":`) || !strings.Contains(rec.Body.String(), `"code":`)) {
			t.Fatalf("%d without {error, code}: %s", rec.Code, rec.Body.String())
		}
	})
}
