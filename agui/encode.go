package agui

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MarshalJSON encodes every set field of the event as is (the in-process
// form, extras at the top level).
func (e Event) MarshalJSON() ([]byte, error) {
	return AppendJSON(nil, &e), nil
}

// AppendJSON appends the JSON of every set field of e to dst.
func AppendJSON(dst []byte, e *Event) []byte {
	return appendEvent(dst, e, false, "")
}

// AppendWire appends the wire form of e to dst: the event normalized to its
// AG-UI spec keys with TanStack extras under metadata.tanstack, and usage in
// the spec array form with leftovers in metadata.tanstack.usage. It is what
// the SSE and NDJSON encoders write.
func AppendWire(dst []byte, e *Event) []byte {
	if isPlainDelta(e) || inWireForm(e) {
		// The engine's events arrive normalized: write them as they are
		// instead of normalizing a second time.
		return appendEvent(dst, e, true, "")
	}
	return appendNormalized(dst, e)
}

// appendNormalized is AppendWire's slow path. Not inlined: the normalized
// copy it holds would otherwise be in AppendWire's frame, on the stack of
// every event a server writes.
//
//go:noinline
func appendNormalized(dst []byte, e *Event) []byte {
	n := normalizeSpec(e)
	return appendEvent(dst, &n, true, e.Model)
}

// isPlainDelta reports whether e is already in spec form, so the hot
// delta events skip the normalization copy.
func isPlainDelta(e *Event) bool {
	if e.Type != TextMessageContent && e.Type != ToolCallArgs && e.Type != ReasoningMessageContent {
		return false
	}
	return e.Extra == nil && e.Model == "" && e.Content == "" && e.Args == "" && e.FinishReason == "" &&
		e.Usage == nil && e.Index == nil && e.ToolName == "" && e.State == "" && e.StepID == "" &&
		e.StepType == "" && e.Signature == "" && e.Error == nil && e.Result == nil && e.Input == nil &&
		e.ThreadID == "" && e.RunID == "" && e.ParentRunID == "" && e.Role == "" && e.Name == "" &&
		e.ToolCallName == "" && e.ParentMessageID == "" && e.StepName == "" && e.Message == "" &&
		e.Code == "" && e.Subtype == "" && e.EntityID == "" && e.EncryptedValue == "" && e.Messages == nil &&
		e.Snapshot == nil && e.Patch == nil && e.Value == nil && e.Outcome == nil &&
		(e.Type == ToolCallArgs || e.ToolCallID == "") && (e.Type != ToolCallArgs || e.MessageID == "")
}

// inWireForm reports whether normalizeSpec would hand e back unchanged, apart
// from in-process fields appendEvent never writes on the wire (the
// TOOL_CALL_START toolName alias): no TanStack extra outside metadata, no
// named key the type's spec lacks, no non-spec Extra key. Usage on
// RUN_FINISHED and RUN_ERROR passes, as appendEvent splits it the same way.
func inWireForm(e *Event) bool {
	if e.Model != "" || e.FinishReason != "" || e.Args != "" || e.Index != nil || e.State != "" ||
		e.StepID != "" || e.StepType != "" || e.Signature != "" || e.Error != nil {
		return false
	}
	spec := specKeys[e.Type]
	if e.ToolName != "" && (e.Type != ToolCallStart || e.ToolCallName == "") {
		return false
	}
	if e.Result != nil && spec&kResult == 0 {
		return false
	}
	var has keySet
	set := func(k keySet, present bool) {
		if present {
			has |= k
		}
	}
	set(kThreadID, e.ThreadID != "")
	set(kRunID, e.RunID != "")
	set(kParentRunID, e.ParentRunID != "")
	set(kInput, e.Input != nil)
	set(kOutcome, e.Outcome != nil)
	set(kUsage, e.Usage != nil)
	set(kMessage, e.Message != "")
	set(kCode, e.Code != "")
	set(kMessageID, e.MessageID != "")
	set(kRole, e.Role != "")
	set(kName, e.Name != "")
	set(kDelta, e.Delta != "" || e.Patch != nil)
	set(kToolCallID, e.ToolCallID != "")
	set(kToolCallName, e.ToolCallName != "")
	set(kParentMessageID, e.ParentMessageID != "")
	set(kContent, e.Content != "")
	set(kStepName, e.StepName != "")
	set(kSubtype, e.Subtype != "")
	set(kEntityID, e.EntityID != "")
	set(kEncryptedValue, e.EncryptedValue != "")
	set(kMessages, e.Messages != nil)
	set(kSnapshot, e.Snapshot != nil)
	set(kValue, e.Value != nil)
	if has&^spec != 0 {
		return false
	}
	for k := range e.Extra {
		if !isExtraSpec(e.Type, k) {
			return false
		}
	}
	return true
}

func appendEvent(b []byte, e *Event, wire bool, usageModel string) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, string(e.Type))
	str := func(key, v string) {
		if v != "" {
			b = append(b, ',', '"')
			b = append(b, key...)
			b = append(b, '"', ':')
			b = appendString(b, v)
		}
	}
	raw := func(key string, v json.RawMessage) {
		if v != nil {
			b = append(b, ',', '"')
			b = append(b, key...)
			b = append(b, '"', ':')
			b = appendCompact(b, v)
		}
	}
	str("threadId", e.ThreadID)
	str("runId", e.RunID)
	str("parentRunId", e.ParentRunID)
	str("messageId", e.MessageID)
	str("parentMessageId", e.ParentMessageID)
	str("role", e.Role)
	str("name", e.Name)
	str("delta", e.Delta)
	raw("delta", e.Patch)
	str("toolCallId", e.ToolCallID)
	str("toolCallName", e.ToolCallName)
	str("content", e.Content)
	str("stepName", e.StepName)
	str("message", e.Message)
	str("code", e.Code)
	str("subtype", e.Subtype)
	str("entityId", e.EntityID)
	str("encryptedValue", e.EncryptedValue)
	raw("messages", e.Messages)
	raw("snapshot", e.Snapshot)
	raw("value", e.Value)
	raw("result", e.Result)
	if !wire || e.Type != ToolCallEnd {
		raw("input", e.Input)
	}
	if e.Outcome != nil {
		ob, _ := marshalNoEscape(e.Outcome)
		raw("outcome", ob)
	}
	raw("rawEvent", e.RawEvent)
	if !wire {
		str("model", e.Model)
		str("finishReason", e.FinishReason)
		str("args", e.Args)
		str("toolName", e.ToolName)
		if e.Index != nil {
			b = append(b, `,"index":`...)
			b = strconv.AppendInt(b, int64(*e.Index), 10)
		}
		str("state", e.State)
		str("stepId", e.StepID)
		str("stepType", e.StepType)
		str("signature", e.Signature)
		if e.Error != nil {
			eb, _ := marshalNoEscape(e.Error)
			raw("error", eb)
		}
	}
	meta := e.Metadata
	if e.Usage != nil {
		if wire {
			b = appendSpecUsage(b, e.Usage, usageModel)
			if left := usageLeftover(e.Usage); left != nil {
				meta = withTanstack(meta, map[string]any{"usage": left})
			}
		} else {
			b = append(b, `,"usage":`...)
			b = e.Usage.appendJSON(b)
		}
	}
	if len(e.Extra) > 0 {
		for _, k := range slices.Sorted(maps.Keys(e.Extra)) {
			if e.Extra[k] == nil {
				continue
			}
			b = append(b, ',')
			b = appendString(b, k) // keys come from the input: escape them
			b = append(b, ':')
			b = append(b, e.Extra[k]...)
		}
	}
	if e.Timestamp != 0 {
		b = append(b, `,"timestamp":`...)
		b = strconv.AppendInt(b, e.Timestamp, 10)
	}
	if meta != nil {
		mb, err := marshalNoEscape(meta)
		if err == nil {
			raw("metadata", mb)
		}
	}
	return append(b, '}')
}

