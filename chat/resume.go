package chat

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/goai-sdk/goai/agui"
)

// Resume error codes (docs/engine.md §6).
const (
	CodeStale               = "stale"
	CodeUnknownInterrupt    = "unknown-interrupt"
	CodeIncompleteBatch     = "incomplete-batch"
	CodeItemValidation      = "item-validation-failed"
	CodeInvalidPayload      = "invalid-payload"
	CodeInvalidEditedArgs   = "invalid-edited-args"
	CodeInvalidToolOutput   = "invalid-tool-output"
	CodeConflict            = "conflict"
	CodeExpired             = "expired"
	interruptErrorsMetaName = "interruptErrors"
)

// InterruptError is one problem with a resume batch.
type InterruptError struct {
	Scope            string   `json:"scope"` // "item" | "batch"
	ThreadID         string   `json:"threadId"`
	InterruptedRunID string   `json:"interruptedRunId"`
	Generation       int      `json:"generation"`
	InterruptID      string   `json:"interruptId,omitempty"`
	InterruptIDs     []string `json:"interruptIds,omitempty"`
	Code             string   `json:"code"`
	Message          string   `json:"message"`
	Source           string   `json:"source"` // "client" | "server"
	Retryable        bool     `json:"retryable"`
	Path             []any    `json:"path,omitempty"`
}

// ResumeError rejects a whole resume batch: nothing ran.
type ResumeError struct {
	Errors []InterruptError
}

func (e *ResumeError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i, x := range e.Errors {
		msgs[i] = x.Message
	}
	return strings.Join(msgs, " ")
}

// Code is the first problem's code.
func (e *ResumeError) Code() string {
	if len(e.Errors) == 0 {
		return "server"
	}
	return e.Errors[0].Code
}

type pendingInterrupt struct {
	id       string
	callID   string
	tool     *Tool
	approval bool // else client tool execution
	// needsApproval: the call needed approval (a client tool that also
	// needed one counts as approved once its result arrives).
	needsApproval bool
}

// applyResume validates the resume batch as a whole against the interrupts
// rebuilt from history, then turns it into approvals, client results and
// cancellations. Nothing runs when any item is invalid.
func (r *run) applyResume() error {
	if len(r.resume) == 0 {
		return nil
	}
	if r.opts.ParentRunID == "" {
		return r.resumeWithoutParent()
	}
	genericItems, toolItems := splitResume(r.resume)
	pending := r.pendingInterrupts(toolItems)
	check := &resumeCheck{threadID: r.threadID, parent: r.opts.ParentRunID, groups: map[string][]InterruptError{}}
	generic, err := r.checkGeneric(check, genericItems)
	if err != nil {
		return err
	}
	answers := check.toolAnswers(toolItems, pending)
	if err := check.err(pending); err != nil {
		return err
	}
	r.recordAnswers(pending, answers)
	return r.resolveGeneric(generic, pending)
}

// splitResume separates answers to generic interrupts (raised by
// middleware through OnInterruptBoundary: they carry the interrupt's
// continuation metadata and go to OnInterruptResolution) from answers to
// the tool interrupts rebuilt from history.
func splitResume(items []ResumeItem) (generic, tool []ResumeItem) {
	for _, e := range items {
		if _, has := e.Metadata[continuationKey]; has || strings.HasPrefix(e.InterruptID, "interrupt-") {
			generic = append(generic, e)
			continue
		}
		tool = append(tool, e)
	}
	return generic, tool
}

// resumeWithoutParent rejects a batch that does not name the paused run.
func (r *run) resumeWithoutParent() error {
	ids := make([]string, len(r.resume))
	for i, e := range r.resume {
		ids[i] = e.InterruptID
	}
	return &ResumeError{Errors: []InterruptError{{Scope: "batch", ThreadID: r.threadID, InterruptedRunID: r.runID(),
		InterruptIDs: ids, Code: CodeStale, Message: "Interrupt continuation requires parentRunId to identify the interrupted run.",
		Source: "server"}}}
}

// resumeCheck gathers the problems of a resume batch by interrupt id.
type resumeCheck struct {
	threadID, parent string
	groups           map[string][]InterruptError
	incomplete       bool // an interrupt is unanswered, or an answer names none
}

func (c *resumeCheck) item(id, code, msg string) {
	c.groups[id] = append(c.groups[id], InterruptError{Scope: "item", ThreadID: c.threadID, InterruptedRunID: c.parent,
		InterruptID: id, Code: code, Message: msg, Source: "client"})
}

func (c *resumeCheck) unknown(id, msg string) {
	c.incomplete = true
	c.item(id, CodeUnknownInterrupt, msg)
}

