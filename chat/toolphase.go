package chat

import (
	"encoding/json"
	"fmt"

	"github.com/goai-sdk/goai/agui"
)

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