// appendSpecUsage writes the AG-UI usage array. model, when set, is the
// chunk's own top-level model, which the reference records in the array
// entry (an already normalized event has none).
func appendSpecUsage(b []byte, u *TokenUsage, model string) []byte {
	b = append(b, `,"usage":[{`...)
	if model != "" {
		b = append(b, `"model":`...)
		b = appendString(b, model)
		b = append(b, ',')
	}
	b = append(b, `"inputTokens":`...)
	b = strconv.AppendInt(b, u.PromptTokens, 10)
	b = append(b, `,"outputTokens":`...)
	b = strconv.AppendInt(b, u.CompletionTokens, 10)
	b = append(b, `,"totalTokens":`...)
	b = strconv.AppendInt(b, u.TotalTokens, 10)
	if d := u.PromptTokensDetails; d != nil && d.CachedTokens != nil {
		b = append(b, `,"cachedInputTokens":`...)
		b = strconv.AppendInt(b, *d.CachedTokens, 10)
	}
	if d := u.CompletionTokensDetails; d != nil && d.ReasoningTokens != nil {
		b = append(b, `,"reasoningTokens":`...)
		b = strconv.AppendInt(b, *d.ReasoningTokens, 10)
	}
	return append(b, '}', ']')
}

// usageLeftover returns what the spec usage array cannot hold (the
// reference's metadata.tanstack.usage), or nil.
func usageLeftover(u *TokenUsage) map[string]any {
	var left map[string]any
	add := func(k string, v any) {
		if left == nil {
			left = make(map[string]any)
		}
		left[k] = v
	}
	if d := u.PromptTokensDetails; d != nil {
		rest := map[string]any{}
		if d.CacheWriteTokens != nil {
			rest["cacheWriteTokens"] = *d.CacheWriteTokens
		}
		for k, v := range d.Extra {
			rest[k] = v
		}
		if len(rest) > 0 {
			add("promptTokensDetails", rest)
		}
	}
	if d := u.CompletionTokensDetails; d != nil {
		rest := map[string]any{}
		for k, v := range d.Extra {
			rest[k] = v
		}
		if len(rest) > 0 {
			add("completionTokensDetails", rest)
		}
	}
	for k, v := range u.Extra {
		add(k, v)
	}
	return left
}

