package chat

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

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
	// Answers to generic interrupts (raised by middleware through
	// OnInterruptBoundary) carry the interrupt's continuation metadata and
	// go to OnInterruptResolution; the rest must answer the tool interrupts
	// rebuilt from history.
	var genericItems, toolItems []ResumeItem
	for _, e := range r.resume {
		if _, has := e.Metadata[continuationKey]; has || strings.HasPrefix(e.InterruptID, "interrupt-") {
			genericItems = append(genericItems, e)
			continue
		}
		toolItems = append(toolItems, e)
	}
	parent := r.opts.ParentRunID
	if parent == "" {
		ids := make([]string, len(r.resume))
		for i, e := range r.resume {
			ids[i] = e.InterruptID
		}
		return &ResumeError{Errors: []InterruptError{{Scope: "batch", ThreadID: r.threadID, InterruptedRunID: r.runID(),
			InterruptIDs: ids, Code: CodeStale, Message: "Interrupt continuation requires parentRunId to identify the interrupted run.",
			Source: "server"}}}
	}
	all := r.resume
	r.resume = toolItems // validated below against the rebuilt tool interrupts
	defer func() { r.resume = all }()
	pending := r.pendingInterrupts()
	item := func(id, code, msg string) InterruptError {
		return InterruptError{Scope: "item", ThreadID: r.threadID, InterruptedRunID: parent, InterruptID: id, Code: code, Message: msg, Source: "client"}
	}
	groups := map[string][]InterruptError{}
	generic, incompleteGeneric, err := r.checkGeneric(genericItems, parent, groups)
	if err != nil {
		return err
	}
	byID := map[string]ResumeItem{}
	counts := map[string]int{}
	for _, e := range r.resume {
		counts[e.InterruptID]++
		if _, ok := byID[e.InterruptID]; !ok {
			byID[e.InterruptID] = e
		}
	}
	for id, n := range counts {
		if n > 1 {
			groups[id] = append(groups[id], item(id, CodeConflict, fmt.Sprintf("Interrupt %s has duplicate resume entries.", id)))
		}
	}
	incomplete := incompleteGeneric
	pendingIDs := make([]string, len(pending))
	known := map[string]bool{}
	for i, p := range pending {
		pendingIDs[i] = p.id
		known[p.id] = true
		entry, ok := byID[p.id]
		if !ok {
			incomplete = true
			groups[p.id] = append(groups[p.id], item(p.id, CodeUnknownInterrupt, fmt.Sprintf("Missing resume entry for interrupt %s.", p.id)))
			continue
		}
		if entry.Status != agui.ResumeResolved && entry.Status != agui.ResumeCancelled {
			groups[p.id] = append(groups[p.id], item(p.id, CodeInvalidPayload, fmt.Sprintf("Interrupt %s has invalid status %s.", p.id, entry.Status)))
			continue
		}
		if entry.Status == agui.ResumeCancelled {
			if len(entry.Payload) > 0 {
				groups[p.id] = append(groups[p.id], item(p.id, CodeInvalidPayload, fmt.Sprintf("Cancelled interrupt %s must not include a payload.", p.id)))
			}
			continue
		}
		if !p.approval {
			if len(p.tool.OutputSchema) > 0 {
				if err := validateJSON(p.tool.OutputSchema, entry.Payload); err != nil {
					groups[p.id] = append(groups[p.id], item(p.id, CodeInvalidToolOutput, fmt.Sprintf("Tool %s output is invalid: %v", p.tool.Name, err)))
				}
			}
			continue
		}
		approved, envelope, ok := readApproval(entry.Payload)
		if !ok {
			groups[p.id] = append(groups[p.id], item(p.id, CodeInvalidPayload, fmt.Sprintf("Approval %s must be a boolean or decision envelope.", p.id)))
			continue
		}
		if envelope != nil {
			for k := range envelope {
				if k != "approved" && k != "editedArgs" && k != "payload" {
					groups[p.id] = append(groups[p.id], item(p.id, CodeInvalidPayload, fmt.Sprintf("Approval %s envelope is invalid: unexpected key %q", p.id, k)))
				}
			}
			if ea, has := envelope["editedArgs"]; has && approved {
				switch {
				case len(p.tool.InputSchema) == 0:
					groups[p.id] = append(groups[p.id], item(p.id, CodeInvalidEditedArgs, fmt.Sprintf("Approval %s cannot edit arguments without an input schema.", p.id)))
				default:
					if err := p.tool.validate(ea); err != nil {
						groups[p.id] = append(groups[p.id], item(p.id, CodeInvalidEditedArgs, fmt.Sprintf("Approval %s edited arguments are invalid: %v", p.id, err)))
					}
				}
			}
		}
	}
	for _, e := range r.resume {
		if !known[e.InterruptID] {
			incomplete = true
			groups[e.InterruptID] = append(groups[e.InterruptID], item(e.InterruptID, CodeUnknownInterrupt, fmt.Sprintf("Resume entry references unknown interrupt %s.", e.InterruptID)))
		}
	}
	var errs []InterruptError
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		errs = append(errs, groups[k]...)
	}
	batch := func(code, msg string) InterruptError {
		return InterruptError{Scope: "batch", ThreadID: r.threadID, InterruptedRunID: parent, Code: code, Message: msg, Source: "client", InterruptIDs: pendingIDs}
	}
	if len(errs) > 0 {
		if incomplete {
			errs = append(errs, batch(CodeIncompleteBatch, "Resume entries must resolve or cancel the complete interrupt batch."))
		}
		errs = append(errs, batch(CodeItemValidation, "One or more interrupt resolutions are invalid."))
		return &ResumeError{Errors: errs}
	}
	for _, p := range pending {
		entry := byID[p.id]
		if entry.Status == agui.ResumeCancelled {
			r.cancelledIDs[p.callID] = true
			continue
		}
		if !p.approval {
			r.clientResults[p.callID] = entry.Payload
			if p.needsApproval {
				r.approvals[p.callID] = approvalDecision{approved: true}
			}
			continue
		}
		approved, envelope, _ := readApproval(entry.Payload)
		d := approvalDecision{approved: approved}
		if envelope != nil {
			if approved {
				d.editedArgs = envelope["editedArgs"]
			}
			d.payload = envelope["payload"]
		}
		r.approvals[p.callID] = d
	}
	return r.resolveGeneric(generic, pending)
}

