package agui

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// Roles only the wire knows.
const (
	RoleActivity = "activity"
)

// WireMessage is one AG-UI message row, as request bodies and
// MESSAGES_SNAPSHOT carry them: no parts, tool results and reasoning as rows
// of their own. It also holds the TanStack ModelMessage fields (thinking,
// structuredOutput, createdAt) that callers may send on a row, so one type
// reads every non-UIMessage element of a `messages` array.
//
// Content is raw JSON: a string for most roles, a string or a list of input
// parts for user rows, an object for activity rows; nil means absent.
type WireMessage struct {
	ID             string          `json:"id,omitempty"`
	Role           string          `json:"role"`
	Name           string          `json:"name,omitempty"`
	Content        json.RawMessage `json:"content,omitempty"`
	ToolCalls      []WireToolCall  `json:"toolCalls,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	Error          *string         `json:"error,omitempty"`
	EncryptedValue string          `json:"encryptedValue,omitempty"`
	ActivityType   string          `json:"activityType,omitempty"`
	Metadata       map[string]any  `json:"metadata,omitempty"`

	Thinking         []Thinking      `json:"thinking,omitempty"`
	StructuredOutput json.RawMessage `json:"structuredOutput,omitempty"`
	CreatedAt        string          `json:"createdAt,omitempty"`
}

// WireToolCall is an assistant row's tool call. EncryptedValue carries a
// provider's thought signature (TanStack's metadata.thoughtSignature).
type WireToolCall struct {
	ID             string         `json:"id"`
	Type           string         `json:"type"`
	Function       FunctionCall   `json:"function"`
	EncryptedValue string         `json:"encryptedValue,omitempty"`
	Metadata       map[string]any `json:"metadata,omitempty"`
}

// MarshalJSON encodes the row the way JSON.stringify would (no HTML
// escaping), omitting every absent field.
func (m WireMessage) MarshalJSON() ([]byte, error) {
	type plain WireMessage
	return marshalNoEscape(plain(m))
}

// MarshalWireMessages encodes rows as a JSON array, ready for
// Event.Messages.
func MarshalWireMessages(rows []WireMessage) json.RawMessage {
	if rows == nil {
		rows = []WireMessage{}
	}
	b, _ := marshalNoEscape(rows)
	return b
}

// tanstackOf returns meta["tanstack"] when it is an object.
func tanstackOf(meta map[string]any) map[string]any {
	if meta == nil {
		return nil
	}
	t, _ := meta["tanstack"].(map[string]any)
	return t
}

// coerceCreatedAt parses a timestamp the way the reference rebuilds a Date
// from an ISO string, and returns it in Date.toISOString form. It reports
// false for values JavaScript's Date would reject.
func coerceCreatedAt(v any) (string, bool) {
	s, ok := v.(string)
	if !ok || s == "" {
		return "", false
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02", time.RFC1123, time.RFC1123Z} {
		if t, err := time.Parse(layout, s); err == nil {
			if t.Year() < -271820 || t.Year() > 275759 {
				return "", false
			}
			return formatISO(t), true
		}
	}
	return "", false
}

// formatISO writes t as Date.prototype.toISOString does.
func formatISO(t time.Time) string {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		sign := "+"
		if y < 0 {
			sign, y = "-", -y
		}
		return sign + pad(y, 6) + t.Format("-01-02T15:04:05.000Z")
	}
	return t.Format("2006-01-02T15:04:05.000Z")
}

func pad(n, w int) string {
	s := itoa(int64(n))
	for len(s) < w {
		s = "0" + s
	}
	return s
}

// hashContent is the reference's 31-multiplier string hash over UTF-16 code
// units, in base 36; it names reasoning rows.
func hashContent(s string) string {
	var h int32
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = h*31 + int32(hi)
			h = h*31 + int32(lo)
			continue
		}
		h = h*31 + int32(r)
	}
	a := int64(h)
	if a < 0 {
		a = -a
	}
	return formatBase36(a)
}

func formatBase36(v int64) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	if v == 0 {
		return "0"
	}
	var buf [16]byte
	i := len(buf)
	for v > 0 {
		i--
		buf[i] = digits[v%36]
		v /= 36
	}
	return string(buf[i:])
}

// idSet hands out unique wire ids: a taken id gets -2, -3, ...
type idSet map[string]struct{}

func (u idSet) unique(id string) string {
	if _, ok := u[id]; !ok {
		u[id] = struct{}{}
		return id
	}
	for n := 2; ; n++ {
		c := id + "-" + itoa(int64(n))
		if _, ok := u[c]; !ok {
			u[c] = struct{}{}
			return c
		}
	}
}

// SnapshotMessages converts the engine's ModelMessages to the rows of a
// MESSAGES_SNAPSHOT event: messages without an id are named
// snapshot_<runID>_<index>, tool messages fold into the assistant message
// that called them, and the UI form is then written as wire rows with the
// complete structured-output metadata kept.
func SnapshotMessages(msgs []ModelMessage, runID string) []WireMessage {
	withIDs := make([]ModelMessage, len(msgs))
	for i, m := range msgs {
		if m.ID == "" {
			m.ID = "snapshot_" + runID + "_" + itoa(int64(i))
		}
		withIDs[i] = m
	}
	return UIToWire(ModelToUIMessages(withIDs), true)
}

// UIToWire serializes UIMessages as AG-UI message rows. Each assistant
// message yields one reasoning row per thinking part (id
// <msgId>-reasoning-<hash>), then its anchor (text, tool calls, TanStack
// metadata), then a tool row per tool result, client tool output or
// answered approval. snapshot keeps complete structured-output metadata.
func UIToWire(msgs []UIMessage, snapshot bool) []WireMessage {
	rows := make([]WireMessage, 0, len(msgs))
	used := idSet{}
	for _, m := range msgs {
		if m.ID != "" {
			used[m.ID] = struct{}{}
		}
	}
	for i := range msgs {
		m := &msgs[i]
		used[m.ID] = struct{}{}
		switch m.Role {
		case RoleSystem:
			rows = append(rows, anchor(m, RoleSystem, rawText(collectText(m.Parts)), snapshot))
			continue
		case RoleUser:
			rows = append(rows, anchor(m, RoleUser, collectUserContent(m.Parts), snapshot))
			continue
		}
		for j := range m.Parts {
			p := &m.Parts[j]
			if p.Type != PartThinking {
				continue
			}
			suffix := p.ID
			if suffix == "" {
				suffix = hashContent(p.Content)
			}
			r := WireMessage{Role: RoleReasoning, ID: used.unique(m.ID + "-reasoning-" + suffix), Content: rawText(p.Content)}
			r.EncryptedValue = p.Signature
			rows = append(rows, r)
		}
		var content json.RawMessage
		if text := collectText(m.Parts); text != "" {
			content = rawText(text)
		}
		a := anchor(m, RoleAssistant, content, snapshot)
		a.ToolCalls = collectToolCalls(m.Parts)
		rows = append(rows, a)

		explicit := map[string]bool{}
		for _, p := range m.Parts {
			if p.Type == PartToolResult {
				explicit[p.ToolCallID] = true
			}
		}
		for j := range m.Parts {
			p := &m.Parts[j]
			switch p.Type {
			case PartToolResult:
				id := p.ID
				if id == "" {
					id = "tool-" + p.ToolCallID
				}
				row := WireMessage{Role: RoleTool, ID: used.unique(id), ToolCallID: p.ToolCallID, Name: p.Name, Error: p.Error}
				if p.ContentParts != nil {
					b, _ := marshalNoEscape(p.ContentParts)
					row.Content = rawText(string(b))
				} else {
					row.Content = rawText(p.Content)
				}
				row.Metadata = rebuiltToolMetadata(p.Metadata, p.CreatedAt, p.ID, p.ContentParts, true)
				rows = append(rows, row)
			case PartToolCall:
				var approved *bool
				if p.Approval != nil {
					approved = p.Approval.Approved
				}
				if explicit[p.ID] || (p.Output == nil && (p.State != ToolApprovalResponded || approved == nil)) {
					continue
				}
				var text string
				var parts []ContentPart
				if p.Output != nil {
					text, parts = normalizeToolResult(p.Output)
				} else {
					text = approvalPlaceholder(*approved)
				}
				if parts != nil {
					b, _ := marshalNoEscape(parts)
					text = string(b)
				}
				rows = append(rows, WireMessage{Role: RoleTool, ID: used.unique("tool-" + p.ID), ToolCallID: p.ID,
					Content: rawText(text), Metadata: rebuiltToolMetadata(nil, "", "", parts, false)})
			}
		}
	}
	return rows
}

func rawText(s string) json.RawMessage { return appendString(nil, s) }

// approvalPlaceholder is the tool result that stands for an answered
// approval whose tool has not run yet.
func approvalPlaceholder(approved bool) string {
	if approved {
		return `{"approved":true,"pendingExecution":true,"message":"User approved this action"}`
	}
	return `{"approved":false,"message":"User denied this action"}`
}

func anchor(m *UIMessage, role string, content json.RawMessage, snapshot bool) WireMessage {
	return WireMessage{ID: m.ID, Role: role, Name: m.Name, Content: content, Metadata: messageMetadata(m, snapshot)}
}

// messageMetadata rebuilds an anchor's metadata: the caller's keys, with
// metadata.tanstack replaced by what the wire needs to restore the parts.
func messageMetadata(m *UIMessage, snapshot bool) map[string]any {
	base, ts := splitMetadata(m)
	if c, ok := coerceCreatedAt(m.CreatedAt); ok {
		ts["createdAt"] = c
	}
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Type == PartStructuredOutput && (snapshot || p.Status != ToolComplete) {
			so := map[string]any{"status": p.Status, "raw": p.Raw}
			if snapshot && p.Partial != nil {
				so["partial"] = p.Partial
			}
			if snapshot && p.Data != nil {
				so["data"] = p.Data
			}
			if snapshot && p.Reasoning != "" {
				so["reasoning"] = p.Reasoning
			}
			if p.ErrorMessage != nil {
				so["errorMessage"] = *p.ErrorMessage
			}
			ts["structuredOutput"] = so
			break
		}
	}
	tcm := map[string]any{}
	for _, p := range m.Parts {
		if p.Type == PartToolCall && p.Metadata != nil {
			tcm[p.ID] = p.Metadata
		}
	}
	if len(tcm) > 0 {
		ts["toolCallMetadata"] = tcm
	}
	var res []json.RawMessage
	for _, p := range m.Parts {
		if p.Type == PartUIResource {
			res = append(res, p.RawJSON)
		}
	}
	if res != nil {
		ts["uiResources"] = res
	}
	return withTanstackOrNil(base, ts)
}

// rebuiltToolMetadata is a tool row's metadata: the caller's keys plus
// metadata.tanstack.toolResult, which lets the reader restore the result's
// own id, createdAt and multimodal content.
func rebuiltToolMetadata(meta map[string]any, createdAt, id string, parts []ContentPart, anchorOwnsUIResources bool) map[string]any {
	out := maps.Clone(meta)
	if out == nil {
		out = map[string]any{}
	}
	ts := maps.Clone(tanstackOf(meta))
	if ts == nil {
		ts = map[string]any{}
	}
	if anchorOwnsUIResources {
		delete(ts, "uiResources")
	}
	tr := map[string]any{}
	if id != "" {
		tr["id"] = id
	}
	if c, ok := coerceCreatedAt(createdAt); ok {
		tr["createdAt"] = c
	}
	if parts != nil {
		tr["content"] = parts
	}
	ts["toolResult"] = tr
	out["tanstack"] = ts
	return out
}

func collectText(parts []UIPart) string {
	var b strings.Builder
	for i := range parts {
		p := &parts[i]
		switch {
		case p.Type == PartText:
			b.WriteString(p.Content)
		case p.Type == PartStructuredOutput && p.Status == ToolComplete && p.Raw != "":
			b.WriteString(p.Raw)
		}
	}
	return b.String()
}

// wireInputPart is an AG-UI user input part: text parts use "text", media
// parts keep the TanStack shape.
type wireInputPart struct {
	Type     string         `json:"type"`
	Text     *string        `json:"text,omitempty"`
	Source   *Source        `json:"source,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

func collectUserContent(parts []UIPart) json.RawMessage {
	media := false
	for _, p := range parts {
		if isContentPartType(p.Type) && p.Type != PartText {
			media = true
			break
		}
	}
	if !media {
		return rawText(collectText(parts))
	}
	out := []wireInputPart{}
	for _, p := range parts {
		switch {
		case p.Type == PartText:
			t := p.Content
			out = append(out, wireInputPart{Type: PartText, Text: &t})
		case isContentPartType(p.Type):
			out = append(out, wireInputPart{Type: p.Type, Source: p.Source, Metadata: p.Metadata})
		}
	}
	b, _ := marshalNoEscape(out)
	return b
}

func collectToolCalls(parts []UIPart) []WireToolCall {
	var calls []WireToolCall
	for _, p := range parts {
		if p.Type != PartToolCall {
			continue
		}
		c := WireToolCall{ID: p.ID, Type: "function", Function: FunctionCall{Name: p.Name, Arguments: p.Arguments}}
		if sig, ok := p.Metadata["thoughtSignature"].(string); ok {
			c.EncryptedValue = sig
		}
		calls = append(calls, c)
	}
	return calls
}

// normalizeToolResult renders a tool output for transport: a JSON string is
// used as is, a list of valid content parts stays parts, anything else is
// its compact JSON text.
func normalizeToolResult(out json.RawMessage) (string, []ContentPart) {
	if len(out) > 0 && out[0] == '"' {
		return rawString(out), nil
	}
	if parts, ok := contentPartArray(out); ok {
		return "", parts
	}
	return compactJSON(out), nil
}

func compactJSON(v json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return string(v)
	}
	return b.String()
}

