// Package mwtest drives the real chat engine with a scripted adapter for
// the middleware tests.
package mwtest

import (
	"context"
	"iter"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// Turns is an adapter whose N-th call yields Turns[N]; past the end it
// yields a RUN_ERROR.
type Turns struct {
	mu    sync.Mutex
	Turns [][]agui.Event
	calls int
}

// Name implements chat.Adapter.
func (a *Turns) Name() string { return "test" }

// Model implements chat.Adapter.
func (a *Turns) Model() string { return "test-1" }

// Calls reports how many model calls were made.
func (a *Turns) Calls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// ChatStream implements chat.Adapter.
func (a *Turns) ChatStream(ctx context.Context, _ *chat.Request) iter.Seq2[agui.Event, error] {
	a.mu.Lock()
	n := a.calls
	a.calls++
	a.mu.Unlock()
	return func(yield func(agui.Event, error) bool) {
		if n >= len(a.Turns) {
			yield(agui.Event{Type: agui.RunError, Message: "script exhausted"}, nil)
			return
		}
		for _, ev := range a.Turns[n] {
			if ctx.Err() != nil || !yield(ev, nil) {
				return
			}
		}
	}
}

// TextTurn is one model turn answering text with the given deltas.
func TextTurn(msgID string, deltas ...string) []agui.Event {
	evs := []agui.Event{
		{Type: agui.RunStarted, ThreadID: "t", RunID: "r"},
		{Type: agui.TextMessageStart, MessageID: msgID, Role: "assistant"},
	}
	for _, d := range deltas {
		evs = append(evs, agui.Event{Type: agui.TextMessageContent, MessageID: msgID, Delta: d})
	}
	return append(evs,
		agui.Event{Type: agui.TextMessageEnd, MessageID: msgID},
		agui.Event{Type: agui.RunFinished, ThreadID: "t", RunID: "r", FinishReason: agui.FinishStop, Model: "test-1",
			Usage: &agui.TokenUsage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}})
}

// Call is one tool call in a ToolTurn.
type Call struct{ ID, Name, Args string }

// ToolTurn is one model turn calling tools.
func ToolTurn(calls ...Call) []agui.Event {
	evs := []agui.Event{{Type: agui.RunStarted, ThreadID: "t", RunID: "r"}}
	for i, c := range calls {
		evs = append(evs,
			agui.Event{Type: agui.ToolCallStart, ToolCallID: c.ID, ToolCallName: c.Name, Index: agui.Int(i)},
			agui.Event{Type: agui.ToolCallArgs, ToolCallID: c.ID, Delta: c.Args},
			agui.Event{Type: agui.ToolCallEnd, ToolCallID: c.ID})
	}
	return append(evs, agui.Event{Type: agui.RunFinished, ThreadID: "t", RunID: "r", FinishReason: agui.FinishToolCalls, Model: "test-1",
		Usage: &agui.TokenUsage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}})
}

// User is a one-message conversation.
func User(text string) []agui.ModelMessage {
	return []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text(text)}}
}

// Collect runs the engine to completion.
func Collect(t testing.TB, opts chat.Options) []agui.Event {
	t.Helper()
	var evs []agui.Event
	for ev, err := range chat.Stream(context.Background(), opts) {
		if err != nil {
			t.Fatalf("run failed: %v", err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// Of returns the events of one type.
func Of(evs []agui.Event, typ agui.EventType) []agui.Event {
	var out []agui.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// Bench runs one engine run per iteration over turn (a fresh adapter each
// time) and reports the time and allocations per chunk of turn.
func Bench(b *testing.B, turn []agui.Event, mws []*chat.Middleware) {
	b.Helper()
	opts := chat.Options{Messages: User("bench"), Middleware: mws, Debug: chat.DebugNone()}
	ctx := context.Background()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		opts.Adapter = &Turns{Turns: [][]agui.Event{turn}}
		for _, err := range chat.Stream(ctx, opts) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	chunks := float64(b.N * len(turn))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/chunks, "ns/chunk")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/chunks, "allocs/chunk")
}

// BenchTurn is a text turn of n deltas of size bytes each.
func BenchTurn(n, size int) []agui.Event {
	word := strings.Repeat("x", size-1) + " "
	deltas := make([]string, n)
	for i := range deltas {
		deltas[i] = word
	}
	return TextTurn("m", deltas...)
}
