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
		r.lastTurnToolCallCount = 0
		r.toolPhase = phaseStop
		if !r.tanstack && r.calls.has() {
			return r.reportSkippedCalls()
		}
		return nil
	}
	calls := r.calls.list()
	r.recordToolCalls(calls)
	r.addAssistantToolCallMessage(calls)
	var executable []agui.ToolCall
	var lazyErrs []ToolResult
	for _, tc := range calls {
		if _, failed := r.streamedToolErrors[tc.ID]; failed {
			continue
		}
		if r.lazy.undiscovered(tc.Function.Name) {
			lazyErrs = append(lazyErrs, errResult(tc.ID, tc.Function.Name, nil, undiscoveredError(tc.Function.Name)))
			continue
		}
		executable = append(executable, tc)
	}
	var deferredErrs []ToolResult
	for _, id := range r.streamedErrorOrder {
		deferredErrs = append(deferredErrs, r.streamedToolErrors[id])
	}
	deferredErrs = append(deferredErrs, lazyErrs...)
	if len(executable) == 0 {
		r.flushHeld(&r.heldToolFinished)
		if err := r.emitResults(deferredErrs); err != nil {
			return err
		}
		r.calls.reset()
		r.toolPhase = phaseContinue
		return nil
	}
	r.mctx.Phase = PhaseBeforeTools
	if paused, err := r.boundaryWith(PhaseBeforeTools, executable); err != nil || paused {
		return err
	}
	res, err := r.executeToolCalls(executable)
	if err != nil {
		return err
	}
	r.mctx.Phase = PhaseAfterTools
	if r.cancelled() { // an Abort cancels the run too
		r.toolPhase = phaseStop
		return nil
	}
	all := append(res.results, deferredErrs...)
	info := ToolPhaseInfo{ToolCalls: calls, Results: all, NeedsApproval: res.needsApproval, NeedsClientExecution: res.needsClient}
	if err := r.eachHook("onToolPhaseComplete", func(m *Middleware) error {
		if m.OnToolPhaseComplete == nil {
			return nil
		}
		return m.OnToolPhaseComplete(r.mctx, info)
	}); err != nil {
		return err
	}
	reqs, err := r.interruptRequests()
	if err != nil {
		return err
	}
	if len(reqs) > 0 {
		if err := r.emitResults(all); err != nil {
			return err
		}
		r.heldToolFinished = nil
		fin := r.finishedOrSynthetic()
		if err := r.interruptTerminal(fin, res.needsApproval, res.needsClient, reqs); err != nil {
			return err
		}
		r.toolPhase = phaseWait
		return nil
	}
	if len(res.needsApproval) > 0 || len(res.needsClient) > 0 {
		r.heldToolFinished = nil
		if err := r.emitResults(all); err != nil {
			return err
		}
		if err := r.interruptTerminal(r.finishedOrSynthetic(), res.needsApproval, res.needsClient, nil); err != nil {
			return err
		}
		r.toolPhase = phaseWait
		return nil
	}
	r.flushHeld(&r.heldToolFinished)
	if err := r.emitResults(all); err != nil {
		return err
	}
	if r.lazy != nil && r.lazy.fresh {
		r.tools = r.lazy.active()
		r.syncContext()
	}
	r.calls.reset()
	r.toolPhase = phaseContinue
	return nil
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
func (r *run) pendingToolCalls() (bool, error) {
	pending := r.pendingFromMessages()
	if len(pending) == 0 {
		return false, nil
	}
	r.recordToolCalls(pending)
	var lazyErrs []ToolResult
	if r.lazy != nil {
		kept := pending[:0:0]
		for _, tc := range pending {
			if r.lazy.undiscovered(tc.Function.Name) {
				lazyErrs = append(lazyErrs, errResult(tc.ID, tc.Function.Name, nil, undiscoveredError(tc.Function.Name)))
				continue
			}
			kept = append(kept, tc)
		}
		pending = kept
	}
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
	info := ToolPhaseInfo{ToolCalls: pending, Results: res.results, NeedsApproval: res.needsApproval, NeedsClientExecution: res.needsClient}
	if err := r.eachHook("onToolPhaseComplete", func(m *Middleware) error {
		if m.OnToolPhaseComplete == nil {
			return nil
		}
		return m.OnToolPhaseComplete(r.mctx, info)
	}); err != nil {
		return false, err
	}
	if len(res.needsApproval) > 0 || len(res.needsClient) > 0 {
		if err := r.emitResults(res.results); err != nil {
			return false, err
		}
		if err := r.interruptTerminal(r.syntheticFinished(agui.FinishToolCalls), res.needsApproval, res.needsClient, nil); err != nil {
			return false, err
		}
		r.toolPhase = phaseWait
		return true, nil
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

type execResult struct {
	results       []ToolResult
	needsApproval []PendingApproval
	needsClient   []PendingClientCall
}

// executeToolCalls runs a batch strictly in order (docs/engine.md §8).
func (r *run) executeToolCalls(calls []agui.ToolCall) (execResult, error) {
	var out execResult
	r.collectClientResults()
	byName := make(map[string]*Tool, len(r.tools))
	for _, t := range r.tools {
		byName[t.Name] = t
	}
	if r.lazy != nil {
		// The discovery tool stays executable after everything was found.
		byName[DiscoveryToolName] = r.lazy.discovery
	}
	pendingApproval := false
	for _, tc := range calls {
		t := byName[tc.Function.Name]
		if t != nil && t.approvalNeeded(tc.Function.Arguments) && !r.hasApproval(tc.ID) && !r.cancelledIDs[tc.ID] {
			pendingApproval = true
		}
	}
	for _, tc := range calls {
		name := tc.Function.Name
		t := byName[name]
		if t == nil {
			out.results = append(out.results, errResult(tc.ID, name, nil, "Unknown tool: "+name))
			continue
		}
		if pendingApproval {
			needs := t.approvalNeeded(tc.Function.Arguments)
			pendingHere := needs && !r.hasApproval(tc.ID)
			plainClient := !needs && t.Execute == nil
			if !pendingHere && !plainClient {
				continue
			}
		}
		if r.cancelledIDs[tc.ID] {
			out.results = append(out.results, errResult(tc.ID, name, nil, "Tool execution cancelled"))
			continue
		}
		argsText := strings.TrimSpace(tc.Function.Arguments)
		if argsText == "" {
			argsText = "{}"
		}
		input, ok := parseArgs(argsText)
		if !ok {
			out.results = append(out.results, errResult(tc.ID, name, json.RawMessage("{}"), "Failed to parse tool arguments as JSON: "+argsText))
			continue
		}
		if err := t.validate(input); err != nil {
			out.results = append(out.results, errResult(tc.ID, name, input, fmt.Sprintf("Input validation failed for tool %s: %v", name, err)))
			continue
		}
		if t.approvalNeeded(tc.Function.Arguments) {
			d, decided := r.approval(tc.ID)
			if !decided {
				out.needsApproval = append(out.needsApproval, PendingApproval{ToolCallID: tc.ID, ToolName: name, Input: input, ApprovalID: "approval_" + tc.ID})
				continue
			}
			if !d.approved {
				out.results = append(out.results, r.denied(tc.ID, name, input, d))
				continue
			}
			if d.editedArgs != nil {
				input = d.editedArgs
			}
		}
		if t.Execute == nil {
			if res, ok := r.clientResults[tc.ID]; ok {
				out.results = append(out.results, ToolResult{ToolCallID: tc.ID, ToolName: name, Result: decodeResult(res), Input: input})
			} else {
				out.needsClient = append(out.needsClient, PendingClientCall{ToolCallID: tc.ID, ToolName: name, Input: input})
			}
			continue
		}
		res, proceed, newInput, err := r.beforeToolCall(tc, t, input)
		if err != nil {
			return out, err
		}
		if !proceed {
			out.results = append(out.results, res)
			continue
		}
		input = newInput
		res, err = r.runServerTool(tc, t, input)
		if err != nil {
			return out, err
		}
		out.results = append(out.results, res)
		if r.cancelled() {
			return out, nil
		}
	}
	return out, nil
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
	ctx := context.WithValue(r.runCtx, toolCallKey{}, call)
	type outcome struct {
		v        any
		err      error
		panicked bool
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		var o outcome
		defer func() {
			if p := recover(); p != nil {
				o = outcome{err: r.recovered(fmt.Sprintf("tool %q", t.Name), p), panicked: true}
			}
			done <- o
		}()
		o.v, o.err = t.Execute(ctx, input)
	}()
	var o outcome
wait:
	for {
		select {
		case o = <-done:
			break wait
		case <-r.queueSig:
			if err := r.drainQueue(); err != nil {
				<-done
				return ToolResult{}, err
			}
		}
	}
	dur := time.Since(start)
	if o.panicked {
		return ToolResult{}, o.err // a panic is a bug, not a tool error: the run ends
	}
	if err := r.drainQueue(); err != nil {
		return ToolResult{}, err
	}
	if o.err != nil {
		res := ToolResult{ToolCallID: tc.ID, ToolName: t.Name, Result: map[string]any{"error": o.err.Error()}, State: "output-error", Duration: dur, Input: input}
		if err := r.afterToolCall(AfterToolCallInfo{ToolCall: tc, Tool: t, ToolName: t.Name, ToolCallID: tc.ID, OK: false, Duration: dur, Err: o.err}); err != nil {
			return res, err
		}
		return res, nil
	}
	result := o.v
	if s, ok := result.(string); ok {
		var v any
		if json.Unmarshal([]byte(s), &v) == nil {
			result = v
		}
	}
	if raw, ok := result.(json.RawMessage); ok {
		result = decodeResult(raw)
	}
	res := ToolResult{ToolCallID: tc.ID, ToolName: t.Name, Result: result, Duration: dur, Input: input}
	err := r.afterToolCall(AfterToolCallInfo{ToolCall: tc, Tool: t, ToolName: t.Name, ToolCallID: tc.ID, OK: true, Duration: dur, Result: result})
	return res, err
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