// contentPartArray reports whether v is a non-empty array of valid content
// parts (text with string content; media with a url source or a data source
// with a mimeType), and returns them.
func contentPartArray(v json.RawMessage) ([]ContentPart, bool) {
	if len(v) == 0 || v[0] != '[' {
		return nil, false
	}
	var arr []any
	if json.Unmarshal(v, &arr) != nil || len(arr) == 0 {
		return nil, false
	}
	for _, e := range arr {
		if !isContentPartValue(e) {
			return nil, false
		}
	}
	var parts []ContentPart
	if json.Unmarshal(v, &parts) != nil {
		return nil, false
	}
	return parts, true
}

func isContentPartValue(e any) bool {
	m, ok := e.(map[string]any)
	if !ok {
		return false
	}
	t, _ := m["type"].(string)
	if !isContentPartType(t) {
		return false
	}
	if t == PartText {
		_, ok := m["content"].(string)
		return ok
	}
	src, ok := m["source"].(map[string]any)
	if !ok {
		return false
	}
	if _, ok := src["value"].(string); !ok {
		return false
	}
	switch src["type"] {
	case "data":
		_, ok := src["mimeType"].(string)
		return ok
	case "url":
		return true
	}
	return false
}

// withTanstackOrNil sets meta["tanstack"] to ts (removing it when ts is
// empty) and returns meta, or nil when nothing is left.
func withTanstackOrNil(meta, ts map[string]any) map[string]any {
	if len(ts) > 0 {
		meta["tanstack"] = ts
	} else {
		delete(meta, "tanstack")
	}
	if len(meta) == 0 {
		return nil
	}
	return meta
}
