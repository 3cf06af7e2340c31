package wire

import (
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/internal/emit"
)

// Emitter turns provider stream facts into adapter chunks that follow the
// adapter grammar: RUN_STARTED (Text | Tool | Reasoning)* (RUN_FINISHED |
// RUN_ERROR), text and reasoning closed before anything else starts, tool
// calls possibly interleaved, finishReason "tool_calls" only when a call
// completed.
type Emitter struct {
	yield    func(agui.Event, error) bool
	stopped  bool
	done     bool
	ThreadID string
	RunID    string
	// Model is reported on every event but content and argument deltas
	// (metadata.tanstack.model once normalized). A parser replaces the
	// configured name with the one the provider answers with
	// ("gpt-4o-mini-2024-07-18") before the first event goes out.
	Model string
	// MessageID is the turn's message id (provider's when it has one); text
	// and tool calls use it unless a more specific id is given.
	MessageID string
	// Now stamps events; nil means time.Now. Tests pin it.
	Now func() int64
	// Secret is redacted from error messages (the API key).
	Secret string
	// StepDeltas adds, after each reasoning delta, a STEP_FINISHED carrying
	// the delta and the content so far (what the reference's Anthropic and
	// Gemini adapters send).
	StepDeltas bool
	// FinalStep places the closing thinking STEP_FINISHED (the one with
	// the content and the signature) as the provider's reference adapter
	// does.
	FinalStep StepPlacement
	// ErrorWithoutRun leaves threadId and runId off RUN_ERROR, as the
	// reference's Responses, Anthropic and Gemini adapters do.
	ErrorWithoutRun bool

	logger *chat.Logger

	// startPending: RUN_STARTED waits for the first payload (or a failure)
	// so it can carry the provider's model name.
	startPending bool
	// modelPending: the provider's model name is still to be learned.
	modelPending bool

	blocks    emit.Lifecycle // text and reasoning
	tools     []toolState
	toolEnded bool
}

type toolState struct {
	id    string
	name  string
	args  []byte
	ended bool
}

// StepPlacement says where the closing thinking STEP_FINISHED goes.
type StepPlacement = emit.StepPlacement

// Placements.
const (
	StepAfterEnd  = emit.StepAfterEnd  // after REASONING_END (OpenAI)
	StepBeforeEnd = emit.StepBeforeEnd // before REASONING_MESSAGE_END (Anthropic)
	StepIfSigned  = emit.StepIfSigned  // only when signed, after REASONING_END (Gemini)
)

// NewEmitter starts an emitter for one turn of req.
func NewEmitter(yield func(agui.Event, error) bool, req *chat.Request, model string) *Emitter {
	e := &Emitter{yield: yield, Model: model}
	// NewID is looked up at each call: tests replace it.
	e.blocks = emit.Lifecycle{Emit: e.emit, NewID: func(prefix string) string { return NewID(prefix) }}
	if req != nil {
		e.ThreadID = req.ThreadID
		e.RunID = req.RunID
		e.logger = req.Logger
	}
	if e.RunID == "" {
		e.RunID = NewID("run")
	}
	return e
}

// NewID returns a fresh id with prefix. Tests may replace it with a
// deterministic source (wiretest.Deterministic).
var NewID = newID

func newID(prefix string) string {
	const alpha = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [10]byte
	for i := range b {
		b[i] = alpha[rand.IntN(len(alpha))]
	}
	return prefix + "_" + strconv.FormatInt(time.Now().UnixMilli(), 36) + string(b[:])
}

// Stopped reports whether the consumer stopped iterating or the turn ended.
func (e *Emitter) Stopped() bool { return e.stopped || e.done }

// Done reports whether a terminal event was emitted.
func (e *Emitter) Done() bool { return e.done }

// ToolEnded reports whether some tool call completed.
func (e *Emitter) ToolEnded() bool { return e.toolEnded }

func (e *Emitter) ts() int64 {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now().UnixMilli()
}

func (e *Emitter) emit(ev agui.Event) bool {
	if e.stopped || e.done {
		return false
	}
	if e.startPending {
		e.startPending = false
		if !e.emit(agui.Event{Type: agui.RunStarted, ThreadID: e.ThreadID, RunID: e.RunID, Model: e.Model}) {
			return false
		}
	}
	switch ev.Type {
	case agui.TextMessageContent, agui.ToolCallArgs:
	default:
		ev.Model = e.Model
	}
	ev.Timestamp = e.ts()
	if !e.yield(ev, nil) {
		e.stopped = true
		return false
	}
	return true
}

