package chat_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
)

// The agui profile (the default) keeps every text message of a turn and
// answers every tool call; the tanstack profile reproduces 0.58.0.

func twoTextsThenCall(name, reason string) []agui.Event {
	return []agui.Event{
		{Type: agui.RunStarted, ThreadID: "t", RunID: "r"},
		{Type: agui.TextMessageStart, MessageID: "m1", Role: "assistant"},
		{Type: agui.TextMessageContent, MessageID: "m1", Delta: "Step one."},
		{Type: agui.TextMessageEnd, MessageID: "m1"},
		{Type: agui.TextMessageStart, MessageID: "m2", Role: "assistant"},
		{Type: agui.TextMessageContent, MessageID: "m2", Delta: "Step two."},
		{Type: agui.TextMessageEnd, MessageID: "m2"},
		{Type: agui.ToolCallStart, ToolCallID: "c1", ToolCallName: name, Index: agui.Int(0)},
		{Type: agui.ToolCallArgs, ToolCallID: "c1", Delta: `{"a":1,"b":2}`},
		{Type: agui.ToolCallEnd, ToolCallID: "c1"},
		{Type: agui.RunFinished, ThreadID: "t", RunID: "r", FinishReason: reason},
	}
}

type snapshotMessage struct {
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	ToolCalls json.RawMessage `json:"toolCalls"`
}

func snapshotOf(t *testing.T, evs []agui.Event) []snapshotMessage {
	t.Helper()
	for _, e := range evs {
		if e.Type == agui.MessagesSnapshot {
			var msgs []snapshotMessage
			if err := json.Unmarshal(e.Messages, &msgs); err != nil {
				t.Fatal(err)
			}
			return msgs
		}
	}
	t.Fatalf("no MESSAGES_SNAPSHOT in %s", chattest.Types(evs))
	return nil
}

func TestApprovalSnapshotKeepsEveryTextMessage(t *testing.T) {
	approve := &chat.Tool{Name: "add", NeedsApproval: true, Execute: func(context.Context, json.RawMessage) (any, error) { return 3, nil }}
	for _, p := range []agui.Profile{"", agui.ProfileTanStack} {
		var conv []agui.ModelMessage
		mw := &chat.Middleware{Name: "conv", OnChunk: func(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
			conv = c.Conversation()
			return chat.Pass, nil
		}}
		a := &chattest.Adapter{Turns: [][]agui.Event{twoTextsThenCall("add", agui.FinishToolCalls)}}
		evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{approve}, Middleware: []*chat.Middleware{mw}, Profile: p})
		if err != nil {
			t.Fatal(err)
		}
		snap := snapshotOf(t, evs)
		var got []string
		for _, m := range snap[1:] {
			got = append(got, m.ID+":"+m.Content+":"+map[bool]string{true: "calls", false: "-"}[m.ToolCalls != nil])
		}
		want := "m1:Step one.:-,m2:Step two.:calls"
		if p == agui.ProfileTanStack {
			want = "m2:Step one.Step two.:calls" // 0.58.0 runs the texts together
		}
		if strings.Join(got, ",") != want {
			t.Errorf("profile %q: snapshot %v, want %s", p, got, want)
		}
		if len(conv) != len(snap) {
			t.Errorf("profile %q: the conversation (%d messages) is not what the snapshot holds (%d)", p, len(conv), len(snap))
		}
	}
}

