// Package emit holds the text and reasoning lifecycle of one model turn,
// shared by the provider adapters (provider/internal/wire) and the
// coding-agent harness (harness): at most one text message or reasoning
// block is open, opening one closes the other, and each is closed with its
// end events, so every turn follows the adapter grammar of docs/engine.md §1.
package emit

import "github.com/goai-sdk/goai/agui"

// StepPlacement says where a reasoning block's thinking step goes.
type StepPlacement uint8

// Placements.
const (
	// StepAfterEnd: the step opens inside the reasoning message and its
	// closing STEP_FINISHED (content and signature) follows REASONING_END
	// (OpenAI).
	StepAfterEnd StepPlacement = iota
	// StepBeforeEnd: the closing STEP_FINISHED comes before
	// REASONING_MESSAGE_END (Anthropic).
	StepBeforeEnd
	// StepIfSigned: the closing STEP_FINISHED follows REASONING_END, and
	// only when the block is signed (Gemini).
	StepIfSigned
	// StepAround: the step shares the block's id and wraps it, STEP_STARTED
	// before REASONING_START and STEP_FINISHED after REASONING_END, both
	// typed "thinking" (the harness's agents).
	StepAround
)

// Lifecycle tracks the open text message and reasoning block of one turn
// and emits their start and end events. Its methods return false once
// Emit has (the consumer stopped); a call with nothing to do returns true.
type Lifecycle struct {
	// Emit sends one event; false means the consumer stopped.
	Emit func(agui.Event) bool
	// NewID mints the id of a message, block or step opened without one.
	NewID func(prefix string) string
	// Step places the thinking step of a reasoning block.
	Step StepPlacement
	// StepDeltas adds, after each reasoning delta, a STEP_FINISHED carrying
	// the delta and the content so far (what the reference's Anthropic and
	// Gemini adapters send).
	StepDeltas bool

	textOpen   bool
	textID     string
	lastTextID string
	reasonOpen bool
	reasonID   string
	stepID     string
	reasonText []byte
}

// TextOpen reports whether a text message is open.
func (l *Lifecycle) TextOpen() bool { return l.textOpen }

// LastTextID is the id of the most recent text message, open or not ("" if
// none was opened).
func (l *Lifecycle) LastTextID() string { return l.lastTextID }

// ReasoningOpen reports whether a reasoning block is open.
func (l *Lifecycle) ReasoningOpen() bool { return l.reasonOpen }

// Text appends a text delta to message id: "" continues the open message
// or opens one with a fresh id; another id closes the open message first.
// An open reasoning block is closed.
func (l *Lifecycle) Text(id, delta string) bool {
	if delta == "" {
		return true
	}
	if !l.EndReasoning("") {
		return false
	}
	if l.textOpen && id != "" && id != l.textID && !l.EndText() {
		return false
	}
	if !l.textOpen {
		if id == "" {
			id = l.NewID("msg")
		}
		l.textOpen, l.textID, l.lastTextID = true, id, id
		if !l.Emit(agui.Event{Type: agui.TextMessageStart, MessageID: id, Role: agui.RoleAssistant}) {
			return false
		}
	}
	return l.Emit(agui.Event{Type: agui.TextMessageContent, MessageID: l.textID, Delta: delta})
}

// EndText closes the open text message, if any.
func (l *Lifecycle) EndText() bool {
	if !l.textOpen {
		return true
	}
	l.textOpen = false
	return l.Emit(agui.Event{Type: agui.TextMessageEnd, MessageID: l.textID})
}

// Reasoning appends a reasoning delta to block id: "" continues the open
// block or opens one with a fresh id; another id closes the open block
// first. An open text message is closed.
func (l *Lifecycle) Reasoning(id, delta string) bool {
	if delta == "" {
		return true
	}
	if !l.EndText() {
		return false
	}
	if l.reasonOpen && id != "" && id != l.reasonID && !l.EndReasoning("") {
		return false
	}
	if !l.reasonOpen && !l.openReasoning(id) {
		return false
	}
	l.reasonText = append(l.reasonText, delta...)
	if !l.Emit(agui.Event{Type: agui.ReasoningMessageContent, MessageID: l.reasonID, Delta: delta}) {
		return false
	}
	if l.StepDeltas {
		return l.Emit(agui.Event{Type: agui.StepFinished, StepName: l.stepID, StepID: l.stepID, Delta: delta, Content: string(l.reasonText)})
	}
	return true
}

func (l *Lifecycle) openReasoning(id string) bool {
	if id == "" {
		id = l.NewID("reasoning")
	}
	l.reasonOpen, l.reasonID, l.reasonText = true, id, l.reasonText[:0]
	if l.Step == StepAround {
		l.stepID = id
		return l.startStep() &&
			l.Emit(agui.Event{Type: agui.ReasoningStart, MessageID: id}) &&
			l.Emit(agui.Event{Type: agui.ReasoningMessageStart, MessageID: id, Role: agui.RoleReasoning})
	}
	// The step has its own id and opens inside the message.
	l.stepID = l.NewID("step")
	return l.Emit(agui.Event{Type: agui.ReasoningStart, MessageID: id}) &&
		l.Emit(agui.Event{Type: agui.ReasoningMessageStart, MessageID: id, Role: agui.RoleReasoning}) &&
		l.startStep()
}

func (l *Lifecycle) startStep() bool {
	return l.Emit(agui.Event{Type: agui.StepStarted, StepName: l.stepID, StepID: l.stepID, StepType: "thinking"})
}

// EndReasoning closes the open reasoning block, if any, with its signature
// (the engine carries it back as thinking[].signature).
func (l *Lifecycle) EndReasoning(signature string) bool {
	if !l.reasonOpen {
		return true
	}
	l.reasonOpen = false
	id := l.reasonID
	step := agui.Event{Type: agui.StepFinished, StepName: l.stepID, StepID: l.stepID, Signature: signature, Content: string(l.reasonText)}
	if l.Step == StepAround {
		step.StepType = "thinking"
	}
	if l.Step == StepBeforeEnd && !l.Emit(step) {
		return false
	}
	if !l.Emit(agui.Event{Type: agui.ReasoningMessageEnd, MessageID: id}) ||
		!l.Emit(agui.Event{Type: agui.ReasoningEnd, MessageID: id}) {
		return false
	}
	if l.Step == StepAfterEnd || l.Step == StepAround || (l.Step == StepIfSigned && signature != "") {
		return l.Emit(step)
	}
	return true
}

// Close ends whatever is open.
func (l *Lifecycle) Close() bool { return l.EndReasoning("") && l.EndText() }
