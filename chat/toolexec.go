package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/goai-sdk/goai/agui"
)

// execResult is what a batch of calls came to: results, and the calls
// waiting for an approval decision or for the client to run them.
type execResult struct {
	results       []ToolResult
	needsApproval []PendingApproval
	needsClient   []PendingClientCall
}

// pauses reports whether the run must pause for the client.
func (e *execResult) pauses() bool { return len(e.needsApproval) > 0 || len(e.needsClient) > 0 }

// executeToolCalls runs a batch strictly in order (docs/engine.md §8).
func (r *run) executeToolCalls(calls []agui.ToolCall) (execResult, error) {
	var out execResult
	r.collectClientResults()
	byName := r.executableTools()
	approvalPending := r.approvalPending(calls, byName)
	for _, tc := range calls {
		t := byName[tc.Function.Name]
		if t != nil && approvalPending && r.heldForApprovals(tc, t) {
			continue
		}
		stop, err := r.executeCall(&out, tc, t)
		if err != nil || stop {
			return out, err
		}
	}
	return out, nil
}

// executableTools indexes the tools a call may name.
func (r *run) executableTools() map[string]*Tool {
	byName := make(map[string]*Tool, len(r.tools)+1)
	for _, t := range r.tools {
		byName[t.Name] = t
	}
	if r.lazy != nil {
		// The discovery tool stays executable after everything was found.
		byName[DiscoveryToolName] = r.lazy.discovery
	}
	return byName
}

// approvalPending reports whether a call of the batch waits for an
// approval decision.
func (r *run) approvalPending(calls []agui.ToolCall, byName map[string]*Tool) bool {
	for _, tc := range calls {
		t := byName[tc.Function.Name]
		if t != nil && t.approvalNeeded(tc.Function.Arguments) && !r.hasApproval(tc.ID) && !r.cancelledIDs[tc.ID] {
			return true
		}
	}
	return false
}

// heldForApprovals reports whether a call waits, unanswered, while other
// calls of its batch wait for approval: only the calls awaiting a decision
// and plain client tools are taken up then.
func (r *run) heldForApprovals(tc agui.ToolCall, t *Tool) bool {
	needs := t.approvalNeeded(tc.Function.Arguments)
	awaitsDecision := needs && !r.hasApproval(tc.ID)
	plainClient := !needs && t.Execute == nil
	return !awaitsDecision && !plainClient
}

// executeCall takes one call as far as it can go now, recording in out an
// error result, a pending approval or client execution, or the tool's
// result. stop is true when a server tool ran and the run was cancelled
// meanwhile: the rest of the batch does not run.
func (r *run) executeCall(out *execResult, tc agui.ToolCall, t *Tool) (stop bool, err error) {
	input, failed := r.callInput(tc, t)
	if failed != nil {
		out.results = append(out.results, *failed)
		return false, nil
	}
	input, proceed := r.approvedInput(out, tc, t, input)
	if !proceed {
		return false, nil
	}
	if t.Execute == nil {
		if res, ok := r.clientResults[tc.ID]; ok {
			out.results = append(out.results, ToolResult{ToolCallID: tc.ID, ToolName: t.Name, Result: decodeResult(res), Input: input})
		} else {
			out.needsClient = append(out.needsClient, PendingClientCall{ToolCallID: tc.ID, ToolName: t.Name, Input: input})
		}
		return false, nil
	}
	res, proceed, input, err := r.beforeToolCall(tc, t, input)
	if err != nil {
		return false, err
	}
	if proceed {
		if res, err = r.runServerTool(tc, t, input); err != nil {
			return false, err
		}
	}
	out.results = append(out.results, res)
	return proceed && r.cancelled(), nil
}

