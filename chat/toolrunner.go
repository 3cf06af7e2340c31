package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"

	"github.com/goai-sdk/goai/agui"
)

// ToolRunner runs the run's own server tools for a caller outside the agent
// loop: a tool bridge serving them over MCP to a coding agent that a
// harness adapter drives. A call takes the engine's tool path (argument
// validation, OnBeforeToolCall and OnAfterToolCall, so the tool cache
// applies), and CUSTOM events the tool emits join the run's stream at its
// next chunk.
//
// Calls are accepted only while the adapter streams a model turn, from any
// goroutine. The engine processes adapter chunks and bridged calls' hooks
// one at a time, so middleware never sees them concurrently; the tool
// itself runs without holding up the stream.
type ToolRunner interface {
	RunTool(ctx context.Context, name string, args json.RawMessage) (any, error)
}

// ToolRunnerCapability is provided by the engine to every run; adapters
// find it through Request.Capabilities.
var ToolRunnerCapability = NewCapability[ToolRunner]("tool-runner")

// UnknownToolError is a bridged call to a tool the run does not have.
type UnknownToolError struct{ Name string }

func (e *UnknownToolError) Error() string { return "Unknown tool: " + e.Name }

// ErrNotStreaming is returned by RunTool outside a model turn.
var ErrNotStreaming = errors.New("chat: bridged tool calls are accepted only while the adapter streams a model turn")

// bridgeState guards run state between the run goroutine, which holds mu
// while it handles an adapter chunk, and bridged calls.
type bridgeState struct {
	mu   sync.Mutex
	open bool // the adapter is streaming; RunTool may touch the run
}

type toolRunner struct{ r *run }

// bridgeable wraps an adapter's stream: the run goroutine holds the bridge
// lock only while handling a chunk, so bridged calls interleave with the
// adapter's waits, never with chunk handling.
func (r *run) bridgeable(seq iter.Seq2[agui.Event, error]) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		r.bridge.mu.Lock()
		r.bridge.open = true
		r.bridge.mu.Unlock()
		defer func() {
			r.bridge.mu.Lock()
			r.bridge.open = false
			r.bridge.mu.Unlock()
		}()
		for ev, err := range seq {
			more := func() bool {
				r.bridge.mu.Lock()
				defer r.bridge.mu.Unlock()
				return yield(ev, err)
			}()
			if !more {
				return
			}
		}
	}
}

func (t toolRunner) RunTool(ctx context.Context, name string, args json.RawMessage) (any, error) {
	r := t.r
	r.bridge.mu.Lock()
	tool, tc, input, res, proceed, err := t.before(name, args)
	r.bridge.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !proceed {
		return toolOutcome(res)
	}
	v, runErr, dur := t.execute(ctx, tool, tc, input)
	r.bridge.mu.Lock()
	defer r.bridge.mu.Unlock()
	if !r.bridge.open {
		// The turn ended while the tool ran; the hooks' run state is gone.
		if runErr != nil {
			return nil, runErr
		}
		return v, nil
	}
	info := AfterToolCallInfo{ToolCall: tc, Tool: tool, ToolName: name, ToolCallID: tc.ID, OK: runErr == nil, Duration: dur, Err: runErr, Result: v}
	if err := r.afterToolCall(info); err != nil {
		return nil, err
	}
	if runErr != nil {
		return nil, runErr
	}
	return v, nil
}

// before resolves the tool and runs OnBeforeToolCall; the caller holds the
// bridge lock.
func (t toolRunner) before(name string, args json.RawMessage) (*Tool, agui.ToolCall, json.RawMessage, ToolResult, bool, error) {
	r := t.r
	var tc agui.ToolCall
	if !r.bridge.open || r.cancelled() {
		return nil, tc, nil, ToolResult{}, false, ErrNotStreaming
	}
	var tool *Tool
	for _, x := range r.tools {
		if x.Name == name {
			tool = x
			break
		}
	}
	if tool == nil || (r.lazy != nil && r.lazy.undiscovered(name)) {
		return nil, tc, nil, ToolResult{}, false, &UnknownToolError{Name: name}
	}
	argsText := strings.TrimSpace(string(args))
	if argsText == "" {
		argsText = "{}"
	}
	input, ok := parseArgs(argsText)
	if !ok {
		return nil, tc, nil, ToolResult{}, false, fmt.Errorf("Failed to parse tool arguments as JSON: %s", argsText)
	}
	if err := tool.validate(input); err != nil {
		return nil, tc, nil, ToolResult{}, false, fmt.Errorf("Input validation failed for tool %s: %v", name, err)
	}
	if tool.Execute == nil {
		return nil, tc, nil, ToolResult{}, false, fmt.Errorf("%s is a client tool: only the chat client can run it", name)
	}
	tc = agui.ToolCall{ID: newID("bridge"), Type: "function", Function: agui.FunctionCall{Name: name, Arguments: string(input)}}
	if tool.approvalNeeded(string(input)) {
		// A bridged call cannot pause the run for a decision; only one
		// already recorded lets it through.
		d, decided := r.approval(tc.ID)
		if !decided || !d.approved {
			return nil, tc, nil, ToolResult{}, false, fmt.Errorf("tool %s needs approval, which a bridged call cannot ask for", name)
		}
	}
	r.log.Log(CatTools, "bridged call name="+name)
	res, proceed, newInput, err := r.beforeToolCall(tc, tool, input)
	if err != nil {
		return nil, tc, nil, ToolResult{}, false, err
	}
	return tool, tc, newInput, res, proceed, nil
}

// execute runs the tool with the run's tool-call context; its CUSTOM events
// are queued for the run goroutine.
func (t toolRunner) execute(ctx context.Context, tool *Tool, tc agui.ToolCall, input json.RawMessage) (v any, err error, dur time.Duration) {
	r := t.r
	call := &ToolCall{ID: tc.ID, UserContext: r.opts.UserContext, Run: r.mctx}
	call.emit = func(name string, value map[string]any) {
		m := make(map[string]any, len(value)+1)
		for k, x := range value {
			m[k] = x
		}
		m["toolCallId"] = tc.ID
		raw, _ := marshalCompact(m)
		r.enqueue(agui.Event{Type: agui.Custom, Name: name, Value: raw, Timestamp: now()})
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	// The call also ends with the run.
	defer context.AfterFunc(r.runCtx, stop)()
	ctx = context.WithValue(ctx, toolCallKey{}, call)
	start := time.Now()
	defer func() {
		dur = time.Since(start)
		if p := recover(); p != nil {
			v, err = nil, fmt.Errorf("tool %s panicked: %v", tool.Name, p)
		}
	}()
	v, err = tool.Execute(ctx, input)
	if raw, ok := v.(json.RawMessage); ok {
		v = decodeResult(raw)
	}
	return v, err, 0
}

// toolOutcome turns a result OnBeforeToolCall chose (a cache hit, a skip)
// into the bridged call's answer.
func toolOutcome(res ToolResult) (any, error) {
	if res.State == "output-error" {
		if m, ok := res.Result.(map[string]any); ok {
			if msg, ok := m["error"].(string); ok {
				return nil, errors.New(msg)
			}
		}
	}
	return res.Result, nil
}