// Start emits RUN_STARTED.
//
// Not inlined: the event would be in the frame of the adapter's stream,
// which is on the stack of its run for as long as the response is read.
//
//go:noinline
func (e *Emitter) Start() bool {
	return e.emit(agui.Event{Type: agui.RunStarted, ThreadID: e.ThreadID, RunID: e.RunID})
}

// StartLater defers RUN_STARTED to just before the next event, so a parser
// can first learn the model name the provider reports (SetModel).
func (e *Emitter) StartLater() bool {
	e.startPending, e.modelPending = true, true
	return !e.Stopped()
}

// WantsModel reports whether SetModel would still take effect (parsers
// skip decoding the name otherwise).
func (e *Emitter) WantsModel() bool { return e.modelPending }

// SetModel records the model name the provider reports, for the events
// from now on; only the first name counts.
func (e *Emitter) SetModel(name string) {
	if name != "" && e.modelPending {
		e.Model, e.modelPending = name, false
	}
}

// lifecycle is the text and reasoning lifecycle with the step options
// the parser set.
func (e *Emitter) lifecycle() *emit.Lifecycle {
	e.blocks.Step, e.blocks.StepDeltas = e.FinalStep, e.StepDeltas
	return &e.blocks
}

// alive is a call's result: false once the consumer stopped or the turn
// ended.
func (e *Emitter) alive(ok bool) bool { return ok && !e.Stopped() }

// Text appends a text delta to message id ("" = the current or the turn's).
func (e *Emitter) Text(id, delta string) bool {
	l := e.lifecycle()
	if id == "" && !l.TextOpen() {
		id = e.MessageID
	}
	return e.alive(l.Text(id, delta))
}

// EndText closes the open text message, if any.
func (e *Emitter) EndText() bool { return e.alive(e.lifecycle().EndText()) }

// Reasoning appends a reasoning delta to block id ("" = generated).
func (e *Emitter) Reasoning(id, delta string) bool {
	return e.alive(e.lifecycle().Reasoning(id, delta))
}

// ReasoningOpen reports whether a reasoning block is open.
func (e *Emitter) ReasoningOpen() bool { return e.blocks.ReasoningOpen() }

// EndReasoning closes the open reasoning block with its signature (the
// engine carries it back as thinking[].signature). With no block open and
// a signature, it emits a content-less signed step (encrypted reasoning
// without a summary); id names it.
func (e *Emitter) EndReasoning(signature string) bool {
	return e.EndReasoningID("", signature)
}

// EndReasoningID is EndReasoning naming the block for the content-less case.
func (e *Emitter) EndReasoningID(id, signature string) bool {
	l := e.lifecycle()
	if l.ReasoningOpen() || signature == "" {
		return e.alive(l.EndReasoning(signature))
	}
	if !l.EndText() {
		return false
	}
	if id == "" {
		id = NewID("reasoning")
	}
	return e.emit(agui.Event{Type: agui.StepStarted, StepName: id, StepID: id, StepType: "thinking"}) &&
		e.emit(agui.Event{Type: agui.StepFinished, StepName: id, StepID: id, StepType: "thinking", Signature: signature})
}

func (e *Emitter) closeOpen() { e.lifecycle().Close() }

func (e *Emitter) tool(id string) *toolState {
	for i := range e.tools {
		if e.tools[i].id == id {
			return &e.tools[i]
		}
	}
	return nil
}

// HasTool reports whether a call with id was started.
func (e *Emitter) HasTool(id string) bool { return e.tool(id) != nil }

// ToolStart opens a tool call. meta (may be nil) becomes the event's
// metadata (metadata.thoughtSignature for Gemini).
func (e *Emitter) ToolStart(id, name string, index int, meta map[string]any) bool {
	if id == "" || e.tool(id) != nil {
		return !e.Stopped() // no id, or a repeated start: ignored
	}
	e.closeOpen()
	e.tools = append(e.tools, toolState{id: id, name: name})
	parent := e.blocks.LastTextID()
	if parent == "" {
		parent = e.MessageID
	}
	return e.emit(agui.Event{Type: agui.ToolCallStart, ToolCallID: id, ToolCallName: name, ToolName: name,
		ParentMessageID: parent, Index: agui.Int(index), Metadata: meta})
}

