package main

import (
	"encoding/json"
	"fmt"
)

type obj = map[string]any

// scenarioSpec shapes the paced model both servers run.
type scenarioSpec struct {
	Tokens    int // text deltas per answer, "w0 " .. "w<Tokens-1> "
	DelayMs   int // pause before each delta
	ToolEvery int // every ToolEvery-th model turn is a tool call (0: never)
	HoldMs    int // pause after the first delta (idle streams for memory figures)
}

// scenario returns the scripted scenario: a cycle of ToolEvery-1 text turns
// and one tool-call turn (the engine runs the tool and calls the model again,
// which answers with the next turn of the cycle), every chunk stamped with the
// time the model yields it. A text turn is one message "m" of Tokens numbered
// deltas, so a client can tell which token is missing, repeated or late.
func scenario(s scenarioSpec) ([]byte, error) {
	if s.Tokens < 1 || s.DelayMs < 0 || s.ToolEvery < 0 || s.HoldMs < 0 {
		return nil, fmt.Errorf("bad scenario %+v", s)
	}
	const model = "scripted-1"
	text := []any{
		obj{"type": "RUN_STARTED", "runId": "run-bench", "threadId": "thread-bench", "model": model},
		obj{"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "model": model},
	}
	for j := 0; j < s.Tokens; j++ {
		if s.DelayMs > 0 {
			text = append(text, obj{"delayMs": s.DelayMs})
		}
		text = append(text, obj{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": fmt.Sprintf("w%d ", j), "model": model})
		if j == 0 && s.HoldMs > 0 {
			text = append(text, obj{"delayMs": s.HoldMs})
		}
	}
	text = append(text,
		obj{"type": "TEXT_MESSAGE_END", "messageId": "m", "model": model},
		obj{"type": "RUN_FINISHED", "runId": "run-bench", "threadId": "thread-bench", "model": model, "finishReason": "stop",
			"usage": obj{"promptTokens": 12, "completionTokens": s.Tokens, "totalTokens": s.Tokens + 12}})
	tool := []any{
		obj{"type": "RUN_STARTED", "runId": "run-bench", "threadId": "thread-bench", "model": model},
		obj{"type": "TOOL_CALL_START", "toolCallId": "call_add", "toolCallName": "add", "index": 0, "model": model},
	}
	if s.DelayMs > 0 {
		tool = append(tool, obj{"delayMs": s.DelayMs})
	}
	tool = append(tool,
		obj{"type": "TOOL_CALL_ARGS", "toolCallId": "call_add", "delta": `{"a":2,"b":3}`, "model": model},
		obj{"type": "TOOL_CALL_END", "toolCallId": "call_add", "toolCallName": "add", "input": obj{"a": 2, "b": 3}, "model": model},
		obj{"type": "RUN_FINISHED", "runId": "run-bench", "threadId": "thread-bench", "model": model, "finishReason": "tool_calls",
			"usage": obj{"promptTokens": 12, "completionTokens": 8, "totalTokens": 20}})
	var turns []any
	if s.ToolEvery <= 1 {
		turns = []any{text}
		if s.ToolEvery == 1 {
			return nil, fmt.Errorf("tool-every 1 would never answer: use 0 (never) or at least 2")
		}
	} else {
		for i := 0; i < s.ToolEvery-1; i++ {
			turns = append(turns, text)
		}
		turns = append(turns, tool)
	}
	return json.Marshal(obj{
		"name":     fmt.Sprintf("load-%dtok-%dms-tool%d", s.Tokens, s.DelayMs, s.ToolEvery),
		"threadId": "thread-bench", "runId": "run-bench",
		"messages": []any{obj{"role": "user", "content": "hi"}},
		"tools":    []string{"add"}, "middleware": []string{},
		// Tool turns can follow each other under concurrency (turns go out
		// in arrival order across requests); leave room before the limit.
		"maxIterations": 50,
		"cycle":         true,
		"stampYield":    true,
		"turns":         turns,
	})
}
