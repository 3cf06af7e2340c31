package agui

import (
	"encoding/json"
	"maps"
	"strconv"
)

// keySet is a bitmask over the top-level keys the Event struct names.
type keySet uint32

const (
	kThreadID keySet = 1 << iota
	kRunID
	kParentRunID
	kInput
	kResult
	kOutcome
	kUsage
	kMessage
	kCode
	kMessageID
	kRole
	kName
	kDelta
	kToolCallID
	kToolCallName
	kParentMessageID
	kContent
	kStepName
	kSubtype
	kEntityID
	kEncryptedValue
	kMessages
	kSnapshot
	kValue
)

// specKeys lists, per event type, the AG-UI keys beyond the shared
// type/timestamp/rawEvent/metadata. extraSpec names spec keys this struct
// keeps in Extra.
var specKeys = map[EventType]keySet{
	TextMessageStart:                kMessageID | kRole | kName,
	TextMessageContent:              kMessageID | kDelta,
	TextMessageEnd:                  kMessageID,
	TextMessageChunk:                kMessageID | kRole | kDelta | kName,
	ToolCallStart:                   kToolCallID | kToolCallName | kParentMessageID,
	ToolCallArgs:                    kToolCallID | kDelta,
	ToolCallEnd:                     kToolCallID,
	ToolCallChunk:                   kToolCallID | kToolCallName | kParentMessageID | kDelta,
	ToolCallResult:                  kMessageID | kToolCallID | kContent | kRole,
	"THINKING_TEXT_MESSAGE_CONTENT": kDelta,
	StateSnapshot:                   kSnapshot,
	StateDelta:                      kDelta,
	MessagesSnapshot:                kMessages,
	"ACTIVITY_SNAPSHOT":             kMessageID | kContent,
	"ACTIVITY_DELTA":                kMessageID,
	Custom:                          kName | kValue,
	RunStarted:                      kThreadID | kRunID | kParentRunID | kInput,
	RunFinished:                     kThreadID | kRunID | kResult | kOutcome | kUsage,
	RunError:                        kMessage | kCode | kUsage,
	StepStarted:                     kStepName,
	StepFinished:                    kStepName,
	ReasoningStart:                  kMessageID,
	ReasoningMessageStart:           kMessageID | kRole,
	ReasoningMessageContent:         kMessageID | kDelta,
	ReasoningMessageEnd:             kMessageID,
	ReasoningMessageChunk:           kMessageID | kDelta,
	ReasoningEnd:                    kMessageID,
	ReasoningEncryptedValue:         kSubtype | kEntityID | kEncryptedValue,
}

var extraSpec = map[EventType][]string{
	"THINKING_START":    {"title"},
	"ACTIVITY_SNAPSHOT": {"activityType", "replace"},
	"ACTIVITY_DELTA":    {"activityType", "patch"},
	Raw:                 {"event", "source"},
}

func isExtraSpec(t EventType, key string) bool {
	for _, k := range extraSpec[t] {
		if k == key {
			return true
		}
	}
	return false
}

// Normalize returns the public, spec-shaped form of an adapter or
// middleware chunk, as the engine yields it in-process: keys that are not
// AG-UI spec keys for the type move under metadata.tanstack (model,
// finishReason, index, ...), except the cumulative model/content/args on
// deltas and toolName on TOOL_CALL_START, which are dropped; RUN_ERROR's
// error object fills a missing message and code. The in-process aliases are
// then restored: TOOL_CALL_START.ToolName and TOOL_CALL_END.Input. Usage stays
// a TokenUsage; the wire encoder writes its spec form.
//
// Normalize never modifies e's maps; it copies before it writes.
func Normalize(e *Event) Event {
	n := normalizeSpec(e)
	switch n.Type {
	case ToolCallStart:
		if n.ToolName == "" {
			n.ToolName = n.ToolCallName
		}
	case ToolCallEnd:
		if n.Input == nil && e.Input != nil {
			n.Input = e.Input
		}
	}
	return n
}

