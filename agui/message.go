package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleReasoning = "reasoning"
)

// ModelMessage is a message as the engine and adapters see it.
type ModelMessage struct {
	Role             string          `json:"role"`
	Content          Content         `json:"content"`
	Name             string          `json:"name,omitempty"`
	ToolCalls        []ToolCall      `json:"toolCalls,omitempty"`
	ToolCallID       string          `json:"toolCallId,omitempty"`
	Thinking         []Thinking      `json:"thinking,omitempty"`
	StructuredOutput json.RawMessage `json:"structuredOutput,omitempty"`
	ID               string          `json:"id,omitempty"`
	CreatedAt        string          `json:"createdAt,omitempty"`
	// Error is the error an AG-UI tool message reports.
	Error string `json:"error,omitempty"`
	// Metadata is the AG-UI metadata bag; TanStack's own keys live under
	// "tanstack".
	Metadata map[string]any `json:"metadata,omitempty"`
}

// ToolCall is a function call requested by the model.
type ToolCall struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"` // "function"
	Function FunctionCall   `json:"function"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// FunctionCall names the tool and carries its JSON arguments as text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Thinking is a reasoning block carried back to the model.
type Thinking struct {
	Content   string `json:"content"`
	Signature string `json:"signature,omitempty"`
}

// ContentPart is one part of multimodal content.
type ContentPart struct {
	Type     string         `json:"type"` // text | image | audio | video | document
	Content  string         `json:"content,omitempty"`
	Source   *Source        `json:"source,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Source locates media: inline base64 data or a URL.
type Source struct {
	Type     string `json:"type"` // data | url
	Value    string `json:"value"`
	MimeType string `json:"mimeType,omitempty"`
}

// Content is message content: null, a string, or a list of parts.
// The zero value is null.
type Content struct {
	text  string
	parts []ContentPart
	kind  uint8 // 0 null, 1 text, 2 parts
}

// Text returns string content.
func Text(s string) Content { return Content{text: s, kind: 1} }

// Parts returns multimodal content.
func Parts(p ...ContentPart) Content { return Content{parts: p, kind: 2} }

// IsNull reports whether the content is null.
func (c Content) IsNull() bool { return c.kind == 0 }

// IsParts reports whether the content is a list of parts.
func (c Content) IsParts() bool { return c.kind == 2 }

// PartList returns the parts of list content.
func (c Content) PartList() []ContentPart { return c.parts }

// String returns the text of the content: the string itself, or the text
// parts joined, or "" for null.
func (c Content) String() string {
	switch c.kind {
	case 1:
		return c.text
	case 2:
		var b bytes.Buffer
		for _, p := range c.parts {
			if p.Type == "text" {
				b.WriteString(p.Content)
			}
		}
		return b.String()
	}
	return ""
}

// MarshalJSON writes null, a string or an array.
func (c Content) MarshalJSON() ([]byte, error) {
	switch c.kind {
	case 1:
		return appendString(nil, c.text), nil
	case 2:
		return marshalNoEscape(c.parts)
	}
	return []byte("null"), nil
}

// UnmarshalJSON reads null, a string or an array of parts. AG-UI text
// parts ({type:"text", text}) become TanStack ones ({type:"text", content}).
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = Content{}
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = Text(s)
		return nil
	case len(b) > 0 && b[0] == '[':
		var raw []struct {
			ContentPart
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			return fmt.Errorf("content parts: %w", err)
		}
		parts := make([]ContentPart, len(raw))
		for i, r := range raw {
			parts[i] = r.ContentPart
			if r.Type == "text" && r.Content == "" && r.Text != nil {
				parts[i].Content = *r.Text
			}
		}
		*c = Parts(parts...)
		return nil
	}
	return fmt.Errorf("content must be null, a string or an array, got %.20s", b)
}