// MarshalJSON encodes the TanStack TokenUsage shape.
func (u TokenUsage) MarshalJSON() ([]byte, error) { return u.appendJSON(nil), nil }

func (u *TokenUsage) appendJSON(b []byte) []byte {
	b = append(b, `{"promptTokens":`...)
	b = strconv.AppendInt(b, u.PromptTokens, 10)
	b = append(b, `,"completionTokens":`...)
	b = strconv.AppendInt(b, u.CompletionTokens, 10)
	b = append(b, `,"totalTokens":`...)
	b = strconv.AppendInt(b, u.TotalTokens, 10)
	if d := u.PromptTokensDetails; d != nil {
		b = append(b, `,"promptTokensDetails":{`...)
		first := true
		sep := func() {
			if !first {
				b = append(b, ',')
			}
			first = false
		}
		if d.CachedTokens != nil {
			sep()
			b = append(b, `"cachedTokens":`...)
			b = strconv.AppendInt(b, *d.CachedTokens, 10)
		}
		if d.CacheWriteTokens != nil {
			sep()
			b = append(b, `"cacheWriteTokens":`...)
			b = strconv.AppendInt(b, *d.CacheWriteTokens, 10)
		}
		for _, k := range slices.Sorted(maps.Keys(d.Extra)) {
			sep()
			b = appendString(b, k)
			b = append(b, ':')
			b = append(b, d.Extra[k]...)
		}
		b = append(b, '}')
	}
	if d := u.CompletionTokensDetails; d != nil {
		b = append(b, `,"completionTokensDetails":{`...)
		first := true
		if d.ReasoningTokens != nil {
			first = false
			b = append(b, `"reasoningTokens":`...)
			b = strconv.AppendInt(b, *d.ReasoningTokens, 10)
		}
		for _, k := range slices.Sorted(maps.Keys(d.Extra)) {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendString(b, k)
			b = append(b, ':')
			b = append(b, d.Extra[k]...)
		}
		b = append(b, '}')
	}
	for _, k := range slices.Sorted(maps.Keys(u.Extra)) {
		b = append(b, ',')
		b = appendString(b, k)
		b = append(b, ':')
		b = append(b, u.Extra[k]...)
	}
	return append(b, '}')
}

// Marshal is json.Marshal without HTML escaping, matching JSON.stringify's
// output for the same value.
func Marshal(v any) ([]byte, error) { return marshalNoEscape(v) }

// marshalNoEscape is json.Marshal without HTML escaping, matching
// JSON.stringify's output for the same value.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// appendCompact appends raw JSON without insignificant whitespace, so a
// pretty-printed value cannot break an SSE data line or an NDJSON line.
func appendCompact(b []byte, v json.RawMessage) []byte {
	if !bytes.ContainsAny(v, " \t\r\n") {
		return append(b, v...)
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, v); err != nil {
		return append(b, "null"...)
	}
	return buf.Bytes()
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way JSON.stringify writes it:
// only quotes, backslashes and control characters are escaped; invalid UTF-8
// becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\ufffd"...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendString appends s as a JSON string (JSON.stringify-compatible).
func AppendString(b []byte, s string) []byte { return appendString(b, s) }
