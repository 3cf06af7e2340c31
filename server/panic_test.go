package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
)

// panicAdapter panics inside its stream, on the producer's goroutine.
type panicAdapter struct{}

func (panicAdapter) Name() string  { return "panic" }
func (panicAdapter) Model() string { return "panic-1" }
func (panicAdapter) ChatStream(context.Context, *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		if !yield(agui.Event{Type: agui.RunStarted, ThreadID: "t", RunID: "r"}, nil) {
			return
		}
		panic("adapter bug: secret internals")
	}
}

const boomScenario = `{"name":"boom","turns":[
  [{"type":"RUN_STARTED","threadId":"t","runId":"r"},
   {"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"boom","index":0},
   {"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{}"},
   {"type":"TOOL_CALL_END","toolCallId":"c1"},
   {"type":"RUN_FINISHED","threadId":"t","runId":"r","finishReason":"tool_calls"}],
  [{"type":"RUN_STARTED","threadId":"t","runId":"r"},
   {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"},
   {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"after the tool"},
   {"type":"TEXT_MESSAGE_END","messageId":"m"},
   {"type":"RUN_FINISHED","threadId":"t","runId":"r","finishReason":"stop"}]]}`

// syncBuffer is a log sink shared by the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func chatBody(thread, run string) string {
	return `{"threadId":"` + thread + `","runId":"` + run + `","state":{},"messages":[{"id":"u-` + run + `","role":"user","content":"hi"}],"tools":[],"context":[],"forwardedProps":{}}`
}

// A panicking adapter, tool and middleware each end their own run (the
// adapter's with RUN_ERROR code "internal" in its log), while a slow run in
// flight finishes untouched and the server keeps answering.
func TestPanicsEndOnlyTheirRun(t *testing.T) {
	boom, err := scripted.Parse([]byte(boomScenario))
	if err != nil {
		t.Fatal(err)
	}
	slow := scripted.New(slowScenario(t, 30, 10))
	boomTool := &chat.Tool{Name: "boom", Execute: func(context.Context, json.RawMessage) (any, error) {
		var p *struct{ x int }
		return p.x, nil // nil dereference
	}}
	panicky := &chat.Middleware{Name: "panicky", OnStart: func(*chat.Context) error { panic("middleware bug") }}
	logs := &syncBuffer{}
	store := durable.NewMemory(nil)
	h := server.ChatHandler(server.Config{
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Store:  store,
		Options: func(r *server.Request) (chat.Options, error) {
			o := chat.Options{Debug: chat.DebugNone()}
			switch r.Input.ThreadID {
			case "slow":
				o.Adapter = slow
			case "adapter":
				o.Adapter = panicAdapter{}
			case "tool":
				o.Adapter, o.Tools = scripted.New(boom), []*chat.Tool{boomTool}
			case "middleware":
				o.Adapter, o.Middleware = scripted.New(slowScenario(t, 2, 0)), []*chat.Middleware{panicky}
			}
			return o, nil
		},
	})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.StopAll(context.Canceled); h.Wait() })

	slowRes := post(t, context.Background(), srv.URL+"/api/chat", map[string]string{"X-Run-Id": "slow-run"}, chatBody("slow", "slow-run"))
	defer slowRes.Body.Close()
	var slowFrames []agui.Frame
	slowDone := make(chan struct{})
	go func() { defer close(slowDone); slowFrames = frames(t, slowRes.Body) }()

	for _, thread := range []string{"adapter", "tool", "middleware"} {
		run := thread + "-run"
		res := post(t, context.Background(), srv.URL+"/api/chat", map[string]string{"X-Run-Id": run}, chatBody(thread, run))
		got := frames(t, res.Body)
		res.Body.Close()
		last := got[len(got)-1].Event
		if !last.IsTerminal() {
			t.Fatalf("%s: the run's stream ended without a terminal event: %s", thread, last.Type)
		}
		if thread == "adapter" && (last.Type != agui.RunError || last.Code != server.InternalCode) {
			t.Fatalf("adapter panic: last event %s code %q, want RUN_ERROR internal", last.Type, last.Code)
		}
		if thread == "adapter" && strings.Contains(last.Message, "secret internals") {
			t.Fatalf("the panic value reached the client: %q", last.Message)
		}
	}
	// A plain (not durable) stream ends the same way.
	plain := post(t, context.Background(), srv.URL+"/api/chat", nil, chatBody("adapter", "plain"))
	pf := frames(t, plain.Body)
	plain.Body.Close()
	if last := pf[len(pf)-1].Event; last.Type != agui.RunError || last.Code != server.InternalCode {
		t.Fatalf("plain stream after an adapter panic: %s %q", last.Type, last.Code)
	}
	// The server still answers, and the slow run completed in full.
	res := post(t, context.Background(), srv.URL+"/api/chat", nil, chatBody("middleware", "after"))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("after the panics: %d", res.StatusCode)
	}
	res.Body.Close()
	select {
	case <-slowDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the run in flight never finished")
	}
	if text := deltas(slowFrames); text != wantText(30) || slowFrames[len(slowFrames)-1].Event.Type != agui.RunFinished {
		t.Fatalf("the run in flight was disturbed: %q", text)
	}
	h.Wait()
	if rec, err := store.Get(context.Background(), "adapter-run"); err != nil || rec.Status != durable.StatusFailed || rec.Error == nil || rec.Error.Code != server.InternalCode {
		t.Fatalf("adapter run record %+v %v", rec, err)
	}
	out := logs.String()
	if !strings.Contains(out, "recovered panic") || !strings.Contains(out, "category=errors") || !strings.Contains(out, "goroutine") {
		t.Fatalf("no stack logged under the errors category:\n%s", out)
	}
}

func deltas(fs []agui.Frame) string {
	var b strings.Builder
	for _, f := range fs {
		if f.Event.Type == agui.TextMessageContent {
			b.WriteString(f.Event.Delta)
		}
	}
	return b.String()
}
