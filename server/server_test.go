package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// slowScenario streams n deltas, delay ms apart.
func slowScenario(t *testing.T, n, delay int) *scripted.Scenario {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"name":"slow","turns":[[{"type":"RUN_STARTED","threadId":"t1","runId":"r1"},{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`)
	for i := 0; i < n; i++ {
		b.WriteString(`,{"delayMs":` + itoa(delay) + `},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"w` + itoa(i) + ` "}`)
	}
	b.WriteString(`,{"type":"TEXT_MESSAGE_END","messageId":"m1"},{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","finishReason":"stop"}]]}`)
	sc, err := scripted.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func itoa(i int) string { return strconv.Itoa(i) }

const body = `{"threadId":"t1","runId":"r1","state":{},"messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[],"context":[],"forwardedProps":{}}`

type env struct {
	srv     *httptest.Server
	h       *server.Handler
	adapter *scripted.Adapter
	store   durable.Store
	mw      []*chat.Middleware
}

func newEnv(t *testing.T, sc *scripted.Scenario, store durable.Store, mws ...*chat.Middleware) *env {
	t.Helper()
	e := &env{adapter: scripted.New(sc), store: store, mw: mws}
	e.h = server.ChatHandler(server.Config{
		Options: func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: e.adapter, Middleware: e.mw, Debug: chat.DebugNone()}, nil
		},
		Store:      store,
		CancelPoll: 20 * time.Millisecond,
		// Any stream that waits is taken over from net/http, so that the
		// tests read taken-over connections as often as net/http's.
		ReleaseIdleAfter: time.Millisecond,
	})
	mux := http.NewServeMux()
	mux.Handle("/api/chat", e.h)
	mux.Handle("/api/chat/cancel", e.h)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		// The handler's taken-over streams end before the test server
		// closes: a connection handed back to it while its Close waits
		// would race with that wait.
		e.h.StopAll(context.Canceled)
		e.h.Wait()
		e.h.Shutdown(t.Context())
		e.srv.Close()
	})
	return e
}

func post(t testing.TB, ctx context.Context, url string, hdr map[string]string, b string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func frames(t *testing.T, r io.Reader) []agui.Frame {
	t.Helper()
	var out []agui.Frame
	for f, err := range agui.ReadSSE(r) {
		if err != nil {
			t.Fatalf("reading SSE: %v", err)
		}
		out = append(out, f)
	}
	return out
}

func TestBadBodies(t *testing.T) {
	e := newEnv(t, slowScenario(t, 1, 0), nil)
	res := post(t, context.Background(), e.srv.URL+"/api/chat", nil, `{"threadId":1}`)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(b), "threadId must be a string") || !strings.Contains(string(b), "runId must be a string") {
		t.Fatalf("bad body: %d %s", res.StatusCode, b)
	}
	res = post(t, context.Background(), e.srv.URL+"/api/chat", nil, `{"threadId":"`+strings.Repeat("x", server.DefaultMaxBodyBytes)+`"}`)
	res.Body.Close()
	if res.StatusCode != 413 {
		t.Fatalf("oversized body: %d", res.StatusCode)
	}
	res = post(t, context.Background(), e.srv.URL+"/api/chat", nil, `{"threadId":`)
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Fatalf("malformed JSON: %d %s", res.StatusCode, b)
	}
}

