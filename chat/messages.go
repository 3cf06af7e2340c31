package chat

import (
	"encoding/json"
	"time"

	"github.com/goai-sdk/goai/agui"
)

func (r *run) addAssistantToolCallMessage(calls []agui.ToolCall) {
	r.finalizeThinking()
	r.flushTurnTexts()
	msg := agui.ModelMessage{Role: agui.RoleAssistant, ToolCalls: calls, ID: r.currentMessageID,
		CreatedAt: r.currentCreatedAt.UTC().Format(time.RFC3339Nano), Thinking: r.thinking}
	if text := r.turnText(); text != "" {
		msg.Content = agui.Text(text)
	}
	r.messages = append(r.messages, msg)
	r.mctx.Messages = r.messages
}

func (r *run) addTerminalAssistantMessage() {
	r.finalizeThinking()
	if so := r.structuredMessage(); so != nil {
		id := r.so.messageID
		if id == "" {
			id = r.currentMessageID
		}
		r.flushTurnTexts()
		if text := r.turnText(); id != r.currentMessageID && text != "" {
			r.messages = append(r.messages, agui.ModelMessage{Role: agui.RoleAssistant, ID: r.currentMessageID,
				Content: agui.Text(text), Thinking: r.thinking})
		}
		r.messages = append(r.messages, agui.ModelMessage{Role: agui.RoleAssistant, ID: id, Content: agui.Text(r.so.raw), StructuredOutput: so})
		r.mctx.Messages = r.messages
		return
	}
	for _, m := range r.messages {
		if m.Role == agui.RoleAssistant && m.ID == r.currentMessageID {
			return
		}
	}
	r.flushTurnTexts()
	text := r.turnText()
	if text == "" && len(r.thinking) == 0 {
		return
	}
	msg := agui.ModelMessage{Role: agui.RoleAssistant, ID: r.currentMessageID, Thinking: r.thinking,
		CreatedAt: r.currentCreatedAt.UTC().Format(time.RFC3339Nano)}
	if text != "" {
		msg.Content = agui.Text(text)
	}
	if msg.ID == "" {
		msg.ID = newID("msg")
	}
	r.messages = append(r.messages, msg)
	r.mctx.Messages = r.messages
}

// Conversation returns the conversation as the run left it: the input plus
// every assistant turn and tool result. It is meant for hooks (OnFinish).
func (c *Context) Conversation() []agui.ModelMessage { return c.run.messages }

func (r *run) recordToolCalls(calls []agui.ToolCall) {
	r.lastTurnToolCallCount = len(calls)
	for _, c := range calls {
		if !r.countedCalls[c.ID] {
			r.countedCalls[c.ID] = true
			r.toolCallCount++
		}
	}
}

// resultContentString renders a raw result the way TOOL_CALL_RESULT carries it.
func resultContentString(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// flushTurnTexts appends the turn's earlier text messages (agui profile).
func (r *run) flushTurnTexts() {
	r.messages = append(r.messages, r.turnTexts...)
	r.turnTexts = nil
}

// turnText is the text of the turn's last message (all of the turn's text
// in the tanstack profile).
func (r *run) turnText() string { return string(r.accumulated[r.textStart:]) }
