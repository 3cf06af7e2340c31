package harness

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/internal/emit"
)

// BridgePrefix is the prefix an agent puts before the names of the host
// tools it reaches through the tool bridge (the MCP server "tanstack").
// Decoders strip it so tool calls carry the application's own names.
const BridgePrefix = "mcp__tanstack__"

// Emitter turns what a decoder reads from an agent into the adapter chunks
// of one model turn: text and reasoning lifecycles, tool calls (observed,
// never executed by the engine), tool results, CUSTOM events, usage.
// Decoders call it; the adapter drains it after each line.
type Emitter struct {
	events []agui.Event

	blocks emit.Lifecycle // text and reasoning; set up on first use
	tools  map[string]*observedCall
	order  []string
	seq    int
	asks   []askedCommand // refused pending approval (AskApproval)

	// Usage accumulates across the agent's model calls; the decoder sets it.
	Usage *agui.TokenUsage
	// SessionID is the agent's own session id, once seen.
	SessionID string
	// Failure is set when the agent reported a failed run.
	Failure *Failure
}

// Failure is an agent's own report that its run failed.
type Failure struct {
	Code    string
	Message string
}

type observedCall struct {
	name    string
	args    strings.Builder
	ended   bool
	result  bool
	bridged bool
}

func (e *Emitter) emit(ev agui.Event) bool {
	ev.Timestamp = time.Now().UnixMilli()
	e.events = append(e.events, ev)
	return true
}

// lifecycle is the text and reasoning lifecycle, its thinking step
// wrapped around each reasoning block as the agents' turns are recorded.
func (e *Emitter) lifecycle() *emit.Lifecycle {
	if e.blocks.Emit == nil {
		e.blocks = emit.Lifecycle{Emit: e.emit, NewID: e.nextID, Step: emit.StepAround}
	}
	return &e.blocks
}

func (e *Emitter) take() []agui.Event {
	out := e.events
	e.events = nil
	return out
}

// Text appends a text delta to message id ("" continues the open message or
// starts one with a fresh id).
func (e *Emitter) Text(id, delta string) { e.lifecycle().Text(id, delta) }

// EndText closes the open text message, if any.
func (e *Emitter) EndText() { e.lifecycle().EndText() }

// Reasoning appends a reasoning delta to block id ("" continues or starts).
func (e *Emitter) Reasoning(id, delta string) { e.lifecycle().Reasoning(id, delta) }

// EndReasoning closes the open reasoning block, with the agent's signature
// when it has one.
func (e *Emitter) EndReasoning(signature string) { e.lifecycle().EndReasoning(signature) }

// ToolStart opens a tool call the agent made. A name with BridgePrefix is a
// host tool reached through the bridge: it is reported under its own name.
// Every call is marked providerExecuted (the agent ran it, the engine must
// not); the agent's own tools are also marked sandboxObserved, so they can be
// left out of what a later model request carries.
func (e *Emitter) ToolStart(id, name, parentMessageID string) {
	if id == "" || e.tools[id] != nil {
		return
	}
	e.lifecycle().Close()
	bridged := strings.HasPrefix(name, BridgePrefix)
	name = strings.TrimPrefix(name, BridgePrefix)
	if e.tools == nil {
		e.tools = map[string]*observedCall{}
	}
	e.tools[id] = &observedCall{name: name, bridged: bridged}
	e.order = append(e.order, id)
	meta := map[string]any{"providerExecuted": true}
	if !bridged {
		meta["sandboxObserved"] = true
	}
	idx := len(e.order) - 1
	e.emit(agui.Event{Type: agui.ToolCallStart, ToolCallID: id, ToolCallName: name, ParentMessageID: parentMessageID, Index: &idx, Metadata: meta})
}

// ToolArgs appends an argument delta to call id.
func (e *Emitter) ToolArgs(id, delta string) {
	c := e.tools[id]
	if c == nil || c.ended || delta == "" {
		return
	}
	c.args.WriteString(delta)
	e.emit(agui.Event{Type: agui.ToolCallArgs, ToolCallID: id, Delta: delta})
}

// ToolEnd closes call id. whole, when not nil, is the complete arguments
// object (some agents report it only at the end); it replaces what streamed.
func (e *Emitter) ToolEnd(id string, whole json.RawMessage) {
	c := e.tools[id]
	if c == nil || c.ended {
		return
	}
	if len(whole) > 0 && c.args.Len() == 0 {
		e.ToolArgs(id, string(whole))
	}
	c.ended = true
	input := json.RawMessage(c.args.String())
	if !json.Valid(input) {
		input = json.RawMessage("{}")
	}
	e.emit(agui.Event{Type: agui.ToolCallEnd, ToolCallID: id, ToolCallName: c.name, Input: input})
}

// ToolResult reports the outcome of call id. A result for a call never
// started (an agent that reports only outcomes) is dropped.
func (e *Emitter) ToolResult(id, content string, isError bool) {
	c := e.tools[id]
	if c == nil || c.result {
		return
	}
	if !c.ended {
		e.ToolEnd(id, nil)
	}
	c.result = true
	ev := agui.Event{Type: agui.ToolCallResult, ToolCallID: id, MessageID: "result-" + id, Role: "tool", Content: content}
	if isError {
		ev.Metadata = map[string]any{"tanstack": map[string]any{"state": "output-error"}}
	}
	e.emit(ev)
}

// Custom emits a CUSTOM event.
func (e *Emitter) Custom(name string, value any) {
	b, err := json.Marshal(value)
	if err != nil {
		b = []byte("null")
	}
	e.emit(agui.Event{Type: agui.Custom, Name: name, Value: b})
}

// AddUsage adds one model call's token counts to the run's usage.
func (e *Emitter) AddUsage(prompt, completion int64) {
	if prompt == 0 && completion == 0 {
		return
	}
	if e.Usage == nil {
		e.Usage = &agui.TokenUsage{}
	}
	e.Usage.PromptTokens += prompt
	e.Usage.CompletionTokens += completion
	e.Usage.TotalTokens = e.Usage.PromptTokens + e.Usage.CompletionTokens
}

// closeAll ends whatever is still open: text, reasoning, and tool calls the
// agent never reported an outcome for (an interrupted agent), which get an
// error result so no call is left without one.
func (e *Emitter) closeAll(reason string) {
	e.lifecycle().Close()
	for _, id := range e.order {
		if c := e.tools[id]; !c.result {
			e.ToolResult(id, reason, true)
		}
	}
}

// nextID numbers the ids the emitter makes up. They depend only on what the
// agent printed, so a journal read twice (a takeover) yields the same ids.
func (e *Emitter) nextID(prefix string) string {
	e.seq++
	return prefix + "-" + strconv.Itoa(e.seq)
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
