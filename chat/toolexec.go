package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/goai-sdk/goai/agui"
)

// toolCallAccumulator assembles tool calls from a model turn (docs/engine.md §8).
type toolCallAccumulator struct {
	slots []int // insertion order of slot keys
	calls map[int]*agui.ToolCall
}

func (a *toolCallAccumulator) start(c *agui.Event) {
	for _, tc := range a.calls {
		if tc.ID == c.ToolCallID {
			return
		}
	}
	if a.calls == nil {
		a.calls = map[int]*agui.ToolCall{}
	}
	slot := len(a.calls)
	if c.Index != nil {
		slot = *c.Index
	}
	name := c.ToolCallName
	if name == "" {
		name = c.ToolName
	}
	if _, exists := a.calls[slot]; !exists {
		a.slots = append(a.slots, slot)
	}
	tc := &agui.ToolCall{ID: c.ToolCallID, Type: "function", Function: agui.FunctionCall{Name: name}}
	if c.Metadata != nil {
		tc.Metadata = c.Metadata
	}
	a.calls[slot] = tc
}

func (a *toolCallAccumulator) args(c *agui.Event) {
	for _, s := range a.slots {
		tc := a.calls[s]
		if tc.ID == c.ToolCallID {
			if c.Args != "" {
				tc.Function.Arguments = c.Args
			} else {
				tc.Function.Arguments += c.Delta
			}
			return
		}
	}
}

func (a *toolCallAccumulator) end(c *agui.Event) {
	for _, s := range a.slots {
		tc := a.calls[s]
		if tc.ID != c.ToolCallID {
			continue
		}
		if c.Input == nil {
			return
		}
		in := bytes.TrimSpace(c.Input)
		if len(in) == 0 || in[0] != '{' {
			tc.Function.Arguments = "{}"
		} else {
			var v any
			if json.Unmarshal(in, &v) == nil {
				b, _ := marshalCompact(v)
				tc.Function.Arguments = string(b)
			}
		}
		return
	}
}

// list returns complete calls (id and a non-blank name) in slot order.
func (a *toolCallAccumulator) list() []agui.ToolCall {
	var out []agui.ToolCall
	for _, s := range a.slots {
		tc := a.calls[s]
		if tc.ID != "" && strings.TrimSpace(tc.Function.Name) != "" {
			out = append(out, *tc)
		}
	}
	return out
}

func (a *toolCallAccumulator) has() bool { return len(a.list()) > 0 }

func (a *toolCallAccumulator) byID(id string) (agui.ToolCall, bool) {
	for _, s := range a.slots {
		if a.calls[s].ID == id {
			return *a.calls[s], true
		}
	}
	return agui.ToolCall{}, false
}

func (a *toolCallAccumulator) reset() {
	a.slots = a.slots[:0]
	clear(a.calls)
}

// marshalCompact is JSON.stringify for decoded values (no HTML escaping).
func marshalCompact(v any) ([]byte, error) { return agui.Marshal(v) }

// processToolCalls is the tool phase of a live turn (docs/engine.md §4).
func (r *run) processToolCalls() error {
	if !r.shouldExecuteToolPhase() || r.finished == nil {
		return r.skipToolPhase()
	}
	calls := r.calls.list()
	r.recordToolCalls(calls)
	r.addAssistantToolCallMessage(calls)
	runnable, setAside := r.runnableCalls(calls)
	if len(runnable) == 0 {
		if err := r.deliverResults(setAside); err != nil {
			return err
		}
		r.nextTurn()
		return nil
	}
	r.mctx.Phase = PhaseBeforeTools
	if paused, err := r.boundaryWith(PhaseBeforeTools, runnable); err != nil || paused {
		return err
	}
	res, err := r.executeToolCalls(runnable)
	if err != nil {
		return err
	}
	r.mctx.Phase = PhaseAfterTools
	if r.cancelled() { // an Abort cancels the run too
		r.toolPhase = phaseStop
		return nil
	}
	res.results = append(res.results, setAside...)
	if err := r.toolPhaseComplete(calls, res); err != nil {
		return err
	}
	reqs, err := r.interruptRequests()
	if err != nil {
		return err
	}
	if len(reqs) > 0 || res.pauses() {
		return r.pauseToolPhase(res, reqs)
	}
	if err := r.deliverResults(res.results); err != nil {
		return err
	}
	r.activateDiscovered()
	r.nextTurn()
	return nil
}

// skipToolPhase ends the loop after a turn whose tool calls do not run.
func (r *run) skipToolPhase() error {
	r.lastTurnToolCallCount = 0
	r.toolPhase = phaseStop
	if !r.tanstack && r.calls.has() {
		return r.reportSkippedCalls()
	}
	return nil
}

