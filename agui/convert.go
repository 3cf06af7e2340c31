package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// ModelToUIMessages converts ModelMessages to UIMessages: each tool message
// becomes a tool-result part of the assistant message before it (and sets
// the matching tool-call part's output and state); a tool message with no
// assistant before it becomes an assistant UIMessage of its own.
func ModelToUIMessages(msgs []ModelMessage) []UIMessage {
	out := make([]UIMessage, 0, len(msgs))
	cur := -1
	for i := range msgs {
		m := &msgs[i]
		if m.Role == RoleTool {
			if m.ToolCallID != "" && cur >= 0 {
				a := &out[cur]
				text, parts := toolResultContent(m.Content)
				state := ToolComplete
				if m.Error != "" {
					state = ToolError
				}
				for j := range a.Parts {
					p := &a.Parts[j]
					if p.Type == PartToolCall && p.ID == m.ToolCallID {
						if parts != nil {
							p.Output, _ = marshalNoEscape(parts)
						} else {
							p.Output = parseToolResultContent(text)
						}
						p.State = state
						break
					}
				}
				r := UIPart{Type: PartToolResult, ToolCallID: m.ToolCallID, Content: text, ContentParts: parts,
					State: state, Name: m.Name, Metadata: m.Metadata}
				if m.ID != a.ID {
					r.ID = m.ID
				}
				if c, ok := coerceCreatedAt(m.CreatedAt); ok {
					r.CreatedAt = c
				}
				if m.Error != "" {
					e := m.Error
					r.Error = &e
				}
				a.Parts = append(a.Parts, r)
			} else {
				out = append(out, ModelToUIMessage(m, m.ID))
			}
			continue
		}
		out = append(out, ModelToUIMessage(m, m.ID))
		if m.Role == RoleAssistant {
			cur = len(out) - 1
		} else {
			cur = -1
		}
	}
	return out
}

// parseToolResultContent is JSON.parse with the text itself as fallback.
func parseToolResultContent(text string) json.RawMessage {
	var b bytes.Buffer
	if json.Valid([]byte(text)) && json.Compact(&b, []byte(text)) == nil {
		return b.Bytes()
	}
	return rawText(text)
}

// toolResultContent splits tool message content into text, or parts when
// it is a list.
func toolResultContent(c Content) (string, []ContentPart) {
	if c.IsParts() {
		p := c.PartList()
		if p == nil {
			p = []ContentPart{}
		}
		return "", p
	}
	return c.String(), nil
}

// ModelToUIMessage converts one ModelMessage to a UIMessage with the given
// id (a fresh msg-… id when empty). Thinking, structured output, content and
// tool calls become parts; a tool message becomes a tool-result part of an
// assistant UIMessage.
func ModelToUIMessage(m *ModelMessage, id string) UIMessage {
	var parts []UIPart
	if m.Role == RoleAssistant {
		for _, t := range m.Thinking {
			if t.Content == "" && t.Signature == "" {
				continue
			}
			parts = append(parts, UIPart{Type: PartThinking, Content: t.Content, Signature: t.Signature})
		}
	}
	so := structuredPart(m.StructuredOutput)
	if so == nil {
		so = snapshotStructuredOutput(tanstackOf(m.Metadata)["structuredOutput"])
	}
	switch {
	case m.Role == RoleAssistant && so != nil:
		if !m.Content.IsParts() && !m.Content.IsNull() {
			content := m.Content.String()
			if content != "" && content != so.Raw {
				text := content
				if so.Raw != "" && strings.HasSuffix(content, so.Raw) {
					text = content[:len(content)-len(so.Raw)]
				}
				if text != "" {
					parts = append(parts, UIPart{Type: PartText, Content: text})
				}
			}
		}
		parts = append(parts, *so)
	case m.Role == RoleTool && m.ToolCallID != "":
		text, cp := toolResultContent(m.Content)
		r := UIPart{Type: PartToolResult, ToolCallID: m.ToolCallID, Content: text, ContentParts: cp, State: ToolComplete,
			ID: m.ID, Name: m.Name, Metadata: m.Metadata}
		if m.Error != "" {
			r.State = ToolError
			e := m.Error
			r.Error = &e
		}
		if c, ok := coerceCreatedAt(m.CreatedAt); ok {
			r.CreatedAt = c
		}
		parts = append(parts, r)
	case m.Content.IsParts():
		for _, p := range m.Content.PartList() {
			parts = append(parts, UIPart{Type: p.Type, Content: p.Content, Source: p.Source, Metadata: p.Metadata})
		}
	default:
		if t := m.Content.String(); t != "" {
			parts = append(parts, UIPart{Type: PartText, Content: t})
		}
	}
	for _, tc := range m.ToolCalls {
		p := UIPart{Type: PartToolCall, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments,
			State: ToolInputComplete, Metadata: tc.Metadata}
		var b bytes.Buffer
		if json.Valid([]byte(tc.Function.Arguments)) && json.Compact(&b, []byte(tc.Function.Arguments)) == nil {
			p.Input = b.Bytes()
		}
		parts = append(parts, p)
	}
	if id == "" {
		id = NewMessageID()
	}
	role := m.Role
	if role == RoleTool {
		role = RoleAssistant
	}
	ui := UIMessage{ID: id, Role: role, Parts: parts, Name: m.Name, Metadata: m.Metadata}
	if ui.Parts == nil {
		ui.Parts = []UIPart{}
	}
	if c, ok := coerceCreatedAt(m.CreatedAt); ok {
		ui.CreatedAt = c
	}
	appendUIResources(&ui, tanstackOf(m.Metadata)["uiResources"])
	return ui
}

