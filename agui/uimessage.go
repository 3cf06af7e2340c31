package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// UI message part types.
const (
	PartText             = "text"
	PartImage            = "image"
	PartAudio            = "audio"
	PartVideo            = "video"
	PartDocument         = "document"
	PartToolCall         = "tool-call"
	PartToolResult       = "tool-result"
	PartThinking         = "thinking"
	PartStructuredOutput = "structured-output"
	PartUIResource       = "ui-resource"
)

// Tool-call part states.
const (
	ToolAwaitingInput     = "awaiting-input"
	ToolInputStreaming    = "input-streaming"
	ToolInputComplete     = "input-complete"
	ToolApprovalRequested = "approval-requested"
	ToolApprovalResponded = "approval-responded"
	ToolComplete          = "complete"
	ToolError             = "error"
)

// UIMessage is a message as chat UIs hold it: an id, a role
// (system, user or assistant) and an ordered list of parts.
type UIMessage struct {
	ID        string         `json:"id"`
	Role      string         `json:"role"`
	Parts     []UIPart       `json:"parts"`
	CreatedAt string         `json:"createdAt,omitempty"`
	Name      string         `json:"name,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Approval is a tool-call part's approval state.
type Approval struct {
	ID            string `json:"id"`
	NeedsApproval bool   `json:"needsApproval"`
	Approved      *bool  `json:"approved,omitempty"`
}

// UIPart is one part of a UIMessage, flattened: which fields are meaningful
// depends on Type.
//
//   - text: Content, Metadata
//   - image, audio, video, document: Source, Metadata
//   - tool-call: ID, Name, Arguments, Input, State, Approval, Output, Metadata
//   - tool-result: ToolCallID, Content or ContentParts, State
//     ("streaming" | "complete" | "error"), Error, and optionally ID, Name,
//     Metadata, CreatedAt
//   - thinking: Content, Signature, and optionally ID, StepID
//   - structured-output: Status, Raw, Partial, Data, Reasoning, ErrorMessage
//   - ui-resource and any other type: RawJSON, the part verbatim (ToolCallID
//     and Name hold a ui-resource's toolCallId and toolName)
//
// Input, Output, Partial and Data are raw JSON; nil means absent (a JSON
// null is kept as "null").
type UIPart struct {
	Type string

	Content      string
	ContentParts []ContentPart // tool-result content when it is a list
	Source       *Source
	Metadata     map[string]any

	ID         string
	Name       string
	Arguments  string
	Input      json.RawMessage
	State      string
	Approval   *Approval
	Output     json.RawMessage
	ToolCallID string
	Error      *string
	CreatedAt  string
	Signature  string
	StepID     string

	Status       string
	Raw          string
	Partial      json.RawMessage
	Data         json.RawMessage
	Reasoning    string
	ErrorMessage *string

	RawJSON json.RawMessage
}

// isContentPartType reports whether t maps directly to a ModelMessage
// content part.
func isContentPartType(t string) bool {
	switch t {
	case PartText, PartImage, PartAudio, PartVideo, PartDocument:
		return true
	}
	return false
}

// contentPart returns the ModelMessage content part of a text or media part.
func (p *UIPart) contentPart() ContentPart {
	return ContentPart{Type: p.Type, Content: p.Content, Source: p.Source, Metadata: p.Metadata}
}

// MarshalJSON writes the part with the keys its type defines.
func (p UIPart) MarshalJSON() ([]byte, error) {
	if p.RawJSON != nil && !isKnownPart(p.Type) {
		return p.RawJSON, nil
	}
	return p.appendJSON(make([]byte, 0, 128))
}

// appendJSON appends the part as MarshalJSON writes it, compacted as
// encoding/json compacts a Marshaler's output. A raw JSON field that is
// not JSON is an error, as encoding/json makes it.
func (p *UIPart) appendJSON(b []byte) ([]byte, error) {
	if p.RawJSON != nil && !isKnownPart(p.Type) {
		if !json.Valid(p.RawJSON) {
			return nil, fmt.Errorf("agui: %s part: invalid JSON", p.Type)
		}
		return appendCompact(b, p.RawJSON), nil
	}
	o := &obj{b: append(b, '{'), start: len(b)}
	o.str("type", p.Type)
	switch p.Type {
	case PartText:
		o.strAlways("content", p.Content)
		o.any("metadata", p.Metadata)
	case PartImage, PartAudio, PartVideo, PartDocument:
		o.any("source", p.Source)
		o.any("metadata", p.Metadata)
	case PartToolCall:
		o.strAlways("id", p.ID)
		o.strAlways("name", p.Name)
		o.strAlways("arguments", p.Arguments)
		o.raw("input", p.Input)
		o.strAlways("state", p.State)
		o.any("approval", p.Approval)
		o.raw("output", p.Output)
		o.any("metadata", p.Metadata)
	case PartToolResult:
		o.str("id", p.ID)
		o.str("name", p.Name)
		o.strAlways("toolCallId", p.ToolCallID)
		if p.ContentParts != nil {
			o.any("content", p.ContentParts)
		} else {
			o.strAlways("content", p.Content)
		}
		o.strAlways("state", p.State)
		if p.Error != nil {
			o.strAlways("error", *p.Error)
		}
		o.any("metadata", p.Metadata)
		o.str("createdAt", p.CreatedAt)
	case PartThinking:
		o.str("id", p.ID)
		o.strAlways("content", p.Content)
		o.str("stepId", p.StepID)
		o.str("signature", p.Signature)
	case PartStructuredOutput:
		o.strAlways("status", p.Status)
		o.raw("partial", p.Partial)
		o.raw("data", p.Data)
		o.strAlways("raw", p.Raw)
		o.str("reasoning", p.Reasoning)
		if p.ErrorMessage != nil {
			o.strAlways("errorMessage", *p.ErrorMessage)
		}
	}
	if o.err != nil {
		return nil, fmt.Errorf("agui: %s part: %w", p.Type, o.err)
	}
	return o.close(), nil
}

func isKnownPart(t string) bool {
	switch t {
	case PartText, PartImage, PartAudio, PartVideo, PartDocument, PartToolCall, PartToolResult,
		PartThinking, PartStructuredOutput:
		return true
	}
	return false
}

// UnmarshalJSON reads a part of any type. Fields of the wrong JSON kind are
// ignored, as the reference ignores them; unknown part types are kept
// verbatim in RawJSON.
func (p *UIPart) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("message part: %w", err)
	}
	*p = UIPart{}
	p.Type = rawString(m["type"])
	if p.Type == "" {
		return fmt.Errorf("message part: missing string \"type\"")
	}
	if !isKnownPart(p.Type) {
		p.RawJSON = append(json.RawMessage(nil), b...)
		if p.Type == PartUIResource {
			p.ToolCallID = rawString(m["toolCallId"])
			p.Name = rawString(m["toolName"])
		}
		return nil
	}
	p.Metadata = rawObject(m["metadata"])
	switch p.Type {
	case PartText:
		p.Content = rawString(m["content"])
	case PartImage, PartAudio, PartVideo, PartDocument:
		if v, ok := m["source"]; ok {
			var s Source
			if json.Unmarshal(v, &s) == nil && !isNull(v) {
				p.Source = &s
			}
		}
	case PartToolCall:
		p.ID = rawString(m["id"])
		p.Name = rawString(m["name"])
		p.Arguments = rawString(m["arguments"])
		p.Input = present(m, "input")
		p.State = rawString(m["state"])
		p.Output = present(m, "output")
		if v, ok := m["approval"]; ok && !isNull(v) {
			var a struct {
				ID            string `json:"id"`
				NeedsApproval bool   `json:"needsApproval"`
				Approved      any    `json:"approved"`
			}
			if json.Unmarshal(v, &a) == nil {
				p.Approval = &Approval{ID: a.ID, NeedsApproval: a.NeedsApproval}
				if b, ok := a.Approved.(bool); ok {
					p.Approval.Approved = &b
				}
			}
		}
	case PartToolResult:
		p.ID = rawString(m["id"])
		p.Name = rawString(m["name"])
		p.ToolCallID = rawString(m["toolCallId"])
		p.State = rawString(m["state"])
		p.CreatedAt = rawString(m["createdAt"])
		if v, ok := m["error"]; ok && !isNull(v) {
			s := rawString(v)
			p.Error = &s
		}
		if v := m["content"]; len(v) > 0 && v[0] == '[' {
			var c Content
			if c.UnmarshalJSON(v) == nil {
				p.ContentParts = c.PartList()
				if p.ContentParts == nil {
					p.ContentParts = []ContentPart{}
				}
			}
		} else {
			p.Content = rawString(v)
		}
	case PartThinking:
		p.ID = rawString(m["id"])
		p.Content = rawString(m["content"])
		p.Signature = rawString(m["signature"])
		p.StepID = rawString(m["stepId"])
	case PartStructuredOutput:
		p.Status = rawString(m["status"])
		p.Raw = rawString(m["raw"])
		p.Partial = present(m, "partial")
		p.Data = present(m, "data")
		p.Reasoning = rawString(m["reasoning"])
		if v, ok := m["errorMessage"]; ok {
			s := rawString(v)
			p.ErrorMessage = &s
		}
	}
	return nil
}

// rawString returns v's string value, or "" when v is not a JSON string.
func rawString(v json.RawMessage) string {
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// rawObject returns v as a map when it is a JSON object, else nil.
func rawObject(v json.RawMessage) map[string]any {
	if len(v) == 0 || v[0] != '{' {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(v, &m) != nil {
		return nil
	}
	return m
}

func isNull(v json.RawMessage) bool { return string(v) == "null" }

// present returns the raw value of key, or nil when the key is absent.
func present(m map[string]json.RawMessage, key string) json.RawMessage {
	v, ok := m[key]
	if !ok {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return append(json.RawMessage(nil), v...)
	}
	return b.Bytes()
}

// obj builds a JSON object in key order, JSON.stringify style, in b from
// start on.
type obj struct {
	b     []byte
	start int   // where the object's '{' is in b
	err   error // a raw value that is not JSON
}

func newObj() *obj { return &obj{b: append(make([]byte, 0, 128), '{')} }

func (o *obj) key(k string) {
	if len(o.b) > o.start+1 {
		o.b = append(o.b, ',')
	}
	o.b = appendString(o.b, k)
	o.b = append(o.b, ':')
}

func (o *obj) str(k, v string) {
	if v != "" {
		o.strAlways(k, v)
	}
}

func (o *obj) strAlways(k, v string) {
	o.key(k)
	o.b = appendString(o.b, v)
}

func (o *obj) raw(k string, v json.RawMessage) {
	if v == nil {
		return
	}
	if !json.Valid(v) {
		o.err = fmt.Errorf("invalid JSON in %q", k)
		return
	}
	o.key(k)
	o.b = appendCompact(o.b, v)
}

// any writes v unless it is a nil map, slice or pointer.
func (o *obj) any(k string, v any) {
	switch x := v.(type) {
	case nil:
		return
	case map[string]any:
		if x == nil {
			return
		}
	case *Source:
		if x == nil {
			return
		}
	case *Approval:
		if x == nil {
			return
		}
	case []ContentPart:
		if x == nil {
			return
		}
	}
	b, err := marshalNoEscape(v)
	if err != nil {
		return
	}
	o.key(k)
	o.b = append(o.b, b...)
}

func (o *obj) close() []byte { return append(o.b, '}') }

// MarshalJSON writes the part without HTML escaping; a text part always
// carries its content, even when empty (a text part without one is not a
// valid content part to the reference).
func (p ContentPart) MarshalJSON() ([]byte, error) {
	o := newObj()
	o.strAlways("type", p.Type)
	if p.Type == PartText || p.Content != "" {
		o.strAlways("content", p.Content)
	}
	o.any("source", p.Source)
	o.any("metadata", p.Metadata)
	return o.close(), nil
}

// AppendUIMessages appends msgs as a JSON array, byte for byte what
// encoding/json writes for them with HTML escaping off, without its
// reflection and its second pass over each part's MarshalJSON output (a
// durable run's transcript is encoded twice a run; that was about 15 us of
// a short run's CPU).
func AppendUIMessages(b []byte, msgs []UIMessage) ([]byte, error) {
	if msgs == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i := range msgs {
		m := &msgs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendGoString(b, m.ID)
		b = append(b, `,"role":`...)
		b = appendGoString(b, m.Role)
		b = append(b, `,"parts":`...)
		if m.Parts == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for j := range m.Parts {
				if j > 0 {
					b = append(b, ',')
				}
				var err error
				if b, err = m.Parts[j].appendJSON(b); err != nil {
					return nil, err
				}
			}
			b = append(b, ']')
		}
		if m.CreatedAt != "" {
			b = append(b, `,"createdAt":`...)
			b = appendGoString(b, m.CreatedAt)
		}
		if m.Name != "" {
			b = append(b, `,"name":`...)
			b = appendGoString(b, m.Name)
		}
		if len(m.Metadata) > 0 {
			meta, err := marshalNoEscape(m.Metadata)
			if err != nil {
				return nil, err
			}
			b = append(b, `,"metadata":`...)
			b = append(b, meta...)
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// appendGoString appends s as encoding/json writes a string with HTML
// escaping off. It differs from JSON.stringify's (appendString) only for
// invalid UTF-8 and U+2028/U+2029, which encoding/json writes as escapes:
// a string of printable ASCII, which ids, roles and times are, is written
// here without it.
func appendGoString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			q, _ := marshalNoEscape(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
