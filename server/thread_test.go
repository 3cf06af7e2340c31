package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
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

type hydration struct {
	Messages  []agui.UIMessage `json:"messages"`
	ActiveRun *struct {
		RunID string `json:"runId"`
	} `json:"activeRun"`
	Interrupts *struct {
		RunID   string           `json:"runId"`
		Pending []agui.Interrupt `json:"pending"`
	} `json:"interrupts"`
}

// hydrate GETs /api/chat?threadId= and checks the response's framing.
func hydrate(t *testing.T, base, thread string) hydration {
	t.Helper()
	res, err := http.Get(base + "/api/chat?threadId=" + thread)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("hydrate %s: %d %s", thread, res.StatusCode, raw)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("hydrate Cache-Control %q, want no-store", cc)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("hydrate Content-Type %q", ct)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatalf("hydrate body %s: %v", raw, err)
	}
	for _, k := range []string{"messages", "activeRun", "interrupts"} {
		if _, ok := keys[k]; !ok {
			t.Fatalf("hydrate body %s lacks %q", raw, k)
		}
	}
	if string(keys["messages"]) == "null" {
		t.Fatalf("hydrate messages are null, want an array: %s", raw)
	}
	var h hydration
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatalf("hydrate body %s: %v", raw, err)
	}
	return h
}

// uiText is a UIMessage's text parts, concatenated.
func uiText(m agui.UIMessage) string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == agui.PartText {
			b.WriteString(p.Content)
		}
	}
	return b.String()
}

func roles(ms []agui.UIMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Role)
	}
	return out
}

func TestHydrateAfterFinishedRun(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, slowScenario(t, 3, 0), newStore(t))
			h := hydrate(t, e.srv.URL, "t1")
			if len(h.Messages) != 0 || h.ActiveRun != nil || h.Interrupts != nil {
				t.Fatalf("unknown thread hydrates %+v", h)
			}
			res := post(t, context.Background(), e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
			frames(t, res.Body)
			res.Body.Close()
			e.h.Wait()
			h = hydrate(t, e.srv.URL, "t1")
			if !slices.Equal(roles(h.Messages), []string{"user", "assistant"}) {
				t.Fatalf("messages %+v", h.Messages)
			}
			if h.Messages[0].ID != "u1" || uiText(h.Messages[0]) != "hi" {
				t.Fatalf("user turn %+v", h.Messages[0])
			}
			if got := uiText(h.Messages[1]); got != "w0 w1 w2 " {
				t.Fatalf("assistant text %q", got)
			}
			if h.ActiveRun != nil || h.Interrupts != nil {
				t.Fatalf("finished run: activeRun %+v interrupts %+v", h.ActiveRun, h.Interrupts)
			}
			// Another thread sees nothing of it.
			if o := hydrate(t, e.srv.URL, "t2"); len(o.Messages) != 0 || o.ActiveRun != nil {
				t.Fatalf("thread t2 hydrates %+v", o)
			}
		})
	}
}

// A reload while the run is still in a slow middleware setup sees the run
// and the user's turn; once the run ends it sees the final transcript.
func TestHydrateDuringRunningRun(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			slow := &chat.Middleware{Name: "slow-setup", Setup: func(c *chat.Context) error {
				select {
				case <-release:
				case <-time.After(30 * time.Second):
				}
				return nil
			}}
			e := newEnv(t, slowScenario(t, 2, 0), newStore(t), slow)
			res := post(t, context.Background(), e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
			defer res.Body.Close()
			next, stop := iter.Pull2(agui.ReadSSE(bufio.NewReader(res.Body)))
			defer stop()
			var once sync.Once
			unblock := func() { once.Do(func() { close(release) }) }
			defer unblock()
			// The agui profile puts RUN_STARTED before the run.accepted marker.
			for accepted := false; !accepted; {
				f, err, ok := next()
				if !ok || err != nil || f.Event.Type != agui.RunStarted && f.Event.Name != server.RunAcceptedEvent {
					t.Fatalf("before run.accepted: %s %v", f.Event.Type, err)
				}
				accepted = f.Event.Name == server.RunAcceptedEvent
			}
			h := hydrate(t, e.srv.URL, "t1")
			if h.ActiveRun == nil || h.ActiveRun.RunID != "r1" {
				t.Fatalf("activeRun during setup: %+v", h.ActiveRun)
			}
			if len(h.Messages) != 1 || h.Messages[0].Role != "user" || uiText(h.Messages[0]) != "hi" {
				t.Fatalf("messages during setup: %+v", h.Messages)
			}
			if h.Interrupts != nil {
				t.Fatalf("interrupts during setup: %+v", h.Interrupts)
			}
			unblock()
			for {
				if _, err, ok := next(); !ok || err != nil {
					break
				}
			}
			e.h.Wait()
			h = hydrate(t, e.srv.URL, "t1")
			if h.ActiveRun != nil || !slices.Equal(roles(h.Messages), []string{"user", "assistant"}) || uiText(h.Messages[1]) != "w0 w1 " {
				t.Fatalf("after the run: %+v", h)
			}
		})
	}
}

const pickScenario = `{"name":"pick","turns":[
  [{"type":"RUN_STARTED","threadId":"t1","runId":"r1"},
   {"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"client_pick","index":0},
   {"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"options\":[\"red\",\"blue\"]}"},
   {"type":"TOOL_CALL_END","toolCallId":"c1"},
   {"type":"RUN_FINISHED","threadId":"t1","runId":"r1","finishReason":"tool_calls"}],
  [{"type":"RUN_STARTED","threadId":"t1","runId":"r2"},
   {"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"},
   {"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"red it is"},
   {"type":"TEXT_MESSAGE_END","messageId":"m2"},
   {"type":"RUN_FINISHED","threadId":"t1","runId":"r2","finishReason":"stop"}]]}`

