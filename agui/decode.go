package agui

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/goai-sdk/goai/internal/jsonlex"
)

// UnmarshalJSON decodes one event object. Unknown keys are kept in Extra.
func (e *Event) UnmarshalJSON(data []byte) error {
	if err := DecodeEvent(data, e); err != nil {
		return err
	}
	if e.Type == "" {
		return fmt.Errorf("event: missing string \"type\"")
	}
	return nil
}

// DecodeEvent decodes one event object from data into e (which it resets).
// Unlike UnmarshalJSON it does not require a type; callers that need one
// check e.Type. Unknown keys are kept in Extra. e holds no reference to
// data, so the buffer may be reused afterwards.
func DecodeEvent(data []byte, e *Event) error {
	var s jsonlex.Scanner
	s.Reset(data)
	if err := decodeEvent(&s, e); err != nil {
		return err
	}
	if !s.AtEOF() {
		return fmt.Errorf("event: trailing data at offset %d", s.Pos())
	}
	return nil
}

// knownTypes interns the event types this package names.
var knownTypes = func() map[string]EventType {
	m := make(map[string]EventType)
	for _, t := range []EventType{RunStarted, RunFinished, RunError, TextMessageStart, TextMessageContent,
		TextMessageEnd, TextMessageChunk, ToolCallStart, ToolCallArgs, ToolCallEnd, ToolCallResult, ToolCallChunk,
		StepStarted, StepFinished, ReasoningStart, ReasoningMessageStart, ReasoningMessageContent, ReasoningMessageEnd,
		ReasoningMessageChunk, ReasoningEnd, ReasoningEncryptedValue, MessagesSnapshot, StateSnapshot, StateDelta,
		Custom, Raw} {
		m[string(t)] = t
	}
	return m
}()

// decodeEvent reads one event object from s into e (which it resets).
func decodeEvent(s *jsonlex.Scanner, e *Event) error {
	*e = Event{}
	if err := s.ObjectStart(); err != nil {
		return fmt.Errorf("event: %w", err)
	}
	var scratch []byte
	for first := true; ; first = false {
		key, ok, err := s.NextKey(first)
		if err != nil {
			return fmt.Errorf("event: %w", err)
		}
		if !ok {
			break
		}
		if err := decodeField(s, e, string(key), &scratch); err != nil {
			return fmt.Errorf("event field %q: %w", key, err)
		}
	}
	return nil
}

