package wiretest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/internal/wire"
)

// Suite is the transport behaviour every adapter must show.
type Suite struct {
	// New builds the adapter against opts (BaseURL points at the test server).
	New func(opts *wire.Options) chat.Adapter
	// BasePath is appended to the server URL to form BaseURL ("/v1", ...).
	BasePath string
	// Path is the suffix the adapter's request path must have.
	Path        string
	ContentType string
	// OK is a complete successful stream; Prefix a stream prefix holding at
	// least one text delta.
	OK, Prefix []byte
	// ErrorBody renders the provider's error JSON.
	ErrorBody func(status int, msg string) string
	// AuthHeader names the header that must carry the key; "" skips the check.
	AuthHeader string
}

type step func(w http.ResponseWriter, r *http.Request)

func (s Suite) server(t *testing.T, steps ...step) (string, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		if !strings.HasSuffix(r.URL.Path, s.Path) {
			t.Errorf("request path %q, want suffix %q", r.URL.Path, s.Path)
		}
		if strings.Contains(r.URL.RawQuery, Key) {
			t.Errorf("API key sent in the URL")
		}
		if s.AuthHeader != "" && !strings.Contains(r.Header.Get(s.AuthHeader), Key) {
			t.Errorf("header %s = %q, want the key", s.AuthHeader, r.Header.Get(s.AuthHeader))
		}
		if r.Header.Get("X-Test") != "yes" {
			t.Errorf("custom header missing")
		}
		if i >= len(steps) {
			i = len(steps) - 1
		}
		steps[i](w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + s.BasePath, &n
}

func (s Suite) ok(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", s.ContentType)
	_, _ = w.Write(s.OK)
}

func (s Suite) status(code int, msg string, hdr ...string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(s.ErrorBody(code, msg)))
	}
}

func reset(w http.ResponseWriter, _ *http.Request) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = c.Close()
	}
}

func (s Suite) prefixThenReset(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", s.ContentType)
	w.WriteHeader(200)
	_, _ = w.Write(s.Prefix)
	w.(http.Flusher).Flush()
	time.Sleep(20 * time.Millisecond)
	c, buf, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = buf.Flush()
		_ = c.Close()
	}
}

func (s Suite) adapter(t *testing.T, base string) chat.Adapter {
	o := Options(t, base)
	o.Headers = http.Header{"X-Test": {"yes"}}
	return s.New(o)
}

func last(t *testing.T, evs []agui.Event) agui.Event {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	return evs[len(evs)-1]
}

// Run runs the suite.
func (s Suite) Run(t *testing.T) {
	t.Run("HTTPError", func(t *testing.T) {
		base, n := s.server(t, s.status(400, "model not found; key "+Key+" rejected"))
		evs := Collect(t, s.adapter(t, base).ChatStream(Ctx(t), Req()))
		NoKey(t, evs)
		if got := Types(evs); len(got) != 2 || got[0] != "RUN_STARTED" || got[1] != "RUN_ERROR" {
			t.Fatalf("events %v", got)
		}
		e := evs[1]
		if e.Code != "400" || !strings.Contains(e.Message, "model not found") || e.Error == nil || e.Error.Code != "400" {
			t.Fatalf("RUN_ERROR %+v", e)
		}
		if n.Load() != 1 {
			t.Fatalf("400 was retried: %d requests", n.Load())
		}
	})
	t.Run("RetryBeforeFirstByte", func(t *testing.T) {
		base, n := s.server(t, s.status(503, "overloaded"), s.status(429, "slow down", "Retry-After", "0"), s.ok)
		evs := Collect(t, s.adapter(t, base).ChatStream(Ctx(t), Req()))
		CheckGrammar(t, evs)
		if e := last(t, evs); e.Type != agui.RunFinished {
			t.Fatalf("last event %+v", e)
		}
		if n.Load() != 3 {
			t.Fatalf("%d requests, want 3", n.Load())
		}
	})
	t.Run("RetryOnReset", func(t *testing.T) {
		base, n := s.server(t, reset, s.ok)
		evs := Collect(t, s.adapter(t, base).ChatStream(Ctx(t), Req()))
		CheckGrammar(t, evs)
		if e := last(t, evs); e.Type != agui.RunFinished {
			t.Fatalf("last event %+v", e)
		}
		if n.Load() != 2 {
			t.Fatalf("%d requests, want 2", n.Load())
		}
	})
	t.Run("RetriesExhausted", func(t *testing.T) {
		base, n := s.server(t, s.status(500, "boom"))
		evs := Collect(t, s.adapter(t, base).ChatStream(Ctx(t), Req()))
		if e := last(t, evs); e.Type != agui.RunError || e.Code != "500" || !strings.Contains(e.Message, "boom") {
			t.Fatalf("last event %+v", e)
		}
		if n.Load() != 3 {
			t.Fatalf("%d requests, want 3 (2 retries)", n.Load())
		}
	})
	t.Run("NoRetryAfterFirstByte", func(t *testing.T) {
		base, n := s.server(t, s.prefixThenReset, s.ok)
		evs := Collect(t, s.adapter(t, base).ChatStream(Ctx(t), Req()))
		e := last(t, evs)
		if e.Type != agui.RunError || e.Code != "incomplete_stream" {
			t.Fatalf("last event %+v (%v)", e, Types(evs))
		}
		if n.Load() != 1 {
			t.Fatalf("%d requests: retried after the first byte", n.Load())
		}
		starts := 0
		for _, ev := range evs {
			if ev.Type == agui.TextMessageContent {
				starts++
			}
		}
		if starts == 0 {
			t.Fatalf("no text before the reset: %v", Types(evs))
		}
	})
	t.Run("CancelClosesStream", func(t *testing.T) {
		closed := make(chan struct{})
		base, _ := s.server(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", s.ContentType)
			w.WriteHeader(200)
			_, _ = w.Write(s.Prefix)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			close(closed)
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev, err := range s.adapter(t, base).ChatStream(ctx, Req()) {
				if err != nil {
					return
				}
				if ev.Type == agui.TextMessageContent {
					cancel()
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatal("iterator did not stop after cancel")
		}
		select {
		case <-closed:
		case <-time.After(3 * time.Second):
			t.Fatal("server did not see the stream closed")
		}
	})
	t.Run("ConsumerStops", func(t *testing.T) {
		closed := make(chan struct{})
		base, _ := s.server(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", s.ContentType)
			w.WriteHeader(200)
			_, _ = w.Write(s.Prefix)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			close(closed)
		})
		for ev := range s.adapter(t, base).ChatStream(Ctx(t), Req()) {
			if ev.Type == agui.TextMessageContent {
				break
			}
		}
		select {
		case <-closed:
		case <-time.After(3 * time.Second):
			t.Fatal("server did not see the stream closed")
		}
	})
}