// newToolEnv is newEnv with the scripted catalogue's tools.
func newToolEnv(t *testing.T, scenario string, store durable.Store, tools ...string) (*httptest.Server, *server.Handler) {
	t.Helper()
	sc, err := scripted.Parse([]byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := (&scripted.Catalogue{}).Tools(tools)
	if err != nil {
		t.Fatal(err)
	}
	adapter := scripted.New(sc)
	h := server.ChatHandler(server.Config{
		Options: func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: adapter, Tools: ts, Debug: chat.DebugNone()}, nil
		},
		Store:      store,
		CancelPoll: 20 * time.Millisecond,
	})
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.StopAll(context.Canceled)
		h.Wait()
	})
	return srv, h
}

// After a durable run pauses on an interrupt, hydration lists its pending
// interrupts; once a resume run answers them, they are gone.
func TestHydrateAfterInterrupt(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			srv, h := newToolEnv(t, pickScenario, store, "client_pick")
			res := post(t, context.Background(), srv.URL, map[string]string{"X-Run-Id": "r1"}, body)
			fs := frames(t, res.Body)
			res.Body.Close()
			h.Wait()
			var snapshot json.RawMessage
			for _, f := range fs {
				if f.Event.Type == agui.MessagesSnapshot {
					snapshot = f.Event.Messages
				}
			}
			if fin := fs[len(fs)-1].Event; fin.Outcome == nil || fin.Outcome.Type != "interrupt" || snapshot == nil {
				t.Fatalf("first run ends %s", agui.AppendJSON(nil, &fin))
			}
			got := hydrate(t, srv.URL, "t1")
			if got.ActiveRun != nil {
				t.Fatalf("paused run is active: %+v", got.ActiveRun)
			}
			if got.Interrupts == nil || got.Interrupts.RunID != "r1" || len(got.Interrupts.Pending) != 1 || got.Interrupts.Pending[0].ID != "client_tool_c1" {
				t.Fatalf("interrupts %+v", got.Interrupts)
			}
			if p := got.Interrupts.Pending[0]; p.ToolCallID != "c1" || p.Reason == "" {
				t.Fatalf("pending interrupt %+v", p)
			}
			if !slices.Equal(roles(got.Messages), []string{"user", "assistant"}) {
				t.Fatalf("messages %+v", got.Messages)
			}
			hasCall := slices.ContainsFunc(got.Messages[1].Parts, func(p agui.UIPart) bool {
				return p.Type == agui.PartToolCall && p.ID == "c1" && p.Name == "client_pick"
			})
			if !hasCall {
				t.Fatalf("assistant turn lacks the pending tool call: %+v", got.Messages[1].Parts)
			}
			if rec, err := store.Get(context.Background(), "r1"); err != nil || rec.Status != durable.StatusInterrupted {
				t.Fatalf("record %+v %v", rec, err)
			}

			resume := `{"threadId":"t1","runId":"r2","parentRunId":"r1","state":{},"messages":` + string(snapshot) +
				`,"resume":[{"interruptId":"client_tool_c1","status":"resolved","payload":{"picked":"red"}}],"tools":[],"context":[],"forwardedProps":{}}`
			res = post(t, context.Background(), srv.URL, map[string]string{"X-Run-Id": "r2"}, resume)
			fs = frames(t, res.Body)
			res.Body.Close()
			h.Wait()
			if fs[len(fs)-1].Event.Type != agui.RunFinished {
				t.Fatalf("resume run ends %s", fs[len(fs)-1].Event.Type)
			}
			got = hydrate(t, srv.URL, "t1")
			if got.Interrupts != nil || got.ActiveRun != nil {
				t.Fatalf("after the resume: interrupts %+v activeRun %+v", got.Interrupts, got.ActiveRun)
			}
			last := got.Messages[len(got.Messages)-1]
			if last.Role != "assistant" || !strings.Contains(uiText(last), "red it is") {
				t.Fatalf("after the resume, last message %+v", last)
			}
		})
	}
}

// orderStore records the order hydration reads in.
type orderStore struct {
	*durable.Memory
	mu    sync.Mutex
	calls []string
}

func (s *orderStore) FindActiveRun(ctx context.Context, thread string) (durable.RunRecord, bool, error) {
	s.mu.Lock()
	s.calls = append(s.calls, "FindActiveRun")
	s.mu.Unlock()
	return s.Memory.FindActiveRun(ctx, thread)
}

func (s *orderStore) LoadThread(ctx context.Context, thread string) (durable.Thread, bool, error) {
	s.mu.Lock()
	s.calls = append(s.calls, "LoadThread")
	s.mu.Unlock()
	return s.Memory.LoadThread(ctx, thread)
}

// The active run is read before the transcript (docs/durable.md §1.4), and a store that
// keeps no threads still hydrates the active run.
func TestHydrateReadsActiveRunBeforeTranscript(t *testing.T) {
	s := &orderStore{Memory: durable.NewMemory(nil)}
	e := newEnv(t, slowScenario(t, 1, 0), s)
	hydrate(t, e.srv.URL, "t1")
	if !slices.Equal(s.calls, []string{"FindActiveRun", "LoadThread"}) {
		t.Fatalf("hydration read %v", s.calls)
	}

	type noThreads struct{ durable.Store }
	m := durable.NewMemory(nil)
	if _, err := m.CreateOrResume(context.Background(), durable.RunRecord{RunID: "r9", ThreadID: "t1", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, slowScenario(t, 1, 0), noThreads{m})
	if h := hydrate(t, e2.srv.URL, "t1"); h.ActiveRun == nil || h.ActiveRun.RunID != "r9" || len(h.Messages) != 0 {
		t.Fatalf("store without threads hydrates %+v", h)
	}
}
