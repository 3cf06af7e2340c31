package agui

import (
	"encoding/json"

	"github.com/goai-sdk/goai/internal/jsonlex"
)

// Restore rebuilds, in place, the pre-wire form of an event read from the
// wire, as the TanStack client does with every chunk it receives:
//
//   - RUN_FINISHED and RUN_ERROR usage becomes a TokenUsage again, with the
//     leftovers (cost, cacheWriteTokens, ...) from metadata.tanstack.usage
//     merged back in;
//   - TOOL_CALL_START gets its toolName alias, TOOL_CALL_END its input;
//   - every other metadata.tanstack key is copied to the top level when the
//     event does not already have it there (interruptErrors goes to
//     Extra["tanstack:interruptErrors"]).
//
// Metadata is left as it is.
func Restore(e *Event) {
	ts := e.TanstackMeta()
	if (e.Type == RunFinished || e.Type == RunError) && e.Usage != nil {
		if left, ok := ts["usage"].(map[string]any); ok {
			mergeUsageLeftover(e.Usage, left)
		}
	}
	if e.Type == ToolCallStart && e.ToolName == "" && e.ToolCallName != "" {
		e.ToolName = e.ToolCallName
	}
	if ts == nil {
		return
	}
	var s jsonlex.Scanner
	var scratch []byte
	for k, v := range ts {
		if k == "usage" {
			continue
		}
		raw, err := marshalNoEscape(v)
		if err != nil {
			continue
		}
		if k == "interruptErrors" {
			if _, ok := e.Extra["tanstack:interruptErrors"]; !ok {
				setExtra(e, "tanstack:interruptErrors", raw)
			}
			continue
		}
		if hasTopLevel(e, k) {
			continue
		}
		s.Reset(raw)
		if err := decodeField(&s, e, k, &scratch); err != nil {
			setExtra(e, k, raw)
		}
	}
}

func setExtra(e *Event, k string, raw json.RawMessage) {
	if e.Extra == nil {
		e.Extra = make(map[string]json.RawMessage, 2)
	}
	e.Extra[k] = raw
}

// hasTopLevel reports whether the event already carries key at the top
// level.
func hasTopLevel(e *Event, key string) bool {
	switch key {
	case "type", "timestamp", "metadata":
		return true
	case "threadId":
		return e.ThreadID != ""
	case "runId":
		return e.RunID != ""
	case "parentRunId":
		return e.ParentRunID != ""
	case "messageId":
		return e.MessageID != ""
	case "parentMessageId":
		return e.ParentMessageID != ""
	case "role":
		return e.Role != ""
	case "name":
		return e.Name != ""
	case "delta":
		return e.Delta != "" || e.Patch != nil
	case "toolCallId":
		return e.ToolCallID != ""
	case "toolCallName":
		return e.ToolCallName != ""
	case "content":
		return e.Content != ""
	case "stepName":
		return e.StepName != ""
	case "message":
		return e.Message != ""
	case "code":
		return e.Code != ""
	case "subtype":
		return e.Subtype != ""
	case "entityId":
		return e.EntityID != ""
	case "encryptedValue":
		return e.EncryptedValue != ""
	case "messages":
		return e.Messages != nil
	case "snapshot":
		return e.Snapshot != nil
	case "value":
		return e.Value != nil
	case "result":
		return e.Result != nil
	case "input":
		return e.Input != nil
	case "rawEvent":
		return e.RawEvent != nil
	case "outcome":
		return e.Outcome != nil
	case "model":
		return e.Model != ""
	case "finishReason":
		_, null := e.Extra["finishReason"]
		return e.FinishReason != "" || null
	case "args":
		return e.Args != ""
	case "toolName":
		return e.ToolName != ""
	case "index":
		return e.Index != nil
	case "state":
		return e.State != ""
	case "stepId":
		return e.StepID != ""
	case "stepType":
		return e.StepType != ""
	case "signature":
		return e.Signature != ""
	case "error":
		return e.Error != nil
	case "usage":
		return e.Usage != nil
	}
	_, ok := e.Extra[key]
	return ok
}

// mergeUsageLeftover puts the keys toSpecTokenUsage left out of the spec
// usage array back into u, without overwriting what u already has.
func mergeUsageLeftover(u *TokenUsage, left map[string]any) {
	for k, v := range left {
		raw, err := marshalNoEscape(v)
		if err != nil {
			continue
		}
		switch k {
		case "promptTokens", "completionTokens", "totalTokens":
		case "promptTokensDetails":
			d, ok := v.(map[string]any)
			if !ok {
				continue
			}
			if u.PromptTokensDetails == nil {
				u.PromptTokensDetails = &PromptTokensDetails{}
			}
			pd := u.PromptTokensDetails
			for dk, dv := range d {
				draw, _ := marshalNoEscape(dv)
				switch dk {
				case "cachedTokens":
					if pd.CachedTokens == nil {
						pd.CachedTokens = int64Ptr(draw)
					}
				case "cacheWriteTokens":
					if pd.CacheWriteTokens == nil {
						pd.CacheWriteTokens = int64Ptr(draw)
					}
				default:
					if _, ok := pd.Extra[dk]; !ok {
						if pd.Extra == nil {
							pd.Extra = map[string]json.RawMessage{}
						}
						pd.Extra[dk] = draw
					}
				}
			}
		case "completionTokensDetails":
			d, ok := v.(map[string]any)
			if !ok {
				continue
			}
			if u.CompletionTokensDetails == nil {
				u.CompletionTokensDetails = &CompletionTokensDetails{}
			}
			cd := u.CompletionTokensDetails
			for dk, dv := range d {
				draw, _ := marshalNoEscape(dv)
				if dk == "reasoningTokens" {
					if cd.ReasoningTokens == nil {
						cd.ReasoningTokens = int64Ptr(draw)
					}
					continue
				}
				if _, ok := cd.Extra[dk]; !ok {
					if cd.Extra == nil {
						cd.Extra = map[string]json.RawMessage{}
					}
					cd.Extra[dk] = draw
				}
			}
		default:
			if _, ok := u.Extra[k]; !ok {
				if u.Extra == nil {
					u.Extra = map[string]json.RawMessage{}
				}
				u.Extra[k] = raw
			}
		}
	}
}