// callInput is the call's arguments, checked; failed is the error result
// instead when the tool is unknown, the call was cancelled, or the
// arguments are not JSON or do not fit the tool's input schema.
func (r *run) callInput(tc agui.ToolCall, t *Tool) (input json.RawMessage, failed *ToolResult) {
	name := tc.Function.Name
	fail := func(input json.RawMessage, msg string) (json.RawMessage, *ToolResult) {
		res := errResult(tc.ID, name, input, msg)
		return nil, &res
	}
	if t == nil {
		return fail(nil, "Unknown tool: "+name)
	}
	if r.cancelledIDs[tc.ID] {
		return fail(nil, "Tool execution cancelled")
	}
	argsText := strings.TrimSpace(tc.Function.Arguments)
	if argsText == "" {
		argsText = "{}"
	}
	input, ok := parseArgs(argsText)
	if !ok {
		return fail(json.RawMessage("{}"), "Failed to parse tool arguments as JSON: "+argsText)
	}
	if err := t.validate(input); err != nil {
		return fail(input, fmt.Sprintf("Input validation failed for tool %s: %v", name, err))
	}
	return input, nil
}

// approvedInput applies the call's approval decision: the edited arguments
// when given; proceed is false when the call waits for a decision or was
// denied (out records which).
func (r *run) approvedInput(out *execResult, tc agui.ToolCall, t *Tool, input json.RawMessage) (_ json.RawMessage, proceed bool) {
	if !t.approvalNeeded(tc.Function.Arguments) {
		return input, true
	}
	d, decided := r.approval(tc.ID)
	switch {
	case !decided:
		out.needsApproval = append(out.needsApproval, PendingApproval{ToolCallID: tc.ID, ToolName: t.Name, Input: input, ApprovalID: "approval_" + tc.ID})
		return nil, false
	case !d.approved:
		out.results = append(out.results, r.denied(tc.ID, t.Name, input, d))
		return nil, false
	case d.editedArgs != nil:
		return d.editedArgs, true
	}
	return input, true
}

func parseArgs(s string) (json.RawMessage, bool) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, false
	}
	if _, isObj := v.(map[string]any); !isObj {
		if _, isArr := v.([]any); !isArr {
			return json.RawMessage("{}"), true
		}
	}
	return json.RawMessage(s), true
}

func (r *run) hasApproval(id string) bool {
	_, ok := r.approval(id)
	return ok
}

func (r *run) approval(id string) (approvalDecision, bool) {
	if d, ok := r.approvals[id]; ok {
		return d, true
	}
	d, ok := r.approvals["approval_"+id]
	return d, ok
}

func (r *run) denied(id, name string, input json.RawMessage, d approvalDecision) ToolResult {
	var result any = map[string]any{"error": "User declined tool execution"}
	if v, ok := r.deniedResults[id]; ok {
		result = v
	} else if d.payload != nil {
		result = decodeResult(d.payload)
	}
	return ToolResult{ToolCallID: id, ToolName: name, Result: result, State: "output-error", Input: input}
}

// collectClientResults reads client tool outputs from tool messages.
func (r *run) collectClientResults() {
	for _, m := range r.messages {
		if m.Role != agui.RoleTool || m.ToolCallID == "" || isPendingPlaceholder(m.Content) {
			continue
		}
		if m.Content.IsParts() {
			b, _ := json.Marshal(m.Content)
			r.clientResults[m.ToolCallID] = b
			continue
		}
		s := m.Content.String()
		if json.Valid([]byte(s)) {
			r.clientResults[m.ToolCallID] = json.RawMessage(s)
		} else {
			b, _ := json.Marshal(s)
			r.clientResults[m.ToolCallID] = b
		}
	}
}

