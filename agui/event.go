// Package agui holds the AG-UI event model as TanStack AI uses it: the events,
// the TanStack extras that adapters attach, the messages, the request body,
// and the SSE and NDJSON wire encodings.
package agui

import (
	"encoding/json"
)

// EventType is the AG-UI "type" discriminator.
type EventType string

// Event types of the AG-UI protocol that the engine understands. Any other
// type passes through unchanged.
const (
	RunStarted              EventType = "RUN_STARTED"
	RunFinished             EventType = "RUN_FINISHED"
	RunError                EventType = "RUN_ERROR"
	TextMessageStart        EventType = "TEXT_MESSAGE_START"
	TextMessageContent      EventType = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          EventType = "TEXT_MESSAGE_END"
	TextMessageChunk        EventType = "TEXT_MESSAGE_CHUNK"
	ToolCallStart           EventType = "TOOL_CALL_START"
	ToolCallArgs            EventType = "TOOL_CALL_ARGS"
	ToolCallEnd             EventType = "TOOL_CALL_END"
	ToolCallResult          EventType = "TOOL_CALL_RESULT"
	ToolCallChunk           EventType = "TOOL_CALL_CHUNK"
	StepStarted             EventType = "STEP_STARTED"
	StepFinished            EventType = "STEP_FINISHED"
	ReasoningStart          EventType = "REASONING_START"
	ReasoningMessageStart   EventType = "REASONING_MESSAGE_START"
	ReasoningMessageContent EventType = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     EventType = "REASONING_MESSAGE_END"
	ReasoningMessageChunk   EventType = "REASONING_MESSAGE_CHUNK"
	ReasoningEnd            EventType = "REASONING_END"
	ReasoningEncryptedValue EventType = "REASONING_ENCRYPTED_VALUE"
	MessagesSnapshot        EventType = "MESSAGES_SNAPSHOT"
	StateSnapshot           EventType = "STATE_SNAPSHOT"
	StateDelta              EventType = "STATE_DELTA"
	Custom                  EventType = "CUSTOM"
	Raw                     EventType = "RAW"
)

// Finish reasons an adapter reports on RUN_FINISHED.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishContentFilter = "content_filter"
	FinishToolCalls     = "tool_calls"
)

// Event is one AG-UI event, flattened: the fields of every event type plus
// the TanStack extras that adapters put at the top level of their chunks
// (model, finishReason, usage, content, args, toolName, index, input, ...).
// Which fields are meaningful depends on Type; unset fields are zero and are
// never written. Keys the model does not know are kept in Extra and survive a
// decode/encode round trip.
//
// An Event is a value: copy it to keep it, and build a new one to change what
// the engine yields.
type Event struct {
	Type      EventType
	Timestamp int64 // milliseconds since the epoch; 0 means absent

	ThreadID    string
	RunID       string
	ParentRunID string

	MessageID       string
	ParentMessageID string
	Role            string
	Name            string // TEXT_MESSAGE_* name, CUSTOM name
	Delta           string // text, reasoning and tool-argument deltas

	ToolCallID   string
	ToolCallName string

	// Content is TOOL_CALL_RESULT's content, or the adapter's cumulative text
	// on TEXT_MESSAGE_CONTENT, or STEP_FINISHED's reasoning content.
	Content string

	StepName string

	Message string // RUN_ERROR
	Code    string // RUN_ERROR

	Subtype        string // REASONING_ENCRYPTED_VALUE: "message" | "tool-call"
	EntityID       string
	EncryptedValue string

	Messages json.RawMessage // MESSAGES_SNAPSHOT
	Snapshot json.RawMessage // STATE_SNAPSHOT
	Patch    json.RawMessage // STATE_DELTA "delta" (a JSON Patch array)
	Value    json.RawMessage // CUSTOM
	Result   json.RawMessage // RUN_FINISHED result; TOOL_CALL_END result extra
	Input    json.RawMessage // RUN_STARTED input; TOOL_CALL_END parsed arguments
	Outcome  *Outcome        // RUN_FINISHED
	RawEvent json.RawMessage

	// Metadata is the event's metadata object. The engine moves TanStack
	// extras into Metadata["tanstack"] when it normalizes an event.
	Metadata map[string]any

	// TanStack extras (adapter chunks, before normalization).
	Model        string
	FinishReason string // "" is absent; a JSON null is kept in Extra
	Usage        *TokenUsage
	Args         string // cumulative tool arguments
	ToolName     string // in-process alias of ToolCallName
	Index        *int
	State        string // "output-error" on engine-made results
	StepID       string
	StepType     string
	Signature    string
	Error        *ErrorInfo

	// Extra holds keys this model does not name, as raw JSON.
	Extra map[string]json.RawMessage
}

// ErrorInfo is the `error` object adapters attach to RUN_ERROR.
type ErrorInfo struct {
	Message string `json:"message,omitempty"`
	Code    string `json:"code,omitempty"`
}

// Outcome is RUN_FINISHED's outcome.
type Outcome struct {
	Type       string      `json:"type"` // "success" | "interrupt"
	Interrupts []Interrupt `json:"interrupts,omitempty"`
}

// Interrupt is one pending item of an interrupt outcome.
type Interrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	ExpiresAt      string          `json:"expiresAt,omitempty"`
	Metadata       map[string]any  `json:"metadata,omitempty"`
}

// TokenUsage is TanStack's usage accounting as adapters report it.
type TokenUsage struct {
	PromptTokens            int64
	CompletionTokens        int64
	TotalTokens             int64
	PromptTokensDetails     *PromptTokensDetails
	CompletionTokensDetails *CompletionTokensDetails
	// Extra keeps every other key (billed, providerUsageDetails, cost,
	// costDetails, ...) as raw JSON.
	Extra map[string]json.RawMessage
}

// PromptTokensDetails breaks down prompt tokens.
type PromptTokensDetails struct {
	CachedTokens     *int64
	CacheWriteTokens *int64
	Extra            map[string]json.RawMessage
}

// CompletionTokensDetails breaks down completion tokens.
type CompletionTokensDetails struct {
	ReasoningTokens *int64
	Extra           map[string]json.RawMessage
}

// TanstackMeta returns Metadata["tanstack"] as a map, or nil.
func (e *Event) TanstackMeta() map[string]any {
	if e.Metadata == nil {
		return nil
	}
	m, _ := e.Metadata["tanstack"].(map[string]any)
	return m
}

// FinishReasonValue returns the finish reason whether it is top level (an
// adapter chunk) or under metadata.tanstack (a normalized event).
func (e *Event) FinishReasonValue() string {
	if e.FinishReason != "" {
		return e.FinishReason
	}
	if m := e.TanstackMeta(); m != nil {
		s, _ := m["finishReason"].(string)
		return s
	}
	return ""
}

// IsTerminal reports whether the event ends a run on the wire.
func (e *Event) IsTerminal() bool { return e.Type == RunFinished || e.Type == RunError }
