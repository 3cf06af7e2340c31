package chat

import (
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"time"

	"github.com/goai-sdk/goai/agui"
)

// turnState is what the engine gathers from the model turn in progress; it
// is reset at the start of every iteration.
type turnState struct {
	currentMessageID   string
	currentCreatedAt   time.Time
	identityCaptured   bool
	accumulated        []byte              // the turn's text so far
	textStart          int                 // agui profile: where the current text message starts in accumulated
	turnTexts          []agui.ModelMessage // agui profile: the turn's earlier text messages
	thinking           []agui.Thinking
	thinkingContent    string
	thinkingSignature  string
	finished           *agui.Event // raw RUN_FINISHED of the turn
	calls              toolCallAccumulator
	streamedToolErrors map[string]ToolResult
	streamedErrorOrder []string
}

// reset starts a new turn whose message id is, until the model names one, id.
// The tool calls are reset after the tool phase (toolCallAccumulator.reset).
func (t *turnState) reset(id string) {
	t.currentMessageID = id
	t.currentCreatedAt = time.Now()
	t.identityCaptured = false
	t.accumulated = t.accumulated[:0]
	t.textStart, t.turnTexts = 0, nil
	t.thinking = nil
	t.thinkingContent, t.thinkingSignature = "", ""
	t.finished = nil
	clear(t.streamedToolErrors)
	t.streamedErrorOrder = t.streamedErrorOrder[:0]
}

// streamModelTurn runs one adapter call (docs/engine.md §3).
//
// The run waits on its model with this function's frame on its stack: the
// request is built in modelStream's.
func (r *run) streamModelTurn() error {
	for raw, err := range r.modelStream() {
		if err != nil {
			if r.cancelled() {
				return nil
			}
			return err
		}
		if r.cancelled() {
			break
		}
		// This loop's body is on the stack of every chunk's delivery: the
		// rare paths that hold more events by value (logging, combined
		// structured output) run in frames of their own.
		if r.log.Enabled(CatProvider) {
			r.logChunk(&raw)
		}
		r.handleRaw(&raw)
		// The chunk travels through the hooks by pointer; a run-owned slot
		// keeps that from costing a heap copy per chunk.
		r.chunk = raw
		if r.so != nil && r.so.combined {
			if err := r.combinedChunk(&raw); err != nil {
				return err
			}
		}
		if err := r.chunkChain(&r.chunk, 0, true); err != nil {
			return err
		}
		if raw.Type == agui.RunFinished && raw.Usage != nil {
			if err := r.runOnUsage(*raw.Usage); err != nil {
				return err
			}
		}
		if err := r.drainQueue(); err != nil {
			return err
		}
		if r.ending() {
			break
		}
	}
	return r.drainQueue()
}

// modelStream calls the adapter for the turn's request (through the
// engine's guards).
func (r *run) modelStream() iter.Seq2[agui.Event, error] {
	r.mctx.Phase = PhaseModelStream
	req := r.buildRequest()
	if r.log.Enabled(CatRequest) {
		r.log.Log(CatRequest, fmt.Sprintf("activity=chat provider=%s model=%s messages=%d tools=%d stream=true",
			r.mctx.Provider, r.mctx.Model, len(r.messages), len(r.tools)))
	}
	return r.bridgeable(r.guardStream(r.adapterLabel(), func() iter.Seq2[agui.Event, error] { return r.opts.Adapter.ChatStream(r.runCtx, req) }))
}

func (r *run) logChunk(raw *agui.Event) {
	r.log.Log(CatProvider, "chunk", slog.Any("chunk", *raw))
}

// combinedChunk sets the run's chunk to what the combined structured
// output makes of raw. Not inlined: the event it returns by value would
// add to the frame of streamModelTurn's loop body.
//
//go:noinline
func (r *run) combinedChunk(raw *agui.Event) error {
	c, err := r.structuredModelChunk(raw)
	if err != nil {
		return err
	}
	r.chunk = c
	return nil
}

func (r *run) buildRequest() *Request {
	specs := make([]ToolSpec, len(r.tools))
	for i, t := range r.tools {
		specs[i] = ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Metadata: t.Metadata}
	}
	approvals := make(map[string]bool, len(r.approvals))
	for id, d := range r.approvals {
		approvals[id] = d.approved
	}
	return &Request{
		Model:         r.mctx.Model,
		Messages:      r.messages,
		Tools:         specs,
		Metadata:      r.metadata,
		ModelOptions:  r.modelOptions,
		SystemPrompts: r.systemPrompts,
		Logger:        r.log,
		ThreadID:      r.threadID,
		RunID:         r.opts.RunID,
		ParentRunID:   r.opts.ParentRunID,
		Capabilities:  r.mctx,
		Approvals:     approvals,
		OutputSchema:  r.combinedSchema(),
		Attach:        r.opts.Attach && r.iterationCount == 0,
	}
}

func (r *run) combinedSchema() json.RawMessage {
	if r.so != nil && r.so.combined {
		return r.so.schema
	}
	return nil
}