// NewMessageID returns a fresh msg-<ms>-<random> id.
func NewMessageID() string {
	return "msg-" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "-" + strconv.FormatUint(rand.Uint64()>>20, 36)
}

// structuredPart decodes a ModelMessage's structuredOutput (a
// structured-output part).
func structuredPart(raw json.RawMessage) *UIPart {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	m["type"] = json.RawMessage(`"structured-output"`)
	b, _ := json.Marshal(m)
	var p UIPart
	if p.UnmarshalJSON(b) != nil {
		return nil
	}
	return &p
}

// snapshotStructuredOutput rebuilds a structured-output part from
// metadata.tanstack.structuredOutput when it is well formed.
func snapshotStructuredOutput(v any) *UIPart {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	status, _ := m["status"].(string)
	raw, ok := m["raw"].(string)
	if !ok || (status != "streaming" && status != ToolComplete && status != ToolError) {
		return nil
	}
	p := &UIPart{Type: PartStructuredOutput, Status: status, Raw: raw}
	if v, ok := m["partial"]; ok {
		p.Partial, _ = marshalNoEscape(v)
	}
	if v, ok := m["data"]; ok {
		p.Data, _ = marshalNoEscape(v)
	}
	if s, ok := m["reasoning"].(string); ok {
		p.Reasoning = s
	}
	if v, ok := m["errorMessage"]; ok {
		s, _ := v.(string)
		p.ErrorMessage = &s
	}
	return p
}

// appendUIResources appends the well-formed ui-resource parts of stored
// (metadata.tanstack.uiResources) that ui does not hold yet.
func appendUIResources(ui *UIMessage, stored any) {
	list, ok := stored.([]any)
	if !ok {
		return
	}
	seen := map[string]bool{}
	for _, p := range ui.Parts {
		if p.Type == PartUIResource {
			if k, ok := uiResourceKey(p.RawJSON); ok {
				seen[k] = true
			}
		}
	}
	for _, v := range list {
		b, err := marshalNoEscape(v)
		if err != nil {
			continue
		}
		k, ok := uiResourceKey(b)
		if !ok || seen[k] {
			continue
		}
		seen[k] = true
		var p UIPart
		if p.UnmarshalJSON(b) == nil {
			ui.Parts = append(ui.Parts, p)
		}
	}
}

