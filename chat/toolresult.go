package chat

import (
	"encoding/json"
	"fmt"

	"github.com/goai-sdk/goai/agui"
)

// errResult is a failed call's result: the model sees the message.
func errResult(id, name string, input json.RawMessage, msg string) ToolResult {
	return ToolResult{ToolCallID: id, ToolName: name, Result: map[string]any{"error": msg}, State: "output-error", Input: input}
}

func decodeResult(raw json.RawMessage) any {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	return v
}

// toolValue is a tool's return value as a result: a string holding JSON and
// raw JSON are decoded, so the result is not encoded twice.
func toolValue(v any) any {
	if s, ok := v.(string); ok {
		var d any
		if json.Unmarshal([]byte(s), &d) == nil {
			v = d
		}
	}
	if raw, ok := v.(json.RawMessage); ok {
		v = decodeResult(raw)
	}
	return v
}

// emitResults yields TOOL_CALL_RESULT chunks and records tool messages.
func (r *run) emitResults(results []ToolResult) error {
	for _, res := range results {
		content, msgContent := normalizeToolResult(res.Result)
		parent := ""
		for i := len(r.messages) - 1; i >= 0; i-- {
			if r.messages[i].Role == agui.RoleAssistant {
				parent = r.messages[i].ID
				break
			}
		}
		if parent == "" {
			parent = res.ToolCallID
		}
		ev := agui.Event{Type: agui.ToolCallResult, Timestamp: now(), MessageID: parent, ToolCallID: res.ToolCallID, Content: content, Role: "tool"}
		if res.State == "output-error" {
			ev.Metadata = map[string]any{"tanstack": map[string]any{"state": res.State}}
		}
		msg := agui.ModelMessage{Role: agui.RoleTool, Content: msgContent, ToolCallID: res.ToolCallID}
		replaced := false
		for i, m := range r.messages {
			if m.Role == agui.RoleTool && m.ToolCallID == res.ToolCallID && isPendingPlaceholder(m.Content) {
				r.messages[i] = msg
				replaced = true
				break
			}
		}
		if !replaced {
			r.messages = append(r.messages, msg)
		}
		r.mctx.Messages = r.messages
		if err := r.pipe(ev); err != nil {
			return err
		}
	}
	return nil
}

// normalizeToolResult renders a result for the event (always a string) and
// for history (multimodal part lists stay parts).
func normalizeToolResult(v any) (string, agui.Content) {
	switch x := v.(type) {
	case string:
		return x, agui.Text(x)
	case []agui.ContentPart:
		if len(x) > 0 {
			b, _ := marshalCompact(x)
			return string(b), agui.Parts(x...)
		}
	}
	if v == nil {
		return "null", agui.Text("null")
	}
	b, err := marshalCompact(v)
	if err != nil {
		s := fmt.Sprintf("%v", v)
		return s, agui.Text(s)
	}
	if parts, ok := asContentParts(b); ok {
		return string(b), agui.Parts(parts...)
	}
	return string(b), agui.Text(string(b))
}

func asContentParts(b []byte) ([]agui.ContentPart, bool) {
	if len(b) == 0 || b[0] != '[' {
		return nil, false
	}
	var parts []agui.ContentPart
	if json.Unmarshal(b, &parts) != nil || len(parts) == 0 {
		return nil, false
	}
	for _, p := range parts {
		switch p.Type {
		case "text":
		case "image", "audio", "video", "document":
			if p.Source == nil || (p.Source.Type == "data" && p.Source.MimeType == "") || (p.Source.Type != "data" && p.Source.Type != "url") {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return parts, true
}
