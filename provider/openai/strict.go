package openai

import (
	"encoding/json"
	"iter"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// withoutStrictNulls removes from every completed tool call's input the
// nulls strict mode made the model send for optional properties it left
// out (both APIs send tools with "strict": true), so the engine validates
// and runs the call against the tool's own schema. Argument deltas pass
// as streamed: the client sees what the model sent.
func withoutStrictNulls(req *chat.Request, events iter.Seq2[agui.Event, error]) iter.Seq2[agui.Event, error] {
	if req == nil || len(req.Tools) == 0 {
		return events
	}
	return func(yield func(agui.Event, error) bool) {
		for ev, err := range events {
			if err == nil && ev.Type == agui.ToolCallEnd && len(ev.Input) > 0 {
				ev.Input = strictInput(req.Tools, ev.ToolName, ev.Input)
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

func strictInput(tools []chat.ToolSpec, name string, input json.RawMessage) json.RawMessage {
	for _, t := range tools {
		if t.Name == name {
			return chat.StrictArguments(t.InputSchema, input)
		}
	}
	return input
}