// normalizeSpec is Normalize without the in-process aliases: the wire form.
func normalizeSpec(e *Event) Event {
	// The hot path: a text or tool-args delta whose only extra is the
	// model (the reference's adapters stamp it on every chunk).
	if e.Model != "" && (e.Type == TextMessageContent || e.Type == ToolCallArgs) {
		n := *e
		n.Model = ""
		if isPlainDelta(&n) {
			return n
		}
	}
	spec := specKeys[e.Type]
	n := *e
	var ts extras
	put := ts.put
	isDelta := e.Type == TextMessageContent || e.Type == ToolCallArgs

	if e.Type == ToolCallStart && n.ToolCallName == "" {
		n.ToolCallName = e.ToolName
	}
	if e.Type == RunError && e.Error != nil {
		if n.Message == "" && e.Error.Message != "" {
			n.Message = e.Error.Message
		}
		if n.Code == "" && e.Error.Code != "" {
			n.Code = e.Error.Code
		}
	}
	n.Error = nil

	// TanStack extras.
	if e.Model != "" {
		if !isDelta {
			put("model", e.Model)
		}
		n.Model = ""
	}
	if e.FinishReason != "" {
		put("finishReason", e.FinishReason)
		n.FinishReason = ""
	}
	if e.Args != "" {
		if !isDelta {
			put("args", e.Args)
		}
		n.Args = ""
	}
	if e.ToolName != "" {
		if e.Type != ToolCallStart {
			put("toolName", e.ToolName)
		}
		n.ToolName = ""
	}
	if e.Index != nil {
		put("index", *e.Index)
		n.Index = nil
	}
	if e.State != "" {
		put("state", e.State)
		n.State = ""
	}
	if e.StepID != "" {
		put("stepId", e.StepID)
		n.StepID = ""
	}
	if e.StepType != "" {
		put("stepType", e.StepType)
		n.StepType = ""
	}
	if e.Signature != "" {
		put("signature", e.Signature)
		n.Signature = ""
	}
	n.Result = nil
	if e.Result != nil && spec&kResult != 0 {
		n.Result = e.Result
	}

	// Named keys that are not spec for this type move under
	// metadata.tanstack, except the cumulative content of a delta (dropped).
	if e.ThreadID != "" && spec&kThreadID == 0 {
		put("threadId", e.ThreadID)
		n.ThreadID = ""
	}
	if e.RunID != "" && spec&kRunID == 0 {
		put("runId", e.RunID)
		n.RunID = ""
	}
	if e.ParentRunID != "" && spec&kParentRunID == 0 {
		put("parentRunId", e.ParentRunID)
		n.ParentRunID = ""
	}
	if e.Input != nil && spec&kInput == 0 {
		put("input", e.Input)
		n.Input = nil
	}
	if e.Outcome != nil && spec&kOutcome == 0 {
		put("outcome", e.Outcome)
		n.Outcome = nil
	}
	if e.Usage != nil && spec&kUsage == 0 {
		put("usage", e.Usage)
		n.Usage = nil
	}
	if e.Message != "" && spec&kMessage == 0 {
		put("message", e.Message)
		n.Message = ""
	}
	if e.Code != "" && spec&kCode == 0 {
		put("code", e.Code)
		n.Code = ""
	}
	if e.MessageID != "" && spec&kMessageID == 0 {
		put("messageId", e.MessageID)
		n.MessageID = ""
	}
	if e.Role != "" && spec&kRole == 0 {
		put("role", e.Role)
		n.Role = ""
	}
	if e.Name != "" && spec&kName == 0 {
		put("name", e.Name)
		n.Name = ""
	}
	if e.Delta != "" && spec&kDelta == 0 {
		put("delta", e.Delta)
		n.Delta = ""
	}
	if e.Patch != nil && spec&kDelta == 0 {
		put("delta", e.Patch)
		n.Patch = nil
	}
	if e.ToolCallID != "" && spec&kToolCallID == 0 {
		put("toolCallId", e.ToolCallID)
		n.ToolCallID = ""
	}
	if n.ToolCallName != "" && spec&kToolCallName == 0 {
		put("toolCallName", n.ToolCallName)
		n.ToolCallName = ""
	}
	if e.ParentMessageID != "" && spec&kParentMessageID == 0 {
		put("parentMessageId", e.ParentMessageID)
		n.ParentMessageID = ""
	}
	if e.Content != "" && spec&kContent == 0 {
		if !isDelta {
			put("content", e.Content)
		}
		n.Content = ""
	}
	if e.StepName != "" && spec&kStepName == 0 {
		put("stepName", e.StepName)
		n.StepName = ""
	}
	if e.Subtype != "" && spec&kSubtype == 0 {
		put("subtype", e.Subtype)
		n.Subtype = ""
	}
	if e.EntityID != "" && spec&kEntityID == 0 {
		put("entityId", e.EntityID)
		n.EntityID = ""
	}
	if e.EncryptedValue != "" && spec&kEncryptedValue == 0 {
		put("encryptedValue", e.EncryptedValue)
		n.EncryptedValue = ""
	}
	if e.Messages != nil && spec&kMessages == 0 {
		put("messages", e.Messages)
		n.Messages = nil
	}
	if e.Snapshot != nil && spec&kSnapshot == 0 {
		put("snapshot", e.Snapshot)
		n.Snapshot = nil
	}
	if e.Value != nil && spec&kValue == 0 {
		put("value", e.Value)
		n.Value = nil
	}
	if len(e.Extra) > 0 {
		var keep map[string]json.RawMessage
		for k, v := range e.Extra {
			switch {
			case isExtraSpec(e.Type, k):
				if keep == nil {
					keep = make(map[string]json.RawMessage)
				}
				keep[k] = v
			case k == "tanstack:interruptErrors":
				put("interruptErrors", v)
			case isDelta && (k == "model" || k == "content" || k == "args"):
			case k == "result" || k == "error":
			default:
				if ts.m == nil || ts.m[k] == nil {
					put(k, v)
				}
			}
		}
		n.Extra = keep
	}
	if n.Usage != nil && (e.Type == RunFinished || e.Type == RunError) {
		if left := usageLeftover(n.Usage); left != nil {
			put("usage", left)
		}
	}
	if ts.m != nil {
		n.Metadata = withTanstack(e.Metadata, ts.m)
	}
	return n
}