func TestSkippedToolCallGetsAResult(t *testing.T) {
	for _, tc := range []struct {
		reason, why string
		noFinish    bool
	}{
		{reason: agui.FinishLength, why: "cut off by its length limit"},
		{reason: agui.FinishStop, why: `finish reason "stop", not "tool_calls"`},
		{reason: agui.FinishToolCalls, noFinish: true, why: "without a finish reason"},
	} {
		t.Run(tc.why, func(t *testing.T) {
			var ran int
			add := addTool(nil)
			exec := add.Execute
			add.Execute = func(ctx context.Context, in json.RawMessage) (any, error) { ran++; return exec(ctx, in) }
			turn := twoTextsThenCall("add", tc.reason)
			if tc.noFinish {
				turn = turn[:len(turn)-1]
			}
			a := &chattest.Adapter{Turns: [][]agui.Event{turn, chattest.TextTurn("m3", "Sum is 3.", "stop")}}
			var conv []agui.ModelMessage
			mw := &chat.Middleware{Name: "conv", OnFinish: func(c *chat.Context, _ chat.FinishInfo) error { conv = c.Conversation(); return nil }}
			evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("add"), Tools: []*chat.Tool{add}, Middleware: []*chat.Middleware{mw}})
			if err != nil {
				t.Fatal(err)
			}
			var result *agui.Event
			for i := range evs {
				if evs[i].Type == agui.ToolCallResult {
					result = &evs[i]
				}
			}
			if result == nil || result.ToolCallID != "c1" {
				t.Fatalf("no TOOL_CALL_RESULT: %s", chattest.Types(evs))
			}
			var out struct{ Error string }
			if err := json.Unmarshal([]byte(result.Content), &out); err != nil || !strings.HasPrefix(out.Error, "Tool call not executed: ") || !strings.Contains(out.Error, tc.why) {
				t.Fatalf("the result %q does not say why (%s)", result.Content, tc.why)
			}
			if ran != 0 || len(a.Requests()) != 1 {
				t.Fatalf("the skipped call ran (%d) or the model was called again (%d calls)", ran, len(a.Requests()))
			}
			// The next request carries the call and its result: nothing is
			// left to run, and the provider sees an answered call.
			next := append(conv, agui.ModelMessage{Role: agui.RoleUser, Content: agui.Text("and now?")})
			if _, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: next, Tools: []*chat.Tool{add}}); err != nil {
				t.Fatal(err)
			}
			if ran != 0 {
				t.Fatal("the skipped call ran on the next request")
			}
			req := a.Requests()[1].Messages
			var call, answer bool
			for _, m := range req {
				for _, c := range m.ToolCalls {
					call = call || c.ID == "c1"
				}
				answer = answer || m.Role == agui.RoleTool && m.ToolCallID == "c1" && strings.Contains(m.Content.String(), "not executed")
			}
			if !call || !answer {
				t.Fatalf("the next model request lacks the call (%v) or its result (%v): %+v", call, answer, req)
			}
		})
	}
	// tanstack: silently dropped, as 0.58.0 does.
	a := &chattest.Adapter{Turns: [][]agui.Event{twoTextsThenCall("add", agui.FinishLength)}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("add"), Tools: []*chat.Tool{addTool(nil)}, Profile: agui.ProfileTanStack})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(chattest.Types(evs), string(agui.ToolCallResult)) {
		t.Fatalf("the tanstack profile must reproduce 0.58.0: %s", chattest.Types(evs))
	}
}

// Path A structured output: an error in the tool loop comes after a
// RUN_STARTED in the agui profile; 0.58.0 drops the loop's RUN_STARTED.
func TestStructuredLoopErrorAfterRunStarted(t *testing.T) {
	for _, p := range []agui.Profile{"", agui.ProfileTanStack} {
		a := &chattest.Adapter{Turns: [][]agui.Event{{
			{Type: agui.RunStarted, ThreadID: "t", RunID: "r"},
			{Type: agui.RunError, Message: "upstream 500", Code: "server_error"},
		}}}
		evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil)},
			OutputSchema: json.RawMessage(`{"type":"object"}`), Profile: p, Debug: chat.DebugNone()})
		if err != nil {
			t.Fatal(err)
		}
		got := chattest.Types(evs)
		want := "RUN_STARTED RUN_ERROR"
		if p == agui.ProfileTanStack {
			want = "RUN_ERROR"
		}
		if got != want {
			t.Errorf("profile %q: %s, want %s", p, got, want)
		}
	}
}

// The per-run state idiom of the package doc: a private capability provided
// in Setup keeps each run's state apart, with runs sharing one Middleware.
func TestPerRunStateIdiom(t *testing.T) {
	type counter struct{ chunks int }
	state := chat.NewCapability[*counter]("test.counter")
	got := make(chan int, 2)
	mw := &chat.Middleware{Name: "count",
		Setup: func(c *chat.Context) error { state.Provide(c, &counter{}); return nil },
		OnChunk: func(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
			st, ok := state.GetOptional(c)
			if !ok {
				t.Error("no state")
				return chat.Pass, nil
			}
			st.chunks++
			return chat.Pass, nil
		},
		OnFinish: func(c *chat.Context, _ chat.FinishInfo) error {
			st, _ := state.Get(c)
			got <- st.chunks
			return nil
		},
	}
	done := make(chan struct{})
	for _, text := range []string{"a", "b"} {
		go func() {
			defer func() { done <- struct{}{} }()
			a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", text, "stop")}}
			for range chat.Stream(context.Background(), chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}}) {
			}
		}()
	}
	<-done
	<-done
	if a, b := <-got, <-got; a != 5 || b != 5 {
		t.Fatalf("each run should count its own 5 chunks: %d, %d", a, b)
	}
}
