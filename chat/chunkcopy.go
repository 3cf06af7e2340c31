package chat

import (
	"bytes"
	"encoding/json"

	"github.com/goai-sdk/goai/agui"
)

// hookChunk is the copy of a chunk one OnChunk hook may write to: a
// middleware that changes the event it was given and returns Pass changes
// nothing for later middleware or the client (to change a chunk, return
// Replace). The run keeps one per chunk middleware, so the copy costs no
// allocation on the hot path (text deltas carry no maps or pointers); the
// storage behind pointer fields lives here too, and maps and raw JSON are
// cloned only when the chunk has them.
type hookChunk struct {
	ev      agui.Event
	usage   agui.TokenUsage
	index   int
	errInfo agui.ErrorInfo
	outcome agui.Outcome
}

// load makes h a copy of src no write through which can reach src.
func (h *hookChunk) load(src *agui.Event) *agui.Event {
	h.ev = *src
	e := &h.ev
	if src.Usage != nil {
		h.usage = cloneUsage(src.Usage)
		e.Usage = &h.usage
	}
	if src.Index != nil {
		h.index = *src.Index
		e.Index = &h.index
	}
	if src.Error != nil {
		h.errInfo = *src.Error
		e.Error = &h.errInfo
	}
	if src.Outcome != nil {
		h.outcome = *src.Outcome
		h.outcome.Interrupts = cloneInterrupts(src.Outcome.Interrupts)
		e.Outcome = &h.outcome
	}
	if src.Metadata != nil {
		e.Metadata = cloneAnyMap(src.Metadata)
	}
	e.Extra = cloneRawMap(src.Extra)
	for _, raw := range []*json.RawMessage{&e.Messages, &e.Snapshot, &e.Patch, &e.Value, &e.Result, &e.Input, &e.RawEvent} {
		if *raw != nil {
			*raw = bytes.Clone(*raw)
		}
	}
	return e
}

// cloneAnyMap copies a decoded JSON object deeply (maps and arrays).
func cloneAnyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneAny(v)
	}
	return out
}

func cloneAny(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneAnyMap(x)
	case []any:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = cloneAny(y)
		}
		return out
	case json.RawMessage:
		return bytes.Clone(x)
	}
	return v
}

func cloneInterrupts(in []agui.Interrupt) []agui.Interrupt {
	if in == nil {
		return nil
	}
	out := make([]agui.Interrupt, len(in))
	for i, it := range in {
		it.ResponseSchema = bytes.Clone(it.ResponseSchema)
		if it.Metadata != nil {
			it.Metadata = cloneAnyMap(it.Metadata)
		}
		out[i] = it
	}
	return out
}

func cloneUsage(u *agui.TokenUsage) agui.TokenUsage {
	c := *u
	c.Extra = cloneRawMap(u.Extra)
	if d := u.PromptTokensDetails; d != nil {
		c.PromptTokensDetails = &agui.PromptTokensDetails{CachedTokens: cloneInt(d.CachedTokens), CacheWriteTokens: cloneInt(d.CacheWriteTokens), Extra: cloneRawMap(d.Extra)}
	}
	if d := u.CompletionTokensDetails; d != nil {
		c.CompletionTokensDetails = &agui.CompletionTokensDetails{ReasoningTokens: cloneInt(d.ReasoningTokens), Extra: cloneRawMap(d.Extra)}
	}
	return c
}

func cloneInt(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneRawMap(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = bytes.Clone(v)
	}
	return out
}
