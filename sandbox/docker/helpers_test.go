package docker_test

import (
	"context"
	"iter"
	"sync"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// scripted is a chat.Adapter playing one event list per model call.
type scripted struct {
	mu    sync.Mutex
	turns [][]agui.Event
	calls int
}

func (a *scripted) Name() string  { return "scripted" }
func (a *scripted) Model() string { return "scripted-1" }

func (a *scripted) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	a.mu.Lock()
	n := a.calls
	a.calls++
	a.mu.Unlock()
	return func(yield func(agui.Event, error) bool) {
		if n >= len(a.turns) {
			yield(agui.Event{Type: agui.RunError, Message: "script exhausted"}, nil)
			return
		}
		for _, ev := range a.turns[n] {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func textTurn(text string) []agui.Event {
	return []agui.Event{
		{Type: agui.RunStarted, ThreadID: "t", RunID: "r"},
		{Type: agui.TextMessageStart, MessageID: "m", Role: "assistant"},
		{Type: agui.TextMessageContent, MessageID: "m", Delta: text},
		{Type: agui.TextMessageEnd, MessageID: "m"},
		{Type: agui.RunFinished, ThreadID: "t", RunID: "r", FinishReason: agui.FinishStop},
	}
}

func toolTurn(callID, name, args string) []agui.Event {
	return []agui.Event{
		{Type: agui.RunStarted, ThreadID: "t", RunID: "r"},
		{Type: agui.ToolCallStart, ToolCallID: callID, ToolCallName: name, Index: agui.Int(0)},
		{Type: agui.ToolCallArgs, ToolCallID: callID, Delta: args},
		{Type: agui.ToolCallEnd, ToolCallID: callID},
		{Type: agui.RunFinished, ThreadID: "t", RunID: "r", FinishReason: agui.FinishToolCalls},
	}
}
