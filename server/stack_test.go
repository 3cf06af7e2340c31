//go:build !race

// The race detector's instrumentation changes frame sizes, so this file's
// measurement of stacks only holds without it.

package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/sqlite"
	"github.com/goai-sdk/goai/server"
)

// settledStacks runs collections until the bytes of goroutine stacks stop
// falling (each collection halves at most once a stack that is at most a
// quarter used) and returns them.
func settledStacks() uint64 {
	var ms runtime.MemStats
	prev := uint64(0)
	for range 12 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.StackInuse == prev {
			break
		}
		prev = ms.StackInuse
	}
	return ms.StackInuse
}

// stackPerStream opens n streams on h (each POST built by open), waits until
// each has delivered its first token and its model waits (parked receives
// one value per stream), then for settled to return, and returns the
// goroutine stack bytes and the goroutines the open streams hold, per
// stream, counting the client's side.
func stackPerStream(t *testing.T, h http.Handler, n int, parked <-chan struct{}, settled func(), open func(i int) *http.Request) (stack, goroutines float64) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0}}
	defer client.CloseIdleConnections()
	before, beforeG := settledStacks(), runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	bodies := make(chan *bufio.Reader, n)
	for i := range n {
		req := open(i).WithContext(ctx)
		req.URL.Scheme, req.URL.Host = "http", strings.TrimPrefix(srv.URL, "http://")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: status %d", i, res.StatusCode)
		}
		bodies <- bufio.NewReader(res.Body)
	}
	for range n {
		<-parked
	}
	// Every stream's first token reached its client.
	for range n {
		br := <-bodies
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading a stream before its first token: %v", err)
			}
			if strings.Contains(line, `"delta":"first "`) {
				break
			}
		}
	}
	settled()
	after, afterG := settledStacks(), runtime.NumGoroutine()
	return (float64(after) - float64(before)) / float64(n), float64(afterG-beforeG) / float64(n)
}

// An open stream whose model is waiting holds small goroutine stacks: a
// run spends most of its life so, and a server holds thousands of them.
// The engine and the server keep the frames under a model's wait small
// (events pass by pointer, setup and ending run in frames of their own), so
// that the collector can shrink the stacks of a waiting durable run's
// producer and reader to 8 KiB (it halves a stack only while less than a
// quarter of it, less 800 bytes, is in use).
//
// What any open response costs (the client's connection, a handler parked
// in its own wait) is measured first and subtracted. Before these frames
// were trimmed, a plain stream held 24-26 KiB more (256 streams) and a
// durable one 23-24 KiB; then about 9 KiB (a plain handler runs the engine
// under net/http's frames, and stays at 16 KiB) and 7-8 KiB. A waiting
// durable stream's connection is now taken over from net/http
// (Config.ReleaseIdleAfter): its run's producer and the log's reader
// replace net/http's two goroutines, and it holds 0-2 KiB more than the
// bare response.
func TestWaitingStreamsKeepSmallStacks(t *testing.T) {
	const n = 256
	body := func(i int) string { return chatBody("t-stack", fmt.Sprintf("stack-%d", i)) }
	parked := make(chan struct{}, n)
	release := make(chan struct{})
	control := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"first \"}\n\n"))
		http.NewResponseController(w).Flush()
		parked <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	base, baseG := stackPerStream(t, control, n, parked, func() {}, func(i int) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, "/api/chat", strings.NewReader(body(i)))
		return req
	})
	t.Logf("any open response: %.0f bytes of stacks and %.2f goroutines per stream", base, baseG)

	for _, tc := range []struct {
		name  string
		store func(t *testing.T) durable.Store
		extra float64 // bytes of stacks per stream beyond base
	}{
		{"plain", nil, 14 << 10},
		{"memory", func(*testing.T) durable.Store { return durable.NewMemory(nil) }, 5 << 10},
		{"sqlite", func(t *testing.T) durable.Store {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "goai.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Shutdown() })
			return s
		}, 5 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := newWaitingModel(n)
			cfg := server.Config{
				Options: func(*server.Request) (chat.Options, error) {
					return chat.Options{Adapter: model, Debug: chat.DebugNone()}, nil
				},
				RequestsPerSecond: -1,
				ReleaseIdleAfter:  time.Millisecond,
			}
			if tc.store != nil {
				cfg.Store = tc.store(t)
			}
			h := server.ChatHandler(cfg)
			defer func() {
				close(model.release)
				h.Wait()
				_ = h.Shutdown(t.Context())
			}()
			settled := func() {}
			if tc.store != nil {
				settled = func() {
					waitFor(t, "every waiting stream taken over", func() bool { return metric(t, h, "goai_streams_taken_over") == n })
				}
			}
			got, gotG := stackPerStream(t, h, n, model.parked, settled, func(i int) *http.Request {
				req, _ := http.NewRequest(http.MethodPost, "/api/chat", strings.NewReader(body(i)))
				req.Header.Set("Content-Type", "application/json")
				if tc.store != nil {
					req.Header.Set("X-Run-Id", fmt.Sprintf("stack-%d", i))
				}
				return req
			})
			t.Logf("%s: %.0f bytes of stacks per stream, %.0f beyond any open response; %.2f goroutines", tc.name, got, got-base, gotG)
			if got-base > tc.extra {
				t.Errorf("a waiting %s stream holds %.0f bytes of goroutine stacks beyond any open response; want at most %.0f", tc.name, got-base, tc.extra)
			}
			// Any open response holds two goroutines on each side (the
			// server's connection and its background reader; the client
			// transport's reader and writer). A waiting durable stream's
			// run needs a producer; its connection, taken over from
			// net/http, is watched without a goroutine of its own, so the
			// stream holds no more goroutines than the bare response.
			if tc.store != nil && gotG > baseG+0.05 {
				t.Errorf("a waiting %s stream holds %.2f goroutines, any open response %.2f: its connection was not taken over", tc.name, gotG, baseG)
			}
		})
	}
	close(release)
}