func decodeField(s *jsonlex.Scanner, e *Event, key string, scratch *[]byte) error {
	str := func(dst *string) error {
		if s.IsNull() {
			return nil
		}
		v, err := s.String((*scratch)[:0])
		if err != nil {
			return err
		}
		// v may alias the input: copy it, and never keep it as scratch.
		*dst = string(v)
		return nil
	}
	raw := func(dst *json.RawMessage) error {
		v, err := s.Raw()
		if err != nil {
			return err
		}
		*dst = json.RawMessage(v)
		return nil
	}
	switch key {
	case "type":
		if s.IsNull() {
			return nil
		}
		v, err := s.String((*scratch)[:0])
		if err != nil {
			return err
		}
		// The known types share one string each instead of a copy per event.
		if t, ok := knownTypes[string(v)]; ok {
			e.Type = t
		} else {
			e.Type = EventType(v)
		}
		return nil
	case "timestamp":
		if s.IsNull() {
			return nil
		}
		v, err := s.Int()
		e.Timestamp = v
		return err
	case "threadId":
		return strOrExtra(s, e, key, &e.ThreadID, str)
	case "runId":
		return strOrExtra(s, e, key, &e.RunID, str)
	case "parentRunId":
		return strOrExtra(s, e, key, &e.ParentRunID, str)
	case "messageId":
		return strOrExtra(s, e, key, &e.MessageID, str)
	case "parentMessageId":
		return strOrExtra(s, e, key, &e.ParentMessageID, str)
	case "role":
		return strOrExtra(s, e, key, &e.Role, str)
	case "name":
		return strOrExtra(s, e, key, &e.Name, str)
	case "delta":
		if s.Peek() == '"' {
			return str(&e.Delta)
		}
		return raw(&e.Patch)
	case "toolCallId":
		return strOrExtra(s, e, key, &e.ToolCallID, str)
	case "toolCallName":
		return strOrExtra(s, e, key, &e.ToolCallName, str)
	case "content":
		return strOrExtra(s, e, key, &e.Content, str)
	case "stepName":
		return strOrExtra(s, e, key, &e.StepName, str)
	case "message":
		return strOrExtra(s, e, key, &e.Message, str)
	case "code":
		if s.Peek() == '"' {
			return str(&e.Code)
		}
		if c := s.Peek(); c == '-' || (c >= '0' && c <= '9') {
			n, err := s.Number()
			e.Code = string(n)
			return err
		}
		return extra(s, e, key)
	case "subtype":
		return strOrExtra(s, e, key, &e.Subtype, str)
	case "entityId":
		return strOrExtra(s, e, key, &e.EntityID, str)
	case "encryptedValue":
		return strOrExtra(s, e, key, &e.EncryptedValue, str)
	case "messages":
		return raw(&e.Messages)
	case "snapshot":
		return raw(&e.Snapshot)
	case "value":
		return raw(&e.Value)
	case "result":
		return raw(&e.Result)
	case "input":
		return raw(&e.Input)
	case "rawEvent":
		return raw(&e.RawEvent)
	case "outcome":
		if s.IsNull() {
			return nil
		}
		v, err := s.Raw()
		if err != nil {
			return err
		}
		e.Outcome = new(Outcome)
		return json.Unmarshal(v, e.Outcome)
	case "metadata":
		if s.IsNull() {
			return nil
		}
		v, err := s.Raw()
		if err != nil {
			return err
		}
		// Numbers stay json.Number so any valid JSON number round-trips.
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		return dec.Decode(&e.Metadata)
	case "model":
		return strOrExtra(s, e, key, &e.Model, str)
	case "finishReason":
		if s.Peek() == 'n' {
			return extra(s, e, key) // a defined null still travels in metadata.tanstack
		}
		return strOrExtra(s, e, key, &e.FinishReason, str)
	case "args":
		return strOrExtra(s, e, key, &e.Args, str)
	case "toolName":
		return strOrExtra(s, e, key, &e.ToolName, str)
	case "state":
		return strOrExtra(s, e, key, &e.State, str)
	case "stepId":
		return strOrExtra(s, e, key, &e.StepID, str)
	case "stepType":
		return strOrExtra(s, e, key, &e.StepType, str)
	case "signature":
		return strOrExtra(s, e, key, &e.Signature, str)
	case "index":
		if c := s.Peek(); c == '-' || (c >= '0' && c <= '9') {
			v, err := s.Int()
			if err != nil {
				return err
			}
			i := int(v)
			e.Index = &i
			return nil
		}
		return extra(s, e, key)
	case "usage":
		if s.Peek() != '{' && s.Peek() != '[' {
			return extra(s, e, key)
		}
		v, err := s.Raw()
		if err != nil {
			return err
		}
		e.Usage = new(TokenUsage)
		return e.Usage.UnmarshalJSON(v)
	case "error":
		if s.Peek() != '{' {
			return extra(s, e, key)
		}
		v, err := s.Raw()
		if err != nil {
			return err
		}
		var ei struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
		}
		if err := json.Unmarshal(v, &ei); err != nil {
			return err
		}
		e.Error = &ErrorInfo{Message: ei.Message}
		switch c := ei.Code.(type) {
		case string:
			e.Error.Code = c
		case float64:
			e.Error.Code = fmt.Sprint(c)
		}
		return nil
	}
	return extra(s, e, key)
}

// strOrExtra decodes a string field; any other JSON kind is kept in Extra so
// nothing is lost.
func strOrExtra(s *jsonlex.Scanner, e *Event, key string, dst *string, str func(*string) error) error {
	if c := s.Peek(); c == '"' || c == 'n' {
		return str(dst)
	}
	return extra(s, e, key)
}