// ToolArgs appends an argument delta.
func (e *Emitter) ToolArgs(id, delta string) bool {
	t := e.tool(id)
	if delta == "" || t == nil || t.ended {
		return !e.Stopped()
	}
	t.args = append(t.args, delta...)
	return e.emit(agui.Event{Type: agui.ToolCallArgs, ToolCallID: id, Delta: delta})
}

// ToolEnd completes a call. The arguments are those streamed, unless
// whole is non-empty (a provider that repeats them at the end).
func (e *Emitter) ToolEnd(id, whole string) bool {
	t := e.tool(id)
	if t == nil || t.ended {
		return !e.Stopped()
	}
	t.ended = true
	e.toolEnded = true
	args := t.args
	if whole != "" {
		args = []byte(whole)
	}
	in := json.RawMessage("{}")
	if len(args) > 0 && json.Valid(args) {
		in = json.RawMessage(append([]byte(nil), args...))
	}
	return e.emit(agui.Event{Type: agui.ToolCallEnd, ToolCallID: id, ToolCallName: t.name, ToolName: t.name, Input: in})
}

// EndTools completes every open call in start order.
func (e *Emitter) EndTools() {
	for i := range e.tools {
		if !e.tools[i].ended {
			e.ToolEnd(e.tools[i].id, "")
		}
	}
}

// Finish closes whatever is open and emits RUN_FINISHED. A "tool_calls"
// reason without a completed call becomes "stop"; "stop" with a completed
// call becomes "tool_calls" (providers that say stop after tool calls).
func (e *Emitter) Finish(reason string, usage *agui.TokenUsage) bool {
	e.closeOpen()
	e.EndTools()
	switch {
	case reason == agui.FinishToolCalls && !e.toolEnded:
		reason = agui.FinishStop
	case reason == agui.FinishStop && e.toolEnded:
		reason = agui.FinishToolCalls
	case reason == "":
		reason = agui.FinishStop
		if e.toolEnded {
			reason = agui.FinishToolCalls
		}
	}
	ok := e.emit(agui.Event{Type: agui.RunFinished, ThreadID: e.ThreadID, RunID: e.RunID,
		FinishReason: reason, Usage: usage})
	e.done = true
	return ok
}

// Fail emits the turn's one RUN_ERROR.
func (e *Emitter) Fail(code, message string, usage *agui.TokenUsage) bool {
	if message == "" {
		message = "provider error"
	}
	message = Redact(message, e.Secret)
	if e.logger.Enabled(chat.CatErrors) {
		e.logger.Log(chat.CatErrors, "provider error", slog.String("model", e.Model), slog.String("code", code), slog.String("message", message))
	}
	ev := agui.Event{Type: agui.RunError, ThreadID: e.ThreadID, RunID: e.RunID,
		Message: message, Code: code, Error: &agui.ErrorInfo{Message: message, Code: code}, Usage: usage}
	if e.ErrorWithoutRun {
		ev.ThreadID, ev.RunID = "", ""
	}
	ok := e.emit(ev)
	e.done = true
	return ok
}

// FailErr reports a transport error from Do.
func (e *Emitter) FailErr(err error) bool {
	switch x := err.(type) {
	case *StatusError:
		return e.Fail(strconv.Itoa(x.Status), x.Message, nil)
	case *ConnError:
		return e.Fail("connection_error", x.Msg, nil)
	}
	return e.Fail("error", err.Error(), nil)
}

// Incomplete reports a stream that ended before its terminal event.
func (e *Emitter) Incomplete(err error) bool {
	msg := "provider stream ended before the response was complete"
	if err != nil {
		msg += ": " + scrubURL(err)
	}
	return e.Fail("incomplete_stream", msg, nil)
}

// ToolCount is the number of calls started so far.
func (e *Emitter) ToolCount() int { return len(e.tools) }

// Encrypted emits REASONING_ENCRYPTED_VALUE (subtype "message" or
// "tool-call"); the engine records a "message" one as the signature of the
// current thinking block.
func (e *Emitter) Encrypted(subtype, entity, value string) bool {
	if entity == "" {
		entity = e.MessageID
	}
	return e.emit(agui.Event{Type: agui.ReasoningEncryptedValue, Subtype: subtype, EntityID: entity, EncryptedValue: value})
}