// continuation is what a client echoes from a generic interrupt so the
// server can check the answer without having stored anything.
type continuation struct {
	V                  int    `json:"v"`
	DefinitionID       string `json:"definitionId"`
	Key                string `json:"key"`
	BatchIndex         int    `json:"batchIndex"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
	ExpiresAt          string `json:"expiresAt,omitempty"`
	ResponseSchemaHash string `json:"responseSchemaHash,omitempty"`
	PayloadSchemaHash  string `json:"payloadSchemaHash,omitempty"`
	Payload            any    `json:"payload,omitempty"`
}

// Continuation returns the resume metadata a client sends back with its
// answer to a generic interrupt (the TanStack client does this itself).
func Continuation(it agui.Interrupt) map[string]any {
	b, _ := it.Metadata[bindingKey].(map[string]any)
	c := map[string]any{"v": 1, "definitionId": b["definitionId"], "key": b["key"], "batchIndex": b["batchIndex"],
		"reason": it.Reason, "message": it.Message}
	for _, k := range []string{"expiresAt", "responseSchemaHash", "payloadSchemaHash"} {
		if v, ok := b[k]; ok {
			c[k] = v
		}
	}
	if p, ok := it.Metadata[interruptPayloadKey]; ok {
		c["payload"] = p
	}
	return map[string]any{continuationKey: c}
}

// checkGeneric validates answers to generic interrupts against the
// registered definitions. Structural problems fail the whole batch at once
// (stale); answer problems are item errors added to groups.
func (r *run) checkGeneric(items []ResumeItem, parent string, groups map[string][]InterruptError) ([]InterruptResolution, bool, error) {
	stale := func(msg string) error {
		return &ResumeError{Errors: []InterruptError{{Scope: "batch", ThreadID: r.threadID, InterruptedRunID: parent,
			InterruptIDs: []string{}, Code: CodeStale, Message: msg, Source: "server"}}}
	}
	item := func(id, code, msg string) {
		groups[id] = append(groups[id], InterruptError{Scope: "item", ThreadID: r.threadID, InterruptedRunID: parent,
			InterruptID: id, Code: code, Message: msg, Source: "client"})
	}
	var out []InterruptResolution
	incomplete := false
	ids, batch := map[string]bool{}, map[int]bool{}
	for _, e := range items {
		raw, has := e.Metadata[continuationKey]
		if !has {
			incomplete = true
			item(e.InterruptID, CodeUnknownInterrupt, fmt.Sprintf("Resume entry references unknown interrupt %s.", e.InterruptID))
			continue
		}
		var c continuation
		b, _ := marshalCompact(raw)
		if json.Unmarshal(b, &c) != nil || c.V != 1 || c.BatchIndex < 0 {
			return nil, false, stale("Generic interrupt continuation contains invalid fields.")
		}
		def, ok := r.interruptDefs[c.DefinitionID]
		if !ok {
			return nil, false, stale(fmt.Sprintf("Generic interrupt definition %s is unavailable.", c.DefinitionID))
		}
		if ids[e.InterruptID] || batch[c.BatchIndex] {
			return nil, false, stale("Generic interrupt continuation contains duplicate entries.")
		}
		ids[e.InterruptID], batch[c.BatchIndex] = true, true
		var want, wantPayload string
		if def.ResponseSchema != nil {
			want = hashValue(def.ResponseSchema)
		}
		if def.PayloadSchema != nil {
			wantPayload = hashValue(def.PayloadSchema)
		}
		if c.ResponseSchemaHash != want || c.PayloadSchemaHash != wantPayload {
			return nil, false, stale(fmt.Sprintf("Generic interrupt continuation %s does not match its definition.", e.InterruptID))
		}
		if c.ExpiresAt != "" {
			t, err := time.Parse(time.RFC3339Nano, c.ExpiresAt)
			switch {
			case err != nil:
				item(e.InterruptID, CodeInvalidPayload, fmt.Sprintf("Interrupt %s has an invalid expiresAt.", e.InterruptID))
				continue
			case !t.After(time.Now()):
				item(e.InterruptID, CodeExpired, fmt.Sprintf("Interrupt %s has expired.", e.InterruptID))
				continue
			}
		}
		switch e.Status {
		case agui.ResumeCancelled:
			if len(e.Payload) > 0 {
				item(e.InterruptID, CodeInvalidPayload, fmt.Sprintf("Cancelled interrupt %s must not include a payload.", e.InterruptID))
				continue
			}
		case agui.ResumeResolved:
			if def.ResponseSchema != nil {
				if err := validateJSON(def.ResponseSchema, e.Payload); err != nil {
					item(e.InterruptID, CodeInvalidPayload, fmt.Sprintf("Interrupt %s payload is invalid: %v", e.InterruptID, err))
					continue
				}
			}
		default:
			item(e.InterruptID, CodeInvalidPayload, fmt.Sprintf("Interrupt %s has invalid status %s.", e.InterruptID, e.Status))
			continue
		}
		out = append(out, InterruptResolution{InterruptID: e.InterruptID, Definition: c.DefinitionID, Key: c.Key,
			Status: e.Status, Payload: e.Payload, Metadata: e.Metadata})
	}
	return out, incomplete, nil
}

// resolveGeneric hands generic resolutions to OnInterruptResolution; the
// most restrictive tool policy wins: stop ends the run at once, cancel
// cancels every pending tool call.
func (r *run) resolveGeneric(res []InterruptResolution, pending []pendingInterrupt) error {
	if len(res) == 0 {
		return nil
	}
	for _, x := range res {
		if x.Status != agui.ResumeResolved && x.Status != agui.ResumeCancelled {
			return &ResumeError{Errors: []InterruptError{{Scope: "item", ThreadID: r.threadID, InterruptedRunID: r.opts.ParentRunID,
				InterruptID: x.InterruptID, Code: CodeInvalidPayload, Source: "client",
				Message: fmt.Sprintf("Interrupt %s has invalid status %s.", x.InterruptID, x.Status)}}}
		}
	}
	policy := ToolResumeContinue
	rank := map[ToolResume]int{"": 0, ToolResumeContinue: 0, ToolResumeCancel: 1, ToolResumeStop: 2}
	for _, m := range r.mws {
		if m.OnInterruptResolution == nil {
			continue
		}
		var p ToolResume
		if err := r.callHook(m, "onInterruptResolution", func() error {
			var err error
			p, err = m.OnInterruptResolution(r.mctx, res)
			return err
		}); err != nil {
			return err
		}
		if rank[p] > rank[policy] {
			policy = p
		}
	}
	switch policy {
	case ToolResumeStop:
		r.stopEarly()
	case ToolResumeCancel:
		for _, tc := range r.pendingFromMessages() {
			r.cancelledIDs[tc.ID] = true
		}
	}
	return nil
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

// pendingInterrupts rebuilds the parent run's tool interrupts from history:
// approvals first, then client tool executions, in history order.
func (r *run) pendingInterrupts() []pendingInterrupt {
	calls := r.pendingFromMessages()
	have := map[string]bool{}
	for _, c := range calls {
		have[c.ID] = true
	}
	resumeIDs := map[string]bool{}
	for _, e := range r.resume {
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

type approvalDecision struct {
	approved   bool
	editedArgs json.RawMessage
	payload    json.RawMessage
}