func extra(s *jsonlex.Scanner, e *Event, key string) error {
	v, err := s.Raw()
	if err != nil {
		return err
	}
	if e.Extra == nil {
		e.Extra = make(map[string]json.RawMessage, 2)
	}
	e.Extra[key] = json.RawMessage(v)
	return nil
}

// UnmarshalJSON accepts the TanStack shape ({promptTokens, ...}) and the
// AG-UI spec array ([{inputTokens, ...}]).
func (u *TokenUsage) UnmarshalJSON(data []byte) error {
	*u = TokenUsage{}
	var m map[string]json.RawMessage
	if len(data) > 0 && data[0] == '[' {
		var arr []map[string]json.RawMessage
		if err := json.Unmarshal(data, &arr); err != nil {
			return fmt.Errorf("usage: %w", err)
		}
		if len(arr) == 0 {
			return nil
		}
		m = arr[0]
		rename := map[string]string{"inputTokens": "promptTokens", "outputTokens": "completionTokens"}
		for from, to := range rename {
			if v, ok := m[from]; ok {
				m[to] = v
				delete(m, from)
			}
		}
		if v, ok := m["cachedInputTokens"]; ok {
			u.PromptTokensDetails = &PromptTokensDetails{CachedTokens: int64Ptr(v)}
			delete(m, "cachedInputTokens")
		}
		if v, ok := m["reasoningTokens"]; ok {
			u.CompletionTokensDetails = &CompletionTokensDetails{ReasoningTokens: int64Ptr(v)}
			delete(m, "reasoningTokens")
		}
		delete(m, "model")
		delete(m, "provider")
	} else if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	for k, v := range m {
		switch k {
		case "promptTokens":
			u.PromptTokens = int64Val(v)
		case "completionTokens":
			u.CompletionTokens = int64Val(v)
		case "totalTokens":
			u.TotalTokens = int64Val(v)
		case "promptTokensDetails":
			var d map[string]json.RawMessage
			if json.Unmarshal(v, &d) != nil {
				continue
			}
			if u.PromptTokensDetails == nil {
				u.PromptTokensDetails = &PromptTokensDetails{}
			}
			for dk, dv := range d {
				switch dk {
				case "cachedTokens":
					u.PromptTokensDetails.CachedTokens = int64Ptr(dv)
				case "cacheWriteTokens":
					u.PromptTokensDetails.CacheWriteTokens = int64Ptr(dv)
				default:
					if u.PromptTokensDetails.Extra == nil {
						u.PromptTokensDetails.Extra = map[string]json.RawMessage{}
					}
					u.PromptTokensDetails.Extra[dk] = dv
				}
			}
		case "completionTokensDetails":
			var d map[string]json.RawMessage
			if json.Unmarshal(v, &d) != nil {
				continue
			}
			if u.CompletionTokensDetails == nil {
				u.CompletionTokensDetails = &CompletionTokensDetails{}
			}
			for dk, dv := range d {
				if dk == "reasoningTokens" {
					u.CompletionTokensDetails.ReasoningTokens = int64Ptr(dv)
					continue
				}
				if u.CompletionTokensDetails.Extra == nil {
					u.CompletionTokensDetails.Extra = map[string]json.RawMessage{}
				}
				u.CompletionTokensDetails.Extra[dk] = dv
			}
		default:
			if u.Extra == nil {
				u.Extra = map[string]json.RawMessage{}
			}
			u.Extra[k] = v
		}
	}
	return nil
}

func int64Val(v json.RawMessage) int64 {
	var f float64
	if json.Unmarshal(v, &f) != nil {
		return 0
	}
	return int64(f)
}

func int64Ptr(v json.RawMessage) *int64 {
	var f float64
	if json.Unmarshal(v, &f) != nil {
		return nil
	}
	n := int64(f)
	return &n
}