// uiResourceKey validates a ui-resource part and returns its identity.
func uiResourceKey(raw json.RawMessage) (string, bool) {
	var r struct {
		Type       *string `json:"type"`
		ToolCallID *string `json:"toolCallId"`
		ToolName   *string `json:"toolName"`
		Resource   *struct {
			URI      *string `json:"uri"`
			MimeType *string `json:"mimeType"`
		} `json:"resource"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Type == nil || *r.Type != PartUIResource || r.ToolCallID == nil ||
		r.ToolName == nil || r.Resource == nil || r.Resource.URI == nil || r.Resource.MimeType == nil {
		return "", false
	}
	return *r.ToolCallID + "\x00" + *r.ToolName + "\x00" + *r.Resource.URI, true
}

// collapseParts is the most compact content for parts: null when empty,
// the joined text when all are text (null if that is empty), else the parts.
func collapseParts(parts []ContentPart) Content {
	if len(parts) == 0 {
		return Content{}
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != PartText {
			return Parts(parts...)
		}
		b.WriteString(p.Content)
	}
	if b.Len() == 0 {
		return Content{}
	}
	return Text(b.String())
}

// UIToModel converts one UIMessage to the ModelMessages an adapter sees.
// System UIMessages yield nothing; user messages one message of their
// content parts; assistant messages are walked in part order, so text, tool
// calls and tool results keep their interleaving. Client tool outputs and
// answered approvals become tool messages after the walk (an approval
// without output as the {"approved":…} placeholder).
func UIToModel(m *UIMessage) []ModelMessage {
	switch m.Role {
	case RoleSystem:
		return nil
	case RoleAssistant:
		return assistantToModel(m)
	}
	var cp []ContentPart
	for i := range m.Parts {
		if isContentPartType(m.Parts[i].Type) {
			cp = append(cp, m.Parts[i].contentPart())
		}
	}
	out := ModelMessage{ID: m.ID, Role: m.Role, Content: collapseParts(cp), Name: m.Name, Metadata: m.Metadata}
	if c, ok := coerceCreatedAt(m.CreatedAt); ok {
		out.CreatedAt = c
	}
	return []ModelMessage{out}
}

func toolCallIncluded(p *UIPart) bool {
	switch p.State {
	case ToolInputComplete, ToolComplete, ToolApprovalRequested, ToolApprovalResponded, ToolError:
		return true
	}
	return p.Output != nil
}

func isProviderExecuted(tc *ToolCall) bool {
	v, _ := tc.Metadata["providerExecuted"].(bool)
	return v
}

// assistantMetadata keeps the caller's metadata with metadata.tanstack cut
// down to model, signature and the message's ui-resource parts.
func assistantMetadata(m *UIMessage) map[string]any {
	out, ts := splitMetadata(m)
	var res []json.RawMessage
	for _, p := range m.Parts {
		if p.Type == PartUIResource {
			if _, ok := uiResourceKey(p.RawJSON); ok {
				res = append(res, p.RawJSON)
			}
		}
	}
	if res != nil {
		ts["uiResources"] = res
	}
	return withTanstackOrNil(out, ts)
}

// splitMetadata returns a copy of m's metadata (never nil) and a fresh
// metadata.tanstack holding only what every rebuilt message keeps of the
// old one: model and signature.
func splitMetadata(m *UIMessage) (meta, tanstack map[string]any) {
	meta = maps.Clone(m.Metadata)
	if meta == nil {
		meta = map[string]any{}
	}
	prev := tanstackOf(m.Metadata)
	tanstack = map[string]any{}
	for _, k := range []string{"model", "signature"} {
		if v, ok := prev[k]; ok {
			tanstack[k] = v
		}
	}
	return meta, tanstack
}

func assistantToModel(m *UIMessage) []ModelMessage {
	var list []ModelMessage
	var content []ContentPart
	var calls []ToolCall
	var so json.RawMessage
	var thinking []Thinking
	emitted := map[string]bool{}
	createdAt, _ := coerceCreatedAt(m.CreatedAt)
	meta := assistantMetadata(m)
	flush := func(force bool) {
		c := collapseParts(content)
		if force || !c.IsNull() || len(calls) > 0 || len(thinking) > 0 {
			list = append(list, ModelMessage{ID: m.ID, Name: m.Name, CreatedAt: createdAt, Metadata: meta,
				Role: RoleAssistant, Content: c, ToolCalls: calls, Thinking: thinking, StructuredOutput: so})
			thinking = nil
		}
		content, calls, so = nil, nil, nil
	}
	for i := range m.Parts {
		p := &m.Parts[i]
		switch p.Type {
		case PartText, PartImage, PartAudio, PartVideo, PartDocument:
			content = append(content, p.contentPart())
		case PartToolCall:
			if toolCallIncluded(p) {
				calls = append(calls, ToolCall{ID: p.ID, Type: "function",
					Function: FunctionCall{Name: p.Name, Arguments: p.Arguments}, Metadata: p.Metadata})
			}
		case PartToolResult:
			flush(len(list) == 0)
			if (p.State == ToolComplete || p.State == ToolError) && !emitted[p.ToolCallID] {
				t := ModelMessage{ID: p.ID, Role: RoleTool, ToolCallID: p.ToolCallID, Name: p.Name, Metadata: p.Metadata}
				if p.ContentParts != nil {
					t.Content = Parts(p.ContentParts...)
				} else {
					t.Content = Text(p.Content)
				}
				if c, ok := coerceCreatedAt(p.CreatedAt); ok {
					t.CreatedAt = c
				}
				if p.Error != nil {
					t.Error = *p.Error
				}
				list = append(list, t)
				emitted[p.ToolCallID] = true
			}
		case PartThinking:
			if p.Content != "" || p.Signature != "" {
				for j := range calls {
					if isProviderExecuted(&calls[j]) {
						flush(false)
						break
					}
				}
				thinking = append(thinking, Thinking{Content: p.Content, Signature: p.Signature})
			}
		case PartStructuredOutput:
			if p.Status != ToolComplete {
				continue
			}
			s := p.Raw
			if s == "" && p.Data != nil {
				s = compactJSON(p.Data)
			}
			if s != "" {
				content = append(content, ContentPart{Type: PartText, Content: s})
				so, _ = p.MarshalJSON()
			}
		}
	}
	flush(false)
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Type != PartToolCall {
			continue
		}
		if p.Output != nil && !emitted[p.ID] {
			text, parts := normalizeToolResult(p.Output)
			t := ModelMessage{Role: RoleTool, ToolCallID: p.ID, Content: Text(text)}
			if parts != nil {
				t.Content = Parts(parts...)
			}
			list = append(list, t)
			emitted[p.ID] = true
		}
		if p.Output == nil && p.State == ToolApprovalResponded && p.Approval != nil && p.Approval.Approved != nil && !emitted[p.ID] {
			list = append(list, ModelMessage{Role: RoleTool, ToolCallID: p.ID, Content: Text(approvalPlaceholder(*p.Approval.Approved))})
			emitted[p.ID] = true
		}
	}
	if len(list) == 0 {
		list = append(list, ModelMessage{ID: m.ID, Name: m.Name, CreatedAt: createdAt, Metadata: meta, Role: RoleAssistant})
	}
	return list
}

// ClientState is what the legacy UIMessage form carries besides the
// conversation: client tool outputs and approval decisions the client made.
type ClientState struct {
	// ToolResults maps a tool call id to the output a client tool produced
	// (tool-call parts with output and no approval).
	ToolResults map[string]json.RawMessage
	// Approvals maps an approval id to the user's decision (tool-call parts
	// in approval-responded).
	Approvals map[string]bool
}

// HarvestClientState collects the client tool outputs and approval
// decisions that assistant UIMessages carry, before they are converted to
// ModelMessages (which no longer hold them).
func HarvestClientState(msgs []InputMessage) ClientState {
	cs := ClientState{ToolResults: map[string]json.RawMessage{}, Approvals: map[string]bool{}}
	for _, in := range msgs {
		m := in.UI
		if m == nil || m.Role != RoleAssistant {
			continue
		}
		for _, p := range m.Parts {
			if p.Type != PartToolCall {
				continue
			}
			if p.Output != nil && p.Approval == nil {
				cs.ToolResults[p.ID] = p.Output
			}
			if p.Approval != nil && p.Approval.ID != "" && p.Approval.Approved != nil && p.State == ToolApprovalResponded {
				cs.Approvals[p.Approval.ID] = *p.Approval.Approved
			}
		}
	}
	return cs
}

// InputMessage is one element of the engine's `messages` option: a
// UIMessage (the element had "parts"), or a ModelMessage or AG-UI wire row.
// Exactly one field is set.
type InputMessage struct {
	UI    *UIMessage
	Row   *WireMessage
	Model *ModelMessage
}

// DecodeMessages reads a JSON array whose elements may mix UIMessages
// (recognized by a "parts" key), ModelMessages and AG-UI wire rows.
func DecodeMessages(data []byte) ([]InputMessage, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	out := make([]InputMessage, 0, len(elems))
	for i, e := range elems {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(e, &keys); err != nil || keys == nil {
			return nil, fmt.Errorf("messages[%d]: not an object", i)
		}
		if _, ok := keys["parts"]; ok {
			var ui UIMessage
			if err := json.Unmarshal(e, &ui); err != nil {
				return nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
			out = append(out, InputMessage{UI: &ui})
			continue
		}
		row, err := decodeRow(keys)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		out = append(out, InputMessage{Row: row})
	}
	return out, nil
}

// decodeRow reads a wire row or ModelMessage from its keys. As in the
// reference, which passes rows through as they are, a field of an
// unexpected JSON kind is ignored; only tool calls that are not objects
// are an error, since no adapter could use them.
func decodeRow(keys map[string]json.RawMessage) (*WireMessage, error) {
	w := WireMessage{
		ID:             rawString(keys["id"]),
		Role:           rawString(keys["role"]),
		Name:           rawString(keys["name"]),
		ToolCallID:     rawString(keys["toolCallId"]),
		EncryptedValue: rawString(keys["encryptedValue"]),
		ActivityType:   rawString(keys["activityType"]),
		CreatedAt:      rawString(keys["createdAt"]),
		Metadata:       rawObject(keys["metadata"]),
		Content:        keys["content"],
	}
	if v, ok := keys["error"]; ok && kind(v) == '"' {
		e := rawString(v)
		w.Error = &e
	}
	if v := keys["thinking"]; kind(v) == '[' {
		var th []struct {
			Content   any `json:"content"`
			Signature any `json:"signature"`
		}
		if json.Unmarshal(v, &th) == nil {
			for _, t := range th {
				c, _ := t.Content.(string)
				sig, _ := t.Signature.(string)
				w.Thinking = append(w.Thinking, Thinking{Content: c, Signature: sig})
			}
		}
	}
	if v := keys["structuredOutput"]; kind(v) == '{' {
		w.StructuredOutput = v
	}
	if v, ok := keys["toolCalls"]; ok && !isNull(v) {
		var calls []json.RawMessage
		if err := json.Unmarshal(v, &calls); err != nil {
			return nil, fmt.Errorf("toolCalls must be an array of tool calls")
		}
		for i, c := range calls {
			var o map[string]json.RawMessage
			if kind(c) != '{' || json.Unmarshal(c, &o) != nil {
				return nil, fmt.Errorf("toolCalls[%d] must be an object", i)
			}
			tc := WireToolCall{ID: rawString(o["id"]), Type: rawString(o["type"]),
				EncryptedValue: rawString(o["encryptedValue"]), Metadata: rawObject(o["metadata"])}
			if f := o["function"]; kind(f) == '{' {
				var fn map[string]json.RawMessage
				if json.Unmarshal(f, &fn) == nil {
					tc.Function = FunctionCall{Name: rawString(fn["name"]), Arguments: rawString(fn["arguments"])}
				}
			}
			w.ToolCalls = append(w.ToolCalls, tc)
		}
	}
	return &w, nil
}

// ConvertMessages decodes a mixed `messages` array and converts it to
// ModelMessages, returning also the client state harvested from legacy
// UIMessages (see HarvestClientState).
func ConvertMessages(data []byte) ([]ModelMessage, ClientState, error) {
	in, err := DecodeMessages(data)
	if err != nil {
		return nil, ClientState{}, err
	}
	return ToModelMessages(in), HarvestClientState(in), nil
}

// ToModelMessages converts a mixed message list to ModelMessages, as the
// engine does with its `messages` option:
//
//   - UIMessages are converted with UIToModel.
//   - A tool row whose result an anchor's tool-result part already holds is
//     dropped (it is the anchor's wire fan-out).
//   - reasoning rows become thinking of the next assistant message
//     (encryptedValue, or metadata.tanstack.signature, as the signature).
//   - activity rows are dropped; developer rows become system messages.
//   - AG-UI user input parts ({type:"text", text}) become TanStack parts.
//   - metadata.tanstack.toolCallMetadata and tool-call encryptedValue
//     (as metadata.thoughtSignature) are restored onto tool calls.
//   - createdAt and tool-result ownership are restored from
//     metadata.tanstack.
func ToModelMessages(msgs []InputMessage) []ModelMessage {
	anchored := map[string]bool{}
	for _, in := range msgs {
		if in.UI != nil {
			for _, p := range in.UI.Parts {
				if p.Type == PartToolResult {
					anchored[p.ToolCallID] = true
				}
			}
		}
	}
	out := make([]ModelMessage, 0, len(msgs))
	var pending []Thinking
	for _, in := range msgs {
		if in.UI != nil {
			out = append(out, UIToModel(in.UI)...)
			continue
		}
		var src WireMessage
		switch {
		case in.Row != nil:
			src = *in.Row
		case in.Model != nil:
			src = modelToRow(in.Model)
		default:
			continue
		}
		r := restoreCreatedAt(restoreToolResultOwnership(src))
		switch r.Role {
		case RoleTool:
			if r.ToolCallID != "" && anchored[r.ToolCallID] {
				continue
			}
		case RoleReasoning:
			sig := encryptedValueOf(src.EncryptedValue, src.Metadata)
			text := rawString(src.Content)
			if text != "" || sig != "" {
				pending = append(pending, Thinking{Content: text, Signature: sig})
			}
			continue
		case RoleActivity:
			continue
		case RoleDeveloper:
			out = append(out, ModelMessage{Role: RoleSystem, Content: rowContent(src.Content), Name: r.Name,
				CreatedAt: r.CreatedAt, Metadata: r.Metadata})
			continue
		case RoleUser:
			if len(src.Content) > 0 && src.Content[0] == '[' && hasAGUITextPart(src.Content) {
				out = append(out, ModelMessage{Role: RoleUser, Content: collapseParts(aguiUserParts(src.Content)),
					ID: src.ID, Name: r.Name, CreatedAt: r.CreatedAt, Metadata: r.Metadata})
				continue
			}
		case RoleAssistant:
			m := rowToModel(&r)
			bag, _ := tanstackOf(src.Metadata)["toolCallMetadata"].(map[string]any)
			for i := range m.ToolCalls {
				toolCallFromWire(&m.ToolCalls[i], &r.ToolCalls[i], bag)
			}
			if len(pending) > 0 {
				m.Thinking = append(append([]Thinking(nil), m.Thinking...), pending...)
				pending = nil
			}
			out = append(out, m)
			continue
		}
		out = append(out, rowToModel(&r))
	}
	return out
}

// encryptedValueOf is a row's or tool call's encryptedValue, or else its
// metadata.tanstack.signature.
func encryptedValueOf(ev string, meta map[string]any) string {
	if ev != "" {
		return ev
	}
	s, _ := tanstackOf(meta)["signature"].(string)
	return s
}

func toolCallFromWire(tc *ToolCall, w *WireToolCall, bag map[string]any) {
	enc := encryptedValueOf(w.EncryptedValue, w.Metadata)
	fromBag, _ := bag[w.ID].(map[string]any)
	if fromBag == nil && enc == "" {
		return
	}
	md := maps.Clone(fromBag)
	if md == nil {
		md = map[string]any{}
	}
	if enc != "" {
		md["thoughtSignature"] = enc
	}
	tc.Metadata = md
}

func hasAGUITextPart(content json.RawMessage) bool {
	var parts []map[string]json.RawMessage
	if json.Unmarshal(content, &parts) != nil {
		return false
	}
	for _, p := range parts {
		_, hasText := p["text"]
		_, hasContent := p["content"]
		if rawString(p["type"]) == PartText && hasText && !hasContent {
			return true
		}
	}
	return false
}

// aguiUserParts converts AG-UI user input parts to content parts: text
// parts take their "text", binary parts are dropped, and only content part
// types are kept.
func aguiUserParts(content json.RawMessage) []ContentPart {
	var raw []map[string]json.RawMessage
	if json.Unmarshal(content, &raw) != nil {
		return nil
	}
	var out []ContentPart
	for i, p := range raw {
		t := rawString(p["type"])
		if !isContentPartType(t) {
			continue
		}
		if t == PartText {
			out = append(out, ContentPart{Type: PartText, Content: rawString(p["text"])})
			continue
		}
		var one []ContentPart
		b, _ := json.Marshal(raw[i : i+1])
		if json.Unmarshal(b, &one) == nil && len(one) == 1 {
			out = append(out, one[0])
		}
	}
	return out
}

// rowContent converts raw row content to Content: strings and part lists
// as they are; null, absent and anything else are null.
func rowContent(raw json.RawMessage) Content {
	if len(raw) == 0 {
		return Content{}
	}
	switch raw[0] {
	case '"', '[':
		var c Content
		if c.UnmarshalJSON(raw) == nil {
			return c
		}
	}
	return Content{}
}

func rowToModel(r *WireMessage) ModelMessage {
	m := ModelMessage{Role: r.Role, Content: rowContent(r.Content), Name: r.Name, ToolCallID: r.ToolCallID,
		Thinking: r.Thinking, StructuredOutput: r.StructuredOutput, ID: r.ID, CreatedAt: r.CreatedAt, Metadata: r.Metadata}
	if r.Error != nil {
		m.Error = *r.Error
	}
	for _, tc := range r.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Type: tc.Type, Function: tc.Function, Metadata: tc.Metadata})
	}
	return m
}

func modelToRow(m *ModelMessage) WireMessage {
	c, _ := m.Content.MarshalJSON()
	w := WireMessage{ID: m.ID, Role: m.Role, Name: m.Name, Content: c, ToolCallID: m.ToolCallID, Metadata: m.Metadata,
		Thinking: m.Thinking, StructuredOutput: m.StructuredOutput, CreatedAt: m.CreatedAt}
	if m.Error != "" {
		e := m.Error
		w.Error = &e
	}
	for _, tc := range m.ToolCalls {
		w.ToolCalls = append(w.ToolCalls, WireToolCall{ID: tc.ID, Type: tc.Type, Function: tc.Function, Metadata: tc.Metadata})
	}
	return w
}

// restoreCreatedAt normalizes createdAt, taking it from
// metadata.tanstack.createdAt when the row has none, and dropping it when
// it is not a valid date.
func restoreCreatedAt(r WireMessage) WireMessage {
	if c, ok := coerceCreatedAt(r.CreatedAt); ok {
		r.CreatedAt = c
		return r
	}
	c, _ := coerceCreatedAt(tanstackOf(r.Metadata)["createdAt"])
	r.CreatedAt = c
	return r
}

// restoreToolResultOwnership gives a tool row back the id, createdAt and
// multimodal content that metadata.tanstack.toolResult recorded, and
// removes that record.
func restoreToolResultOwnership(r WireMessage) WireMessage {
	if r.Role != RoleTool {
		return r
	}
	ts := tanstackOf(r.Metadata)
	owned, ok := ts["toolResult"].(map[string]any)
	if !ok {
		return r
	}
	var parts json.RawMessage
	if c, has := owned["content"]; has {
		b, err := marshalNoEscape(c)
		if err != nil {
			return r
		}
		if _, ok := contentPartArray(b); !ok {
			return r
		}
		parts = b
	}
	if _, has := owned["id"]; !has {
		r.ID = ""
	}
	if _, has := owned["createdAt"]; !has {
		r.CreatedAt = ""
	}
	if s, ok := owned["id"].(string); ok {
		r.ID = s
	}
	if s, ok := owned["createdAt"].(string); ok {
		if c, ok := coerceCreatedAt(s); ok {
			r.CreatedAt = c
		}
	}
	if parts != nil {
		r.Content = parts
	}
	meta := maps.Clone(r.Metadata)
	rest := maps.Clone(ts)
	delete(rest, "toolResult")
	if len(rest) > 0 {
		meta["tanstack"] = rest
	} else {
		delete(meta, "tanstack")
	}
	if len(meta) == 0 {
		meta = nil
	}
	r.Metadata = meta
	return r
}