// beforeToolCall asks OnBeforeToolCall (first non-zero decision wins).
func (r *run) beforeToolCall(tc agui.ToolCall, t *Tool, input json.RawMessage) (ToolResult, bool, json.RawMessage, error) {
	r.log.Log(CatTools, "phase=before name="+tc.Function.Name)
	hook := &ToolCallHook{ToolCall: tc, Tool: t, Args: input, ToolName: tc.Function.Name, ToolCallID: tc.ID}
	for _, m := range r.mws {
		if m.OnBeforeToolCall == nil {
			continue
		}
		var d ToolDecision
		if err := r.callHook(m, "onBeforeToolCall", func() error {
			var err error
			d, err = m.OnBeforeToolCall(r.mctx, hook)
			return err
		}); err != nil {
			return ToolResult{}, false, nil, err
		}
		switch d.kind {
		case decideContinue:
			continue
		case decideTransform:
			return ToolResult{}, true, d.args, nil
		case decideSkip:
			res := d.result
			if s, ok := res.(string); ok {
				var v any
				if json.Unmarshal([]byte(s), &v) == nil {
					res = v
				}
			}
			tr := ToolResult{ToolCallID: tc.ID, ToolName: tc.Function.Name, Result: res, Input: input}
			if err := r.afterToolCall(AfterToolCallInfo{ToolCall: tc, Tool: t, ToolName: tc.Function.Name, ToolCallID: tc.ID, OK: true, Result: d.result}); err != nil {
				return ToolResult{}, false, nil, err
			}
			return tr, false, nil, nil
		case decideAbort:
			reason := d.reason
			if reason == "" {
				reason = "Aborted by middleware"
			}
			r.abort(reason)
			return ToolResult{}, false, nil, &abortError{reason: reason}
		}
	}
	return ToolResult{}, true, input, nil
}

func (r *run) afterToolCall(info AfterToolCallInfo) error {
	r.log.Log(CatTools, "phase=after name="+info.ToolName)
	return r.eachHook("onAfterToolCall", func(m *Middleware) error {
		if m.OnAfterToolCall == nil {
			return nil
		}
		return m.OnAfterToolCall(r.mctx, info)
	})
}

// runServerTool executes one tool on its own goroutine so CUSTOM events it
// emits stream while it runs.
func (r *run) runServerTool(tc agui.ToolCall, t *Tool, input json.RawMessage) (ToolResult, error) {
	start := time.Now()
	o, err := r.awaitTool(r.toolContext(tc), t, input)
	if err != nil {
		return ToolResult{}, err
	}
	dur := time.Since(start)
	if o.panicked {
		return ToolResult{}, o.err // a panic is a bug, not a tool error: the run ends
	}
	if err := r.drainQueue(); err != nil {
		return ToolResult{}, err
	}
	res := ToolResult{ToolCallID: tc.ID, ToolName: t.Name, Duration: dur, Input: input}
	info := AfterToolCallInfo{ToolCall: tc, Tool: t, ToolName: t.Name, ToolCallID: tc.ID, Duration: dur}
	if o.err != nil {
		res.Result, res.State = map[string]any{"error": o.err.Error()}, "output-error"
		info.Err = o.err
	} else {
		res.Result = toolValue(o.v)
		info.OK, info.Result = true, res.Result
	}
	return res, r.afterToolCall(info)
}

// toolContext is the run's context carrying the ToolCall through which the
// tool streams CUSTOM events.
func (r *run) toolContext(tc agui.ToolCall) context.Context {
	call := &ToolCall{ID: tc.ID, UserContext: r.opts.UserContext, Run: r.mctx}
	call.emit = func(name string, value map[string]any) {
		v := make(map[string]any, len(value)+1)
		for k, x := range value {
			v[k] = x
		}
		v["toolCallId"] = tc.ID
		raw, _ := marshalCompact(v)
		r.enqueue(agui.Event{Type: agui.Custom, Name: name, Value: raw, Timestamp: now()})
	}
	return context.WithValue(r.runCtx, toolCallKey{}, call)
}

// executeOutcome is what Execute returned, or the panic it raised.
type executeOutcome struct {
	v        any
	err      error
	panicked bool
}

// awaitTool runs Execute on its own goroutine and, while it runs, delivers
// the events it queues. A delivery failure waits for the tool to return.
func (r *run) awaitTool(ctx context.Context, t *Tool, input json.RawMessage) (executeOutcome, error) {
	done := make(chan executeOutcome, 1)
	go func() {
		var o executeOutcome
		defer func() {
			if p := recover(); p != nil {
				o = executeOutcome{err: r.recovered(fmt.Sprintf("tool %q", t.Name), p), panicked: true}
			}
			done <- o
		}()
		o.v, o.err = t.Execute(ctx, input)
	}()
	for {
		select {
		case o := <-done:
			return o, nil
		case <-r.queueSig:
			if err := r.drainQueue(); err != nil {
				<-done
				return executeOutcome{}, err
			}
		}
	}
}