// extras collects the keys an event moves under metadata.tanstack.
type extras struct{ m map[string]any }

func (x *extras) put(k string, v any) {
	if x.m == nil {
		x.m = make(map[string]any, 4)
	}
	x.m[k] = v
}

// withTanstack returns a copy of meta whose "tanstack" object is the merge
// of the existing one and add (add wins).
func withTanstack(meta map[string]any, add map[string]any) map[string]any {
	out := make(map[string]any, len(meta)+1)
	maps.Copy(out, meta)
	merged := make(map[string]any, len(add)+4)
	if cur, ok := meta["tanstack"].(map[string]any); ok {
		maps.Copy(merged, cur)
	}
	maps.Copy(merged, add)
	out["tanstack"] = merged
	return out
}

// WithTanstack returns a copy of e whose metadata.tanstack has add merged in.
func WithTanstack(e Event, add map[string]any) Event {
	e.Metadata = withTanstack(e.Metadata, add)
	return e
}

// Fanout returns the events the engine derives from a normalized chunk
// after middleware has seen it: a TOOL_CALL_RESULT for a TOOL_CALL_END that
// carries a result, and REASONING_ENCRYPTED_VALUE events for signatures. The
// argument is the chunk as middleware produced it (before Normalize).
func Fanout(e *Event) []Event {
	var out []Event
	if e.Type == ToolCallEnd && e.Result != nil {
		r := Event{Type: ToolCallResult, ToolCallID: e.ToolCallID, Content: resultContent(e.Result)}
		if e.ParentMessageID != "" {
			r.MessageID = e.ParentMessageID
		} else {
			r.MessageID = e.ToolCallID
		}
		if e.State == "output-error" {
			r.Metadata = map[string]any{"tanstack": map[string]any{"state": e.State}}
		}
		out = append(out, r)
	}
	if e.Signature != "" {
		entity := firstNonEmpty(e.StepID, e.StepName, e.MessageID, e.ToolCallID)
		if entity != "" {
			sub := "message"
			if e.ToolCallID != "" && e.StepID == "" {
				sub = "tool-call"
			}
			out = append(out, Event{Type: ReasoningEncryptedValue, Subtype: sub, EntityID: entity,
				EncryptedValue: e.Signature, Timestamp: e.Timestamp})
		}
	}
	if e.Type == ToolCallStart && e.ToolCallID != "" {
		if sig, ok := e.Metadata["thoughtSignature"].(string); ok && sig != "" {
			out = append(out, Event{Type: ReasoningEncryptedValue, Subtype: "tool-call", EntityID: e.ToolCallID,
				EncryptedValue: sig, Timestamp: e.Timestamp})
		}
	}
	return out
}

// resultContent renders a tool result for TOOL_CALL_RESULT.content: a JSON
// string is used verbatim, anything else as its JSON text.
func resultContent(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// Int returns a pointer to v, for Event.Index.
func Int(v int) *int { return &v }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
