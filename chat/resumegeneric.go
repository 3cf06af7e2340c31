package chat

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/goai-sdk/goai/agui"
)

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
// registered definitions. A structural problem rejects the whole batch at
// once (stale); an answer's problem is an item error in check.
func (r *run) checkGeneric(check *resumeCheck, items []ResumeItem) ([]InterruptResolution, error) {
	var out []InterruptResolution
	seen := genericSeen{ids: map[string]bool{}, batch: map[int]bool{}}
	for _, e := range items {
		if _, has := e.Metadata[continuationKey]; !has {
			check.unknown(e.InterruptID, fmt.Sprintf("Resume entry references unknown interrupt %s.", e.InterruptID))
			continue
		}
		c, def, err := r.genericContinuation(check, e, seen)
		if err != nil {
			return nil, err
		}
		if check.genericAnswer(e, c, def) {
			out = append(out, InterruptResolution{InterruptID: e.InterruptID, Definition: c.DefinitionID, Key: c.Key,
				Status: e.Status, Payload: e.Payload, Metadata: e.Metadata})
		}
	}
	return out, nil
}

// genericSeen is what a batch's generic answers claimed so far.
type genericSeen struct {
	ids   map[string]bool
	batch map[int]bool
}

// genericContinuation decodes the continuation an answer echoes and checks
// it still matches its definition; any mismatch makes the batch stale.
func (r *run) genericContinuation(check *resumeCheck, e ResumeItem, seen genericSeen) (continuation, InterruptDefinition, error) {
	var c continuation
	b, _ := marshalCompact(e.Metadata[continuationKey])
	if json.Unmarshal(b, &c) != nil || c.V != 1 || c.BatchIndex < 0 {
		return c, InterruptDefinition{}, check.stale("Generic interrupt continuation contains invalid fields.")
	}
	def, ok := r.interruptDef(c.DefinitionID)
	if !ok {
		return c, def, check.stale(fmt.Sprintf("Generic interrupt definition %s is unavailable.", c.DefinitionID))
	}
	if seen.ids[e.InterruptID] || seen.batch[c.BatchIndex] {
		return c, def, check.stale("Generic interrupt continuation contains duplicate entries.")
	}
	seen.ids[e.InterruptID], seen.batch[c.BatchIndex] = true, true
	if c.ResponseSchemaHash != schemaHash(def.ResponseSchema) || c.PayloadSchemaHash != schemaHash(def.PayloadSchema) {
		return c, def, check.stale(fmt.Sprintf("Generic interrupt continuation %s does not match its definition.", e.InterruptID))
	}
	return c, def, nil
}

// schemaHash is the hash a binding records for a definition's schema, ""
// for none.
func schemaHash(schema json.RawMessage) string {
	if schema == nil {
		return ""
	}
	return hashValue(schema)
}

// genericAnswer checks an answer to a generic interrupt: not expired, a
// known status, and a payload that fits the response schema.
func (c *resumeCheck) genericAnswer(e ResumeItem, cont continuation, def InterruptDefinition) bool {
	id := e.InterruptID
	if cont.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339Nano, cont.ExpiresAt)
		switch {
		case err != nil:
			c.item(id, CodeInvalidPayload, fmt.Sprintf("Interrupt %s has an invalid expiresAt.", id))
			return false
		case !t.After(time.Now()):
			c.item(id, CodeExpired, fmt.Sprintf("Interrupt %s has expired.", id))
			return false
		}
	}
	switch e.Status {
	case agui.ResumeCancelled:
		if len(e.Payload) > 0 {
			c.item(id, CodeInvalidPayload, fmt.Sprintf("Cancelled interrupt %s must not include a payload.", id))
			return false
		}
	case agui.ResumeResolved:
		if def.ResponseSchema != nil {
			if err := validateJSON(def.ResponseSchema, e.Payload); err != nil {
				c.item(id, CodeInvalidPayload, fmt.Sprintf("Interrupt %s payload is invalid: %v", id, err))
				return false
			}
		}
	default:
		c.item(id, CodeInvalidPayload, fmt.Sprintf("Interrupt %s has invalid status %s.", id, e.Status))
		return false
	}
	return true
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
