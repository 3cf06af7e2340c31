// Package chattest provides utilities for testing code built on package
// chat, as net/http/httptest does for net/http: a scripted Adapter that
// replays adapter turns and records the requests it got, builders for
// common turns, and helpers to run a chat and look at its events.
package chattest

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// Adapter is a chat.Adapter that answers its N-th ChatStream call with
// Turns[N], chunk by chunk. Past the last turn it yields Err as a thrown
// error when set, else a RUN_ERROR "script exhausted". It is safe for
// concurrent use.
type Adapter struct {
	Turns [][]agui.Event
	// Err is thrown by calls past the last turn.
	Err error
	// Delay is waited before each chunk (the call's context cancels it).
	Delay time.Duration
	// ProviderName and ModelName default to "test" and "test-1".
	ProviderName, ModelName string

	mu       sync.Mutex
	requests []*chat.Request
}

// NewAdapter returns an Adapter that replays turns in order.
func NewAdapter(turns ...[]agui.Event) *Adapter { return &Adapter{Turns: turns} }

// Name implements chat.Adapter.
func (a *Adapter) Name() string { return orDefault(a.ProviderName, "test") }

// Model implements chat.Adapter.
func (a *Adapter) Model() string { return orDefault(a.ModelName, "test-1") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Requests returns the requests the adapter got so far, in order.
func (a *Adapter) Requests() []*chat.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.requests)
}

// ChatStream implements chat.Adapter.
func (a *Adapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	a.mu.Lock()
	n := len(a.requests)
	a.requests = append(a.requests, req)
	a.mu.Unlock()
	return func(yield func(agui.Event, error) bool) {
		if n >= len(a.Turns) {
			if a.Err != nil {
				yield(agui.Event{}, a.Err)
				return
			}
			yield(agui.Event{Type: agui.RunError, Message: "script exhausted"}, nil)
			return
		}
		for _, ev := range a.Turns[n] {
			if a.Delay > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(a.Delay):
				}
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// TextTurn is a model turn that says text in message id and finishes with
// reason and a small usage.
func TextTurn(id, text, reason string) []agui.Event {
	return []agui.Event{
		{Type: agui.RunStarted, ThreadID: "t", RunID: "r"},
		{Type: agui.TextMessageStart, MessageID: id, Role: "assistant"},
		{Type: agui.TextMessageContent, MessageID: id, Delta: text},
		{Type: agui.TextMessageEnd, MessageID: id},
		{Type: agui.RunFinished, ThreadID: "t", RunID: "r", FinishReason: reason,
			Usage: &agui.TokenUsage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}},
	}
}

// ToolTurn is a model turn that calls tool name once with args (JSON) and
// finishes with "tool_calls".
func ToolTurn(callID, name, args string) []agui.Event {
	return []agui.Event{
		{Type: agui.RunStarted, ThreadID: "t", RunID: "r"},
		{Type: agui.ToolCallStart, ToolCallID: callID, ToolCallName: name, Index: agui.Int(0)},
		{Type: agui.ToolCallArgs, ToolCallID: callID, Delta: args},
		{Type: agui.ToolCallEnd, ToolCallID: callID},
		{Type: agui.RunFinished, ThreadID: "t", RunID: "r", FinishReason: agui.FinishToolCalls},
	}
}

// User is a conversation of one user message.
func User(text string) []agui.ModelMessage {
	return []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text(text)}}
}

// Collect runs the chat and returns its events and the error that ended
// the stream, if any.
func Collect(t testing.TB, opts chat.Options) ([]agui.Event, error) {
	t.Helper()
	return CollectContext(context.Background(), t, opts)
}

// Types lists the events' types, space-separated: compact to compare and
// to print in a failure.
func Types(evs []agui.Event) string {
	b := make([]string, len(evs))
	for i, e := range evs {
		b[i] = string(e.Type)
	}
	return strings.Join(b, " ")
}

// WantTypes fails the test unless the events have exactly the given types.
func WantTypes(t testing.TB, evs []agui.Event, want ...agui.EventType) {
	t.Helper()
	w := make([]string, len(want))
	for i, e := range want {
		w[i] = string(e)
	}
	if got := Types(evs); got != strings.Join(w, " ") {
		t.Fatalf("events:\n got %s\nwant %s", got, strings.Join(w, " "))
	}
}