// stale rejects the whole batch at once: it answers a run that is not the
// one it claims.
func (c *resumeCheck) stale(msg string) error {
	return &ResumeError{Errors: []InterruptError{{Scope: "batch", ThreadID: c.threadID, InterruptedRunID: c.parent,
		InterruptIDs: []string{}, Code: CodeStale, Message: msg, Source: "server"}}}
}

// err is the batch's rejection, nil when every answer is valid: the item
// errors in interrupt id order, then the batch errors.
func (c *resumeCheck) err(pending []pendingInterrupt) error {
	if len(c.groups) == 0 {
		return nil
	}
	var errs []InterruptError
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		errs = append(errs, c.groups[id]...)
	}
	ids := make([]string, len(pending))
	for i, p := range pending {
		ids[i] = p.id
	}
	batch := func(code, msg string) InterruptError {
		return InterruptError{Scope: "batch", ThreadID: c.threadID, InterruptedRunID: c.parent, Code: code, Message: msg, Source: "client", InterruptIDs: ids}
	}
	if c.incomplete {
		errs = append(errs, batch(CodeIncompleteBatch, "Resume entries must resolve or cancel the complete interrupt batch."))
	}
	errs = append(errs, batch(CodeItemValidation, "One or more interrupt resolutions are invalid."))
	return &ResumeError{Errors: errs}
}

// toolAnswers indexes the answers to tool interrupts by interrupt id (the
// first of duplicates) and checks them: duplicates, unanswered interrupts,
// answers to no interrupt, and each answer against its interrupt.
func (c *resumeCheck) toolAnswers(items []ResumeItem, pending []pendingInterrupt) map[string]ResumeItem {
	byID := map[string]ResumeItem{}
	counts := map[string]int{}
	for _, e := range items {
		counts[e.InterruptID]++
		if _, ok := byID[e.InterruptID]; !ok {
			byID[e.InterruptID] = e
		}
	}
	for id, n := range counts {
		if n > 1 {
			c.item(id, CodeConflict, fmt.Sprintf("Interrupt %s has duplicate resume entries.", id))
		}
	}
	known := map[string]bool{}
	for _, p := range pending {
		known[p.id] = true
		if entry, ok := byID[p.id]; ok {
			c.toolAnswer(p, entry)
		} else {
			c.unknown(p.id, fmt.Sprintf("Missing resume entry for interrupt %s.", p.id))
		}
	}
	for _, e := range items {
		if !known[e.InterruptID] {
			c.unknown(e.InterruptID, fmt.Sprintf("Resume entry references unknown interrupt %s.", e.InterruptID))
		}
	}
	return byID
}

// toolAnswer checks one answer against its tool interrupt.
func (c *resumeCheck) toolAnswer(p pendingInterrupt, entry ResumeItem) {
	switch {
	case entry.Status == agui.ResumeCancelled:
		if len(entry.Payload) > 0 {
			c.item(p.id, CodeInvalidPayload, fmt.Sprintf("Cancelled interrupt %s must not include a payload.", p.id))
		}
	case entry.Status != agui.ResumeResolved:
		c.item(p.id, CodeInvalidPayload, fmt.Sprintf("Interrupt %s has invalid status %s.", p.id, entry.Status))
	case !p.approval:
		if len(p.tool.OutputSchema) > 0 {
			if err := validateJSON(p.tool.OutputSchema, entry.Payload); err != nil {
				c.item(p.id, CodeInvalidToolOutput, fmt.Sprintf("Tool %s output is invalid: %v", p.tool.Name, err))
			}
		}
	default:
		c.approval(p, entry.Payload)
	}
}

// approval checks an approval decision: a boolean, or an envelope whose
// edited arguments must fit the tool's input schema.
func (c *resumeCheck) approval(p pendingInterrupt, payload json.RawMessage) {
	approved, envelope, ok := readApproval(payload)
	if !ok {
		c.item(p.id, CodeInvalidPayload, fmt.Sprintf("Approval %s must be a boolean or decision envelope.", p.id))
		return
	}
	for _, k := range slices.Sorted(maps.Keys(envelope)) {
		if k != "approved" && k != "editedArgs" && k != "payload" {
			c.item(p.id, CodeInvalidPayload, fmt.Sprintf("Approval %s envelope is invalid: unexpected key %q", p.id, k))
		}
	}
	edited, has := envelope["editedArgs"]
	switch {
	case !has || !approved:
	case len(p.tool.InputSchema) == 0:
		c.item(p.id, CodeInvalidEditedArgs, fmt.Sprintf("Approval %s cannot edit arguments without an input schema.", p.id))
	default:
		if err := p.tool.validate(edited); err != nil {
			c.item(p.id, CodeInvalidEditedArgs, fmt.Sprintf("Approval %s edited arguments are invalid: %v", p.id, err))
		}
	}
}