// runnableCalls splits a turn's calls into those that run and the results
// of those set aside: calls the adapter reported failed (in the order it
// reported them), then calls of lazy tools not yet discovered.
func (r *run) runnableCalls(calls []agui.ToolCall) ([]agui.ToolCall, []ToolResult) {
	var notFailed []agui.ToolCall
	for _, tc := range calls {
		if _, failed := r.streamedToolErrors[tc.ID]; !failed {
			notFailed = append(notFailed, tc)
		}
	}
	runnable, lazyErrs := r.discoveredCalls(notFailed)
	var setAside []ToolResult
	for _, id := range r.streamedErrorOrder {
		setAside = append(setAside, r.streamedToolErrors[id])
	}
	return runnable, append(setAside, lazyErrs...)
}

// discoveredCalls drops calls of lazy tools the model has not discovered,
// answering each with an error result.
func (r *run) discoveredCalls(calls []agui.ToolCall) (kept []agui.ToolCall, errs []ToolResult) {
	for _, tc := range calls {
		if r.lazy.undiscovered(tc.Function.Name) {
			errs = append(errs, errResult(tc.ID, tc.Function.Name, nil, undiscoveredError(tc.Function.Name)))
			continue
		}
		kept = append(kept, tc)
	}
	return kept, errs
}

// toolPhaseComplete runs OnToolPhaseComplete.
func (r *run) toolPhaseComplete(calls []agui.ToolCall, res execResult) error {
	info := ToolPhaseInfo{ToolCalls: calls, Results: res.results, NeedsApproval: res.needsApproval, NeedsClientExecution: res.needsClient}
	return r.eachHook("onToolPhaseComplete", func(m *Middleware) error {
		if m.OnToolPhaseComplete == nil {
			return nil
		}
		return m.OnToolPhaseComplete(r.mctx, info)
	})
}

// pauseToolPhase ends the run on interrupts: the results so far, then the
// interrupt terminal. The held RUN_FINISHED is dropped: a paused run has
// one terminal.
func (r *run) pauseToolPhase(res execResult, generic []InterruptRequest) error {
	r.heldToolFinished = nil
	if err := r.emitResults(res.results); err != nil {
		return err
	}
	if err := r.interruptTerminal(r.finishedOrSynthetic(), res.needsApproval, res.needsClient, generic); err != nil {
		return err
	}
	r.toolPhase = phaseWait
	return nil
}

// deliverResults yields the held RUN_FINISHED(tool_calls), then the results.
func (r *run) deliverResults(results []ToolResult) error {
	r.flushHeld(&r.heldToolFinished)
	return r.emitResults(results)
}

// activateDiscovered advertises, from the next turn, the lazy tools the
// model discovered in this one.
func (r *run) activateDiscovered() {
	if r.lazy != nil && r.lazy.fresh {
		r.tools = r.lazy.active()
		r.syncContext()
	}
}

// nextTurn lets the loop go on to another model turn.
func (r *run) nextTurn() {
	r.calls.reset()
	r.toolPhase = phaseContinue
}

// reportSkippedCalls answers the complete tool calls of a turn whose tool
// phase does not run (agui profile): the client saw each call stream, so
// each gets a TOOL_CALL_RESULT saying why it did not run, and the
// conversation records the call and that result, so the next request is
// consistent (a call left unanswered would run on the next request, or be
// refused by the provider). 0.58.0 drops them silently.
func (r *run) reportSkippedCalls() error {
	calls := r.calls.list()
	reason := r.skipReason()
	r.addAssistantToolCallMessage(calls)
	results := make([]ToolResult, 0, len(calls))
	for _, tc := range calls {
		if res, failed := r.streamedToolErrors[tc.ID]; failed {
			results = append(results, res) // the adapter's own outcome
			continue
		}
		if pe, _ := tc.Metadata["providerExecuted"].(bool); pe {
			continue // it ran where the adapter runs it, which reports its outcome
		}
		results = append(results, errResult(tc.ID, tc.Function.Name, nil, "Tool call not executed: "+reason))
	}
	r.calls.reset()
	return r.emitResults(results)
}

// skipReason says why a turn's tool calls do not run.
func (r *run) skipReason() string {
	switch {
	case r.finished == nil || r.lastFinishReason == "":
		return "the model's turn ended without a finish reason."
	case r.lastFinishReason == agui.FinishLength:
		return `the model's output was cut off by its length limit (finish reason "length").`
	case r.lastFinishReason != agui.FinishToolCalls:
		return fmt.Sprintf(`the model's turn ended with finish reason %q, not "tool_calls".`, r.lastFinishReason)
	default:
		return "no tools are available to this run."
	}
}

func (r *run) finishedOrSynthetic() agui.Event {
	if r.finished != nil {
		return *r.finished
	}
	return r.syntheticFinished(agui.FinishToolCalls)
}

