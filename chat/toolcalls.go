package chat

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/goai-sdk/goai/agui"
)

// toolCallAccumulator assembles tool calls from a model turn (docs/engine.md §8).
type toolCallAccumulator struct {
	slots []int // insertion order of slot keys
	calls map[int]*agui.ToolCall
}

func (a *toolCallAccumulator) start(c *agui.Event) {
	for _, tc := range a.calls {
		if tc.ID == c.ToolCallID {
			return
		}
	}
	if a.calls == nil {
		a.calls = map[int]*agui.ToolCall{}
	}
	slot := len(a.calls)
	if c.Index != nil {
		slot = *c.Index
	}
	name := c.ToolCallName
	if name == "" {
		name = c.ToolName
	}
	if _, exists := a.calls[slot]; !exists {
		a.slots = append(a.slots, slot)
	}
	tc := &agui.ToolCall{ID: c.ToolCallID, Type: "function", Function: agui.FunctionCall{Name: name}}
	if c.Metadata != nil {
		tc.Metadata = c.Metadata
	}
	a.calls[slot] = tc
}

func (a *toolCallAccumulator) args(c *agui.Event) {
	for _, s := range a.slots {
		tc := a.calls[s]
		if tc.ID == c.ToolCallID {
			if c.Args != "" {
				tc.Function.Arguments = c.Args
			} else {
				tc.Function.Arguments += c.Delta
			}
			return
		}
	}
}

func (a *toolCallAccumulator) end(c *agui.Event) {
	for _, s := range a.slots {
		tc := a.calls[s]
		if tc.ID != c.ToolCallID {
			continue
		}
		if c.Input == nil {
			return
		}
		in := bytes.TrimSpace(c.Input)
		if len(in) == 0 || in[0] != '{' {
			tc.Function.Arguments = "{}"
		} else {
			var v any
			if json.Unmarshal(in, &v) == nil {
				b, _ := marshalCompact(v)
				tc.Function.Arguments = string(b)
			}
		}
		return
	}
}

// list returns complete calls (id and a non-blank name) in slot order.
func (a *toolCallAccumulator) list() []agui.ToolCall {
	var out []agui.ToolCall
	for _, s := range a.slots {
		tc := a.calls[s]
		if tc.ID != "" && strings.TrimSpace(tc.Function.Name) != "" {
			out = append(out, *tc)
		}
	}
	return out
}

func (a *toolCallAccumulator) has() bool { return len(a.list()) > 0 }

func (a *toolCallAccumulator) byID(id string) (agui.ToolCall, bool) {
	for _, s := range a.slots {
		if a.calls[s].ID == id {
			return *a.calls[s], true
		}
	}
	return agui.ToolCall{}, false
}

func (a *toolCallAccumulator) reset() {
	a.slots = a.slots[:0]
	clear(a.calls)
}

// marshalCompact is JSON.stringify for decoded values (no HTML escaping).
func marshalCompact(v any) ([]byte, error) { return agui.Marshal(v) }
