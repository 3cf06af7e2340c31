package wire

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// Structured runs one streamed turn of a with req.OutputSchema = schema,
// collects the text and parses it as JSON.
func Structured(ctx context.Context, a chat.Adapter, req *chat.Request, schema json.RawMessage) (*chat.StructuredResult, error) {
	cp := *req
	cp.OutputSchema = schema
	cp.Tools = nil
	var b strings.Builder
	var usage *agui.TokenUsage
	for ev, err := range a.ChatStream(ctx, &cp) {
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case agui.TextMessageContent:
			b.WriteString(ev.Delta)
		case agui.RunFinished:
			usage = ev.Usage
		case agui.RunError:
			return nil, &chat.RunError{Message: ev.Message, Code: ev.Code}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ParseStructured(b.String(), usage)
}

// ParseStructured is the structured result whose text is raw; text that
// is not JSON is an error quoting its first 200 bytes.
func ParseStructured(raw string, usage *agui.TokenUsage) (*chat.StructuredResult, error) {
	var data any
	if err := json.Unmarshal([]byte(raw), &data); err != nil {
		content := raw
		if len(content) > 200 {
			content = content[:200] + "..."
		}
		return nil, errors.New("Failed to parse structured output as JSON. Content: " + content)
	}
	return &chat.StructuredResult{Data: data, RawText: raw, Usage: usage}, nil
}

// DataURL renders inline media as a data: URL.
func DataURL(src *agui.Source, defMime string) string {
	mime := src.MimeType
	if mime == "" {
		mime = defMime
	}
	return "data:" + mime + ";base64," + src.Value
}

// MediaValue returns a source's URL (for url sources) or data URL.
func MediaValue(src *agui.Source, defMime string) string {
	if src.Type == "url" {
		return src.Value
	}
	return DataURL(src, defMime)
}

// SystemText joins the system prompts.
func SystemText(ps []chat.SystemPrompt) string {
	var parts []string
	for _, p := range ps {
		if p.Content != "" {
			parts = append(parts, p.Content)
		}
	}
	return strings.Join(parts, "\n\n")
}

// ToolResultText renders a tool message's content as text.
func ToolResultText(m *agui.ModelMessage) string {
	if m.Content.IsParts() {
		return m.Content.String()
	}
	s := m.Content.String()
	if s == "" && m.Error != "" {
		return m.Error
	}
	return s
}

// ObjectOrEmpty returns raw if it is a JSON object, else {}.
func ObjectOrEmpty(raw string) json.RawMessage {
	t := strings.TrimSpace(raw)
	if len(t) > 0 && t[0] == '{' && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	return json.RawMessage("{}")
}

// SchemaOrEmpty returns a tool input schema, defaulting to an empty object schema.
func SchemaOrEmpty(s json.RawMessage) json.RawMessage {
	if len(s) == 0 || string(s) == "null" {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return s
}

// FunctionTools renders tools in the Chat Completions shape that OpenAI,
// compatible servers and Ollama share: {type:"function", function:{name,
// description, parameters}}.
func FunctionTools(tools []chat.ToolSpec) []map[string]any {
	out := make([]map[string]any, len(tools))
	for i, t := range tools {
		out[i] = map[string]any{"type": "function", "function": map[string]any{"name": t.Name,
			"description": t.Description, "parameters": SchemaOrEmpty(t.InputSchema)}}
	}
	return out
}

// ErrUnsupported is a request the provider cannot express.
type ErrUnsupported struct{ Msg string }

func (e *ErrUnsupported) Error() string { return e.Msg }