// recordAnswers turns a valid batch into the run's approvals, client
// results and cancellations.
func (r *run) recordAnswers(pending []pendingInterrupt, answers map[string]ResumeItem) {
	for _, p := range pending {
		entry := answers[p.id]
		switch {
		case entry.Status == agui.ResumeCancelled:
			r.cancelledIDs[p.callID] = true
		case !p.approval:
			r.clientResults[p.callID] = entry.Payload
			if p.needsApproval {
				r.approvals[p.callID] = approvalDecision{approved: true}
			}
		default:
			r.approvals[p.callID] = decisionOf(entry.Payload)
		}
	}
}

// decisionOf reads a validated approval payload.
func decisionOf(payload json.RawMessage) approvalDecision {
	approved, envelope, _ := readApproval(payload)
	d := approvalDecision{approved: approved}
	if envelope != nil {
		if approved {
			d.editedArgs = envelope["editedArgs"]
		}
		d.payload = envelope["payload"]
	}
	return d
}

func readApproval(payload json.RawMessage) (approved bool, envelope map[string]json.RawMessage, ok bool) {
	if json.Unmarshal(payload, &approved) == nil {
		return approved, nil, true
	}
	if json.Unmarshal(payload, &envelope) != nil || envelope == nil {
		return false, nil, false
	}
	if json.Unmarshal(envelope["approved"], &approved) != nil {
		return false, nil, false
	}
	return approved, envelope, true
}

// pendingInterrupts rebuilds the parent run's tool interrupts from history
// (the unanswered calls, and any call one of answers names): approvals
// first, then client tool executions, in history order.
func (r *run) pendingInterrupts(answers []ResumeItem) []pendingInterrupt {
	calls := r.pendingFromMessages()
	have := map[string]bool{}
	for _, c := range calls {
		have[c.ID] = true
	}
	resumeIDs := map[string]bool{}
	for _, e := range answers {
		resumeIDs[e.InterruptID] = true
		var callID string
		if id, ok := strings.CutPrefix(e.InterruptID, "client_tool_"); ok {
			callID = id
		} else if id, ok := strings.CutPrefix(e.InterruptID, "approval_"); ok {
			callID = id
		}
		if callID == "" || have[callID] {
			continue
		}
		if tc, ok := r.findToolCall(callID); ok {
			calls = append(calls, tc)
			have[callID] = true
		}
	}
	byName := map[string]*Tool{}
	for _, t := range r.tools {
		byName[t.Name] = t
	}
	var approvals, clients []pendingInterrupt
	for _, c := range calls {
		t := byName[c.Function.Name]
		if t == nil {
			continue
		}
		clientExec := t.Execute == nil && resumeIDs["client_tool_"+c.ID]
		needs := t.approvalNeeded(c.Function.Arguments)
		if needs && !clientExec {
			approvals = append(approvals, pendingInterrupt{id: "approval_" + c.ID, callID: c.ID, tool: t, approval: true, needsApproval: true})
		}
		if t.Execute == nil && (!needs || clientExec) {
			clients = append(clients, pendingInterrupt{id: "client_tool_" + c.ID, callID: c.ID, tool: t, needsApproval: needs})
		}
	}
	return append(approvals, clients...)
}

func (r *run) findToolCall(id string) (agui.ToolCall, bool) {
	for _, m := range r.messages {
		for _, tc := range m.ToolCalls {
			if tc.ID == id {
				if pe, _ := tc.Metadata["providerExecuted"].(bool); pe {
					return agui.ToolCall{}, false
				}
				return tc, true
			}
		}
	}
	return agui.ToolCall{}, false
}

// resumeErrorEvent is the single RUN_ERROR of a rejected resume.
func (r *run) resumeErrorEvent(e *ResumeError) agui.Event {
	raw, _ := marshalCompact(e.Errors)
	return agui.WithTanstack(agui.Event{Type: agui.RunError, Timestamp: now(), Message: e.Error(), Code: e.Code()},
		map[string]any{"runId": r.runID(), "threadId": r.threadID, interruptErrorsMetaName: json.RawMessage(raw)})
}

// resumeState holds the answers to the parent run's interrupts.
type resumeState struct {
	approvals     map[string]approvalDecision
	clientResults map[string]json.RawMessage
	cancelledIDs  map[string]bool
	deniedResults map[string]any
}

func newResumeState() resumeState {
	return resumeState{
		approvals:     map[string]approvalDecision{},
		clientResults: map[string]json.RawMessage{},
		cancelledIDs:  map[string]bool{},
		deniedResults: map[string]any{},
	}
}

type approvalDecision struct {
	approved   bool
	editedArgs json.RawMessage
	payload    json.RawMessage
}
