package scripted

import (
	"context"
	"encoding/json"
	"iter"
	"regexp"
	"strings"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// Demo is the offline model goai serve uses when no provider is
// configured: it streams a reply word by word, and calls the add tool when
// asked to add two numbers, so the whole loop can be seen without a key.
type Demo struct {
	// WordDelay paces the stream; default 30ms.
	WordDelay time.Duration
}

// Name implements chat.Adapter.
func (Demo) Name() string { return "scripted" }

// Model implements chat.Adapter.
func (Demo) Model() string { return "demo-1" }

var twoNumbers = regexp.MustCompile(`(-?\d+(?:\.\d+)?)\D+?(-?\d+(?:\.\d+)?)`)

// ChatStream implements chat.Adapter.
func (d Demo) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		delay := d.WordDelay
		if delay == 0 {
			delay = 30 * time.Millisecond
		}
		runID := req.RunID
		if !yield(agui.Event{Type: agui.RunStarted, ThreadID: req.ThreadID, RunID: runID, Model: "demo-1"}, nil) {
			return
		}
		last := req.Messages[len(req.Messages)-1:]
		var reply string
		if len(last) == 1 && last[0].Role == agui.RoleTool {
			reply = "The tool answered " + last[0].Content.String() + "."
		} else {
			user := ""
			for i := len(req.Messages) - 1; i >= 0; i-- {
				if req.Messages[i].Role == agui.RoleUser {
					user = req.Messages[i].Content.String()
					break
				}
			}
			hasAdd := false
			for _, t := range req.Tools {
				hasAdd = hasAdd || t.Name == "add"
			}
			if m := twoNumbers.FindStringSubmatch(user); hasAdd && m != nil && strings.Contains(strings.ToLower(user), "add") {
				id := "call_" + newCallID()
				args, _ := json.Marshal(map[string]json.Number{"a": json.Number(m[1]), "b": json.Number(m[2])})
				for _, ev := range []agui.Event{
					{Type: agui.ToolCallStart, ToolCallID: id, ToolCallName: "add", Index: agui.Int(0)},
					{Type: agui.ToolCallArgs, ToolCallID: id, Delta: string(args)},
					{Type: agui.ToolCallEnd, ToolCallID: id, Input: args},
					{Type: agui.RunFinished, ThreadID: req.ThreadID, RunID: runID, FinishReason: agui.FinishToolCalls,
						Usage: &agui.TokenUsage{PromptTokens: 12, CompletionTokens: 8, TotalTokens: 20}},
				} {
					if !yield(ev, nil) {
						return
					}
				}
				return
			}
			reply = "Hello from the goai demo model. You said: " + user + " (set GOAI_MODEL and a provider key for a real model; ask me to add 2 and 3 to see a tool call)"
		}
		msgID := "msg_" + newCallID()
		if !yield(agui.Event{Type: agui.TextMessageStart, MessageID: msgID, Role: "assistant"}, nil) {
			return
		}
		words := strings.SplitAfter(reply, " ")
		for _, w := range words {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if !yield(agui.Event{Type: agui.TextMessageContent, MessageID: msgID, Delta: w}, nil) {
				return
			}
		}
		n := int64(len(words))
		for _, ev := range []agui.Event{
			{Type: agui.TextMessageEnd, MessageID: msgID},
			{Type: agui.RunFinished, ThreadID: req.ThreadID, RunID: runID, FinishReason: agui.FinishStop,
				Usage: &agui.TokenUsage{PromptTokens: 12, CompletionTokens: n, TotalTokens: 12 + n}},
		} {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func newCallID() string {
	return strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
}