// pendingToolCalls runs calls found unanswered in history (docs/engine.md §5).
// It reports wait=true when the run paused.
func (r *run) pendingToolCalls() (wait bool, err error) {
	pending := r.pendingFromMessages()
	if len(pending) == 0 {
		return false, nil
	}
	r.recordToolCalls(pending)
	pending, lazyErrs := r.discoveredCalls(pending)
	if len(pending) == 0 {
		return false, r.emitResults(lazyErrs)
	}
	r.mctx.Phase = PhaseBeforeTools
	if paused, err := r.boundaryWith(PhaseBeforeTools, pending); err != nil || paused {
		return paused, err
	}
	res, err := r.executeToolCalls(pending)
	if err != nil {
		return false, err
	}
	if r.cancelled() { // an Abort cancels the run too
		r.toolPhase = phaseStop
		return true, nil
	}
	if err := r.toolPhaseComplete(pending, res); err != nil {
		return false, err
	}
	if res.pauses() {
		return true, r.pauseToolPhase(res, nil)
	}
	return false, r.emitResults(append(res.results, lazyErrs...))
}

func (r *run) pendingFromMessages() []agui.ToolCall {
	done := map[string]bool{}
	for _, m := range r.messages {
		if m.Role == agui.RoleTool && m.ToolCallID != "" && !isPendingPlaceholder(m.Content) {
			done[m.ToolCallID] = true
		}
	}
	var out []agui.ToolCall
	for _, m := range r.messages {
		if m.Role != agui.RoleAssistant {
			continue
		}
		for _, tc := range m.ToolCalls {
			if pe, _ := tc.Metadata["providerExecuted"].(bool); pe {
				continue
			}
			if !done[tc.ID] {
				out = append(out, tc)
			}
		}
	}
	return out
}

func isPendingPlaceholder(c agui.Content) bool {
	if c.IsNull() || c.IsParts() {
		return false
	}
	var v struct {
		PendingExecution bool `json:"pendingExecution"`
	}
	return json.Unmarshal([]byte(c.String()), &v) == nil && v.PendingExecution
}

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

func errResult(id, name string, input json.RawMessage, msg string) ToolResult {
	return ToolResult{ToolCallID: id, ToolName: name, Result: map[string]any{"error": msg}, State: "output-error", Input: input}
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

func decodeResult(raw json.RawMessage) any {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	return v
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

// toolValue is a tool's return value as a result: a string holding JSON and
// raw JSON are decoded, so the result is not encoded twice.
func toolValue(v any) any {
	if s, ok := v.(string); ok {
		var d any
		if json.Unmarshal([]byte(s), &d) == nil {
			v = d
		}
	}
	if raw, ok := v.(json.RawMessage); ok {
		v = decodeResult(raw)
	}
	return v
}

// emitResults yields TOOL_CALL_RESULT chunks and records tool messages.
func (r *run) emitResults(results []ToolResult) error {
	for _, res := range results {
		content, msgContent := normalizeToolResult(res.Result)
		parent := ""
		for i := len(r.messages) - 1; i >= 0; i-- {
			if r.messages[i].Role == agui.RoleAssistant {
				parent = r.messages[i].ID
				break
			}
		}
		if parent == "" {
			parent = res.ToolCallID
		}
		ev := agui.Event{Type: agui.ToolCallResult, Timestamp: now(), MessageID: parent, ToolCallID: res.ToolCallID, Content: content, Role: "tool"}
		if res.State == "output-error" {
			ev.Metadata = map[string]any{"tanstack": map[string]any{"state": res.State}}
		}
		msg := agui.ModelMessage{Role: agui.RoleTool, Content: msgContent, ToolCallID: res.ToolCallID}
		replaced := false
		for i, m := range r.messages {
			if m.Role == agui.RoleTool && m.ToolCallID == res.ToolCallID && isPendingPlaceholder(m.Content) {
				r.messages[i] = msg
				replaced = true
				break
			}
		}
		if !replaced {
			r.messages = append(r.messages, msg)
		}
		r.mctx.Messages = r.messages
		if err := r.pipe(ev); err != nil {
			return err
		}
	}
	return nil
}

// normalizeToolResult renders a result for the event (always a string) and
// for history (multimodal part lists stay parts).
func normalizeToolResult(v any) (string, agui.Content) {
	switch x := v.(type) {
	case string:
		return x, agui.Text(x)
	case []agui.ContentPart:
		if len(x) > 0 {
			b, _ := marshalCompact(x)
			return string(b), agui.Parts(x...)
		}
	}
	if v == nil {
		return "null", agui.Text("null")
	}
	b, err := marshalCompact(v)
	if err != nil {
		s := fmt.Sprintf("%v", v)
		return s, agui.Text(s)
	}
	if parts, ok := asContentParts(b); ok {
		return string(b), agui.Parts(parts...)
	}
	return string(b), agui.Text(string(b))
}

func asContentParts(b []byte) ([]agui.ContentPart, bool) {
	if len(b) == 0 || b[0] != '[' {
		return nil, false
	}
	var parts []agui.ContentPart
	if json.Unmarshal(b, &parts) != nil || len(parts) == 0 {
		return nil, false
	}
	for _, p := range parts {
		switch p.Type {
		case "text":
		case "image", "audio", "video", "document":
			if p.Source == nil || (p.Source.Type == "data" && p.Source.MimeType == "") || (p.Source.Type != "data" && p.Source.Type != "url") {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return parts, true
}