// handleRaw updates engine state from the raw adapter chunk, before any
// middleware sees it, so rewriting middleware cannot change history.
func (r *run) handleRaw(c *agui.Event) {
	switch c.Type {
	case agui.TextMessageStart:
		if c.MessageID != "" {
			r.startTextMessage(c.MessageID)
			r.captureIdentity(c.MessageID)
		}
	case agui.TextMessageContent:
		if c.Content != "" {
			// Content is cumulative for the current text message.
			r.accumulated = append(r.accumulated[:r.textStart], c.Content...)
		} else {
			r.accumulated = append(r.accumulated, c.Delta...)
		}
	case agui.ToolCallStart:
		if c.ParentMessageID != "" {
			r.captureIdentity(c.ParentMessageID)
		}
		r.calls.start(c)
	case agui.ToolCallArgs:
		r.calls.args(c)
	case agui.ToolCallEnd:
		r.endToolCall(c)
	case agui.ToolCallResult:
		if ts := c.TanstackMeta(); ts != nil && ts["state"] == "output-error" {
			r.recordStreamedError(c.ToolCallID, c.Content)
		}
	case agui.RunFinished:
		r.noteFinished(c)
	case agui.RunError:
		r.fail(modelRunError(c))
	case agui.StepStarted:
		r.finalizeThinking()
	case agui.StepFinished:
		if c.Signature != "" {
			r.thinkingSignature = c.Signature
		}
	case agui.ReasoningMessageContent:
		r.thinkingContent += c.Delta
	case agui.ReasoningEncryptedValue:
		if c.Subtype == "tool-call" {
			r.setThoughtSignature(c.EntityID, c.EncryptedValue)
			return
		}
		r.thinkingSignature = c.EncryptedValue
	}
}

// endToolCall completes a streamed call; one the adapter reports failed
// (it ran where the adapter runs it) is answered with that outcome.
func (r *run) endToolCall(c *agui.Event) {
	r.calls.end(c)
	state := c.State
	if state == "" {
		if ts := c.TanstackMeta(); ts != nil {
			state, _ = ts["state"].(string)
		}
	}
	if state == "output-error" && c.Result != nil {
		r.recordStreamedError(c.ToolCallID, resultContentString(c.Result))
	}
}

// noteFinished keeps the turn's RUN_FINISHED and its finish reason; an
// explicit null reason clears it.
func (r *run) noteFinished(c *agui.Event) {
	cp := *c
	r.finished = &cp
	switch fr := c.FinishReason; fr {
	case agui.FinishStop, agui.FinishLength, agui.FinishContentFilter, agui.FinishToolCalls:
		r.lastFinishReason = fr
	default:
		if _, isNull := c.Extra["finishReason"]; isNull {
			r.lastFinishReason = ""
		} else {
			r.lastFinishReason = c.FinishReasonValue()
		}
	}
}

// modelRunError is the error a run ends with when its model turn failed.
func modelRunError(c *agui.Event) *RunError {
	msg, code := c.Message, c.Code
	if c.Error != nil {
		if msg == "" {
			msg = c.Error.Message
		}
		if code == "" {
			code = c.Error.Code
		}
	}
	if msg == "" {
		msg = "Run failed"
	}
	return &RunError{Message: msg, Code: code}
}

func (r *run) recordStreamedError(id, content string) {
	call, ok := r.calls.byID(id)
	if !ok {
		return
	}
	if _, seen := r.streamedToolErrors[id]; !seen {
		r.streamedErrorOrder = append(r.streamedErrorOrder, id)
	}
	r.streamedToolErrors[id] = ToolResult{ToolCallID: id, ToolName: call.Function.Name, Result: content, State: "output-error"}
}

func (r *run) setThoughtSignature(callID, sig string) {
	for i := range r.messages {
		for j := range r.messages[i].ToolCalls {
			tc := &r.messages[i].ToolCalls[j]
			if tc.ID == callID {
				md := make(map[string]any, len(tc.Metadata)+1)
				for k, v := range tc.Metadata {
					md[k] = v
				}
				md["thoughtSignature"] = sig
				tc.Metadata = md
				return
			}
		}
	}
}

func (r *run) captureIdentity(id string) {
	r.currentMessageID = id
	r.mctx.CurrentMessageID = id
	if !r.identityCaptured {
		r.currentCreatedAt = time.Now()
		r.identityCaptured = true
	}
}

func (r *run) finalizeThinking() {
	if r.thinkingContent != "" || r.thinkingSignature != "" {
		r.thinking = append(r.thinking, agui.Thinking{Content: r.thinkingContent, Signature: r.thinkingSignature})
		r.thinkingContent, r.thinkingSignature = "", ""
	}
}

// startTextMessage notes a TEXT_MESSAGE_START. In the agui profile a new
// message id closes the turn's current text message, which then becomes an
// assistant message of its own: the client showed it as one, and a
// MESSAGES_SNAPSHOT must not take it away. 0.58.0 runs every text of a
// turn into the last message.
func (r *run) startTextMessage(id string) {
	if r.tanstack || id == r.currentMessageID || len(r.accumulated) == r.textStart {
		return
	}
	r.turnTexts = append(r.turnTexts, agui.ModelMessage{Role: agui.RoleAssistant, ID: r.currentMessageID,
		Content: agui.Text(string(r.accumulated[r.textStart:])), CreatedAt: r.currentCreatedAt.UTC().Format(time.RFC3339Nano)})
	r.textStart = len(r.accumulated)
	r.identityCaptured = false // the next message gets its own creation time
}