// The client drops mid-run and re-attaches with Last-Event-ID: no gap, no
// duplicate, and the model ran once.
func TestDurableReconnectNoGapNoDuplicate(t *testing.T) {
	e := newEnv(t, slowScenario(t, 20, 15), durable.NewMemory(nil))
	ctx, cancel := context.WithCancel(context.Background())
	res := post(t, ctx, e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
	br := bufio.NewReader(res.Body)
	var first []agui.Frame
	var last string
	for f, err := range agui.ReadSSE(br) {
		if err != nil {
			break
		}
		first = append(first, f)
		last = f.ID
		if len(first) == 6 {
			break
		}
	}
	cancel()
	res.Body.Close()
	if last == "" {
		t.Fatal("durable frames carry no id")
	}
	res = post(t, context.Background(), e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1", "Last-Event-ID": last}, body)
	rest := frames(t, res.Body)
	res.Body.Close()
	all := append(first, rest...)
	seen := map[string]bool{}
	var text strings.Builder
	for _, f := range all {
		if seen[f.ID] {
			t.Fatalf("duplicate offset %s", f.ID)
		}
		seen[f.ID] = true
		if f.Event.Type == agui.TextMessageContent {
			text.WriteString(f.Event.Delta)
		}
	}
	want := ""
	for i := 0; i < 20; i++ {
		want += "w" + itoa(i) + " "
	}
	if text.String() != want {
		t.Fatalf("text after reconnect:\n got %q\nwant %q", text.String(), want)
	}
	if all[len(all)-1].Event.Type != agui.RunFinished {
		t.Fatalf("last event %s", all[len(all)-1].Event.Type)
	}
	if n := len(e.adapter.Calls()); n != 1 {
		t.Fatalf("model called %d times", n)
	}
}

func TestDurableJoinAndOffsetErrors(t *testing.T) {
	e := newEnv(t, slowScenario(t, 3, 0), durable.NewMemory(nil))
	res := post(t, context.Background(), e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
	live := frames(t, res.Body)
	res.Body.Close()
	get := func(q string) (int, string) {
		res, err := http.Get(e.srv.URL + "/api/chat" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, joined := get("?runId=r1&offset=-1")
	if code != 200 || len(frames(t, strings.NewReader(joined))) != len(live) {
		t.Fatalf("join: %d, %d frames, want %d", code, len(frames(t, strings.NewReader(joined))), len(live))
	}
	if code, b := get("?runId=r1"); code != 400 || !strings.Contains(b, server.NoResumeOffset) {
		t.Fatalf("no offset: %d %s", code, b)
	}
	if code, b := get("?runId=r1&offset=bogus"); code != 400 || !strings.Contains(b, "bogus") {
		t.Fatalf("bad offset: %d %s", code, b)
	}
	if code, _ := get("?runId=nope&offset=-1"); code != 404 {
		t.Fatalf("unknown run: %d", code)
	}
}

func TestDurableCancelEndsLogWithRunError(t *testing.T) {
	store := durable.NewMemory(nil)
	e := newEnv(t, slowScenario(t, 200, 20), store)
	res := post(t, context.Background(), e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
	br := bufio.NewReader(res.Body)
	n := 0
	var got []agui.Frame
	for f, err := range agui.ReadSSE(br) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
		if n++; n == 5 {
			c := post(t, context.Background(), e.srv.URL+"/api/chat/cancel", nil, `{"runId":"r1"}`)
			c.Body.Close()
			if c.StatusCode != 200 {
				t.Fatalf("cancel: %d", c.StatusCode)
			}
		}
	}
	res.Body.Close()
	last := got[len(got)-1].Event
	if last.Type != agui.RunError || last.Code != "cancelled" {
		t.Fatalf("log ends with %s %q", last.Type, last.Code)
	}
	e.h.Wait()
	rec, err := store.Get(context.Background(), "r1")
	if err != nil || rec.Status != durable.StatusAborted || rec.CancelRequested == nil || !*rec.CancelRequested {
		t.Fatalf("record %+v %v", rec, err)
	}
	c := post(t, context.Background(), e.srv.URL+"/api/chat/cancel", nil, `{"runId":"nope"}`)
	c.Body.Close()
	if c.StatusCode != 404 {
		t.Fatalf("cancel unknown: %d", c.StatusCode)
	}
}

// The client leaves while a middleware's setup is still running: the run
// is notified, keeps going, and finishes its work into the log.
func TestDurableDisconnectDuringSlowSetup(t *testing.T) {
	var notified, finished atomic.Bool
	setupStarted := make(chan struct{})
	slow := &chat.Middleware{Name: "slow-setup",
		Setup: func(c *chat.Context) error {
			close(setupStarted)
			time.Sleep(150 * time.Millisecond)
			d, err := chat.RunDisconnectCapability.Get(c)
			if err != nil {
				return err
			}
			d.Subscribe(func(context.Context) error { notified.Store(true); return nil })
			return nil
		},
		OnFinish: func(*chat.Context, chat.FinishInfo) error { finished.Store(true); return nil },
	}
	store := durable.NewMemory(nil)
	e := newEnv(t, slowScenario(t, 3, 0), store, slow)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-setupStarted; cancel() }()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/api/chat", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Run-Id", "r1")
	if res, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	e.h.Wait()
	if !notified.Load() || !finished.Load() {
		t.Fatalf("notified=%v finished=%v", notified.Load(), finished.Load())
	}
	entries, err := store.Snapshot(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	var lastEv agui.Event
	if err := json.Unmarshal(entries[len(entries)-1].Data, &lastEv); err != nil {
		t.Fatal(err)
	}
	if lastEv.Type != agui.RunFinished {
		t.Fatalf("log ends with %s", lastEv.Type)
	}
}

func TestCheck45SSEFramingAndHeaders(t *testing.T) {
	e := newEnv(t, slowScenario(t, 2, 0), nil)
	res := post(t, context.Background(), e.srv.URL+"/api/chat", nil, body)
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	h := res.Header
	if h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" || h.Get("Connection") != "keep-alive" {
		t.Fatalf("headers %v", h)
	}
	frames := strings.Split(strings.TrimSuffix(string(raw), "\n\n"), "\n\n")
	for _, f := range frames {
		if !strings.HasPrefix(f, "data: {") || strings.Contains(f, "\n") {
			t.Fatalf("frame %q is not a single data line", f)
		}
	}
	if bytes.Contains(raw, []byte("[DONE]")) || bytes.Contains(raw, []byte("event:")) || bytes.Contains(raw, []byte("\nid:")) {
		t.Fatalf("unexpected framing: %s", raw)
	}
	// NDJSON when the client accepts it.
	res = post(t, context.Background(), e.srv.URL+"/api/chat", map[string]string{"Accept": "application/x-ndjson"}, body)
	raw, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.Header.Get("Content-Type") != "application/x-ndjson" || !bytes.HasPrefix(raw, []byte(`{"type":`)) {
		t.Fatalf("ndjson: %s %s", res.Header.Get("Content-Type"), raw)
	}
}

// An interrupt and its resume over HTTP, exactly as the TanStack client
// sends them: a new POST with parentRunId and a resume batch.
func TestInterruptAndResumeOverHTTP(t *testing.T) {
	sc, err := scripted.Parse([]byte(`{"name":"pick","turns":[
	  [{"type":"RUN_STARTED","threadId":"t1","runId":"r1"},
	   {"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"client_pick","index":0},
	   {"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"options\":[\"red\",\"blue\"]}"},
	   {"type":"TOOL_CALL_END","toolCallId":"c1"},
	   {"type":"RUN_FINISHED","threadId":"t1","runId":"r1","finishReason":"tool_calls"}],
	  [{"type":"RUN_STARTED","threadId":"t1","runId":"r2"},
	   {"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"},
	   {"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"red it is"},
	   {"type":"TEXT_MESSAGE_END","messageId":"m2"},
	   {"type":"RUN_FINISHED","threadId":"t1","runId":"r2","finishReason":"stop"}]]}`))
	if err != nil {
		t.Fatal(err)
	}
	cat := &scripted.Catalogue{}
	tools, _ := cat.Tools([]string{"client_pick"})
	adapter := scripted.New(sc)
	h := server.ChatHandler(server.Config{Options: func(*server.Request) (chat.Options, error) {
		return chat.Options{Adapter: adapter, Tools: tools, Debug: chat.DebugNone()}, nil
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	res := post(t, context.Background(), srv.URL, nil, body)
	fs := frames(t, res.Body)
	res.Body.Close()
	fin := fs[len(fs)-1].Event
	if fin.Outcome == nil || fin.Outcome.Type != "interrupt" || fin.Outcome.Interrupts[0].ID != "client_tool_c1" {
		t.Fatalf("first run: %s", agui.AppendJSON(nil, &fin))
	}
	var snapshot json.RawMessage
	for _, f := range fs {
		if f.Event.Type == agui.MessagesSnapshot {
			snapshot = f.Event.Messages
		}
	}
	resume := `{"threadId":"t1","runId":"r2","parentRunId":"r1","state":{},"messages":` + string(snapshot) +
		`,"resume":[{"interruptId":"client_tool_c1","status":"resolved","payload":{"picked":"red"}}],"tools":[],"context":[],"forwardedProps":{}}`
	res = post(t, context.Background(), srv.URL, nil, resume)
	fs = frames(t, res.Body)
	res.Body.Close()
	if fs[len(fs)-1].Event.Type != agui.RunFinished || fs[1].Event.Type != agui.ToolCallResult || fs[1].Event.Content != `{"picked":"red"}` {
		var ts []string
		for _, f := range fs {
			ts = append(ts, string(f.Event.Type))
		}
		t.Fatalf("resume run: %v", ts)
	}
	calls := adapter.Calls()
	if len(calls) != 2 || calls[1].Messages[len(calls[1].Messages)-1].Role != "tool" {
		t.Fatalf("second model call: %+v", calls)
	}
}

func TestStructuredOutputOverHTTP(t *testing.T) {
	sc, err := scripted.Parse([]byte(`{"name":"so","structured":{"raw":"{\"answer\":\"4\"}"},"turns":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	adapter := scripted.New(sc)
	h := server.ChatHandler(server.Config{Options: func(*server.Request) (chat.Options, error) {
		return chat.Options{Adapter: adapter, Debug: chat.DebugNone()}, nil
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	b := strings.Replace(body, `"forwardedProps":{}`, `"forwardedProps":{"outputSchema":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}}`, 1)
	res := post(t, context.Background(), srv.URL, nil, b)
	fs := frames(t, res.Body)
	res.Body.Close()
	var complete *agui.Event
	for i := range fs {
		if fs[i].Event.Name == "structured-output.complete" {
			complete = &fs[i].Event
		}
	}
	if complete == nil || !strings.Contains(string(complete.Value), `"object":{"answer":"4"}`) || fs[len(fs)-1].Event.Type != agui.RunFinished {
		t.Fatalf("structured stream: %+v", fs)
	}
}

func TestFormatQueryParameterSelectsNDJSON(t *testing.T) {
	e := newEnv(t, slowScenario(t, 1, 0), nil)
	res := post(t, context.Background(), e.srv.URL+"/api/chat?format=ndjson", nil, body)
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.Header.Get("Content-Type") != "application/x-ndjson" || !bytes.HasPrefix(raw, []byte(`{"type":`)) {
		t.Fatalf("?format=ndjson: %s %s", res.Header.Get("Content-Type"), raw)
	}
}
