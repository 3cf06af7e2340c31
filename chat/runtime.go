package chat

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/goai-sdk/goai/agui"
)

// SandboxRuntime is what the engine provides to sandbox middleware
// (WithSandbox) so file events reach the run's hooks and stream.
type SandboxRuntime interface {
	// Emit dispatches a file event: it logs it, runs every middleware's
	// sandbox hooks without blocking the caller, and queues a sandbox.file
	// CUSTOM chunk for the stream.
	Emit(e FileEvent)
	// EmitFileDiff queues a sandbox.file.diff CUSTOM chunk.
	EmitFileDiff(path, diff string)
	// Logger is the run's debug logger.
	Logger() *Logger
}

// SandboxRuntimeCapability is provided by the engine to every run.
var SandboxRuntimeCapability = NewCapability[SandboxRuntime]("sandbox-runtime")

type sandboxRuntime struct{ r *run }

func (s sandboxRuntime) Logger() *Logger { return s.r.log }

func (s sandboxRuntime) Emit(e FileEvent) {
	r := s.r
	r.log.Log(CatSandbox, fmt.Sprintf("file %s %s", e.Type, e.Path))
	r.sandboxHooks.add(r, e)
	v, _ := marshalCompact(map[string]any{"type": e.Type, "path": e.Path, "timestamp": e.Timestamp})
	r.enqueue(agui.Event{Type: agui.Custom, Name: "sandbox.file", Value: v, Timestamp: now()})
}

// hookQueue runs run-scoped sandbox hooks off the caller's goroutine, one
// event at a time in arrival order, and within an event every middleware in
// order (OnFile, then the typed hook).
type hookQueue struct {
	mu      sync.Mutex
	pending []FileEvent
	running bool
	wg      sync.WaitGroup
}

func (q *hookQueue) add(r *run, e FileEvent) {
	has := false
	for _, m := range r.mws {
		if !m.Sandbox.empty() {
			has = true
			break
		}
	}
	if !has {
		return
	}
	q.mu.Lock()
	q.pending = append(q.pending, e)
	if q.running {
		q.mu.Unlock()
		return
	}
	q.running = true
	q.wg.Add(1)
	q.mu.Unlock()
	go q.drain(r)
}

func (q *hookQueue) drain(r *run) {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		e := q.pending[0]
		q.pending = q.pending[1:]
		q.mu.Unlock()
		for _, m := range r.mws {
			if m.Sandbox.empty() {
				continue
			}
			typed, typedName := m.Sandbox.OnFileChange, "onFileChange"
			switch e.Type {
			case "create":
				typed, typedName = m.Sandbox.OnFileCreate, "onFileCreate"
			case "delete":
				typed, typedName = m.Sandbox.OnFileDelete, "onFileDelete"
			}
			r.runSandboxHook(m, "onFile", m.Sandbox.OnFile, e)
			r.runSandboxHook(m, typedName, typed, e)
		}
	}
}

// wait blocks until every queued event's hooks ran.
func (q *hookQueue) wait() { q.wg.Wait() }

func (r *run) runSandboxHook(m *Middleware, name string, h func(*Context, FileEvent) error, e FileEvent) {
	if h == nil {
		return
	}
	mname := m.Name
	if mname == "" {
		mname = "unnamed"
	}
	defer func() {
		if p := recover(); p != nil {
			// Sandbox hooks are isolated: logged with the stack, the run goes on.
			r.recovered(fmt.Sprintf("middleware %q %s", mname, name), p)
		}
	}()
	if err := h(r.mctx, e); err != nil {
		r.log.Log(CatErrors, fmt.Sprintf("hook=%s middleware=%s threw: %v", name, mname, err))
	}
}

func (s sandboxRuntime) EmitFileDiff(path, diff string) {
	v, _ := marshalCompact(map[string]any{"path": path, "diff": diff})
	s.r.enqueue(agui.Event{Type: agui.Custom, Name: "sandbox.file.diff", Value: v, Timestamp: now()})
}

func (r *run) provideRuntime() {
	r.caps[SandboxRuntimeCapability] = SandboxRuntime(sandboxRuntime{r})
	r.caps[RunDisconnectCapability] = r.disconnect
	r.caps[ToolRunnerCapability] = ToolRunner(toolRunner{r})
}

// enqueue adds a chunk made on another goroutine; the run goroutine pipes
// it through middleware at its next drain point.
func (r *run) enqueue(ev agui.Event) {
	r.queueMu.Lock()
	r.queue = append(r.queue, ev)
	r.queueMu.Unlock()
	select {
	case r.queueSig <- struct{}{}:
	default:
	}
}

// drainQueue pipes queued chunks to the consumer, after a synthetic
// RUN_STARTED if none was sent yet.
func (r *run) drainQueue() error {
	for {
		r.queueMu.Lock()
		if len(r.queue) == 0 {
			r.queueMu.Unlock()
			return nil
		}
		batch := r.queue
		r.queue = nil
		r.queueMu.Unlock()
		if err := r.syntheticRunStarted(r.syntheticFinished(agui.FinishToolCalls)); err != nil {
			return err
		}
		for _, ev := range batch {
			if err := r.pipe(ev); err != nil {
				return err
			}
		}
	}
}

// boundary asks OnInterruptBoundary at a phase; requests pause the run.
func (r *run) boundary(phase Phase) (bool, error) { return r.boundaryWith(phase, nil) }

func (r *run) boundaryWith(phase Phase, calls []agui.ToolCall) (bool, error) {
	r.mctx.Phase = phase
	reqs, err := r.interruptRequests()
	if err != nil || len(reqs) == 0 {
		return false, err
	}
	if phase == PhaseAfterModel {
		if r.calls.has() {
			r.addAssistantToolCallMessage(r.calls.list())
		} else {
			r.addTerminalAssistantMessage()
		}
	}
	fin := r.finishedOrSynthetic()
	if err := r.interruptTerminal(fin, nil, nil, reqs); err != nil {
		return false, err
	}
	r.toolPhase = phaseWait
	return true, nil
}

func (r *run) interruptRequests() ([]InterruptRequest, error) {
	var all []InterruptRequest
	for _, m := range r.mws {
		if m.OnInterruptBoundary == nil {
			continue
		}
		var reqs []InterruptRequest
		if err := r.callHook(m, "onInterruptBoundary", func() error {
			var err error
			reqs, err = m.OnInterruptBoundary(r.mctx)
			return err
		}); err != nil {
			return nil, err
		}
		for _, q := range reqs {
			def, ok := r.interruptDef(q.Definition)
			if !ok {
				return nil, fmt.Errorf("generic interrupt definition %q is not registered on this chat (Options.Interrupts)", q.Definition)
			}
			if def.PayloadSchema != nil && q.Payload != nil {
				b, _ := marshalCompact(q.Payload)
				if err := validateJSON(def.PayloadSchema, b); err != nil {
					return nil, fmt.Errorf("interrupt %q payload: %w", q.Definition, err)
				}
			}
		}
		all = append(all, reqs...)
	}
	return all, nil
}

// interruptTerminal ends a paused run: [RUN_STARTED] MESSAGES_SNAPSHOT
// [STATE_SNAPSHOT] RUN_FINISHED{outcome interrupt} (docs/engine.md §6).
func (r *run) interruptTerminal(fin agui.Event, approvals []PendingApproval, clients []PendingClientCall, generic []InterruptRequest) error {
	if err := r.syntheticRunStarted(fin); err != nil {
		return err
	}
	interrupts := r.buildInterrupts(approvals, clients, generic)
	// The terminal keeps the turn's RUN_FINISHED fields (usage, model).
	term := fin
	term.Timestamp = now()
	term.FinishReason = ""
	term.Outcome = &agui.Outcome{Type: "interrupt", Interrupts: interrupts}
	if term.ThreadID == "" {
		term.ThreadID = r.threadID
	}
	if term.RunID == "" {
		term.RunID = r.runID()
	}
	term = agui.WithTanstack(term, map[string]any{"finishReason": agui.FinishToolCalls})
	// The terminal passes OnChunk before the snapshots do (as 0.58.0).
	var outs []agui.Event
	r.held = &outs
	err := r.chunkChain(&term, 0, false)
	r.held = nil
	if err != nil {
		return err
	}
	if err := r.pipe(r.messagesSnapshot()); err != nil {
		return err
	}
	if r.opts.State != nil {
		if err := r.pipe(agui.Event{Type: agui.StateSnapshot, Timestamp: now(), Snapshot: r.opts.State}); err != nil {
			return err
		}
	}
	for _, ev := range outs {
		r.emit(ev)
	}
	return nil
}

func (r *run) messagesSnapshot() agui.Event {
	raw := agui.MarshalWireMessages(agui.SnapshotMessages(r.messages, r.runID()))
	return agui.Event{Type: agui.MessagesSnapshot, Timestamp: now(), Messages: raw}
}

// buildInterrupts lists a paused run's interrupts: approvals, client tool
// executions, then generic ones, each bound to the schemas it was issued
// under (docs/engine.md §6).
func (r *run) buildInterrupts(approvals []PendingApproval, clients []PendingClientCall, generic []InterruptRequest) []agui.Interrupt {
	var out []agui.Interrupt
	byName := map[string]*Tool{}
	for _, t := range r.tools {
		byName[t.Name] = t
	}
	for _, a := range approvals {
		out = append(out, r.approvalInterrupt(a, byName[a.ToolName]))
	}
	for _, c := range clients {
		out = append(out, r.clientInterrupt(c, byName[c.ToolName]))
	}
	for _, g := range generic {
		out = append(out, r.genericInterrupt(g, len(out)))
	}
	return out
}

// approvalInterrupt asks for a decision on a call of t (nil: a tool the run
// no longer has).
func (r *run) approvalInterrupt(a PendingApproval, t *Tool) agui.Interrupt {
	var inSchema, apSchema json.RawMessage
	if t != nil {
		inSchema, apSchema = t.InputSchema, t.ApprovalSchema
	}
	resp := approvalResponseSchema(inSchema, apSchema)
	binding := map[string]any{
		"v": 1, "kind": "tool-approval", "interruptId": a.ApprovalID, "toolName": a.ToolName, "toolCallId": a.ToolCallID,
		"originalArgs": json.RawMessage(a.Input), "inputSchemaHash": hashSchema(inSchema),
		"approvalSchemaHash": hashValue(map[string]any{"approve": rawOrNil(apSchema), "reject": rawOrNil(apSchema)}),
		"responseSchemaHash": hashValue(resp), "interruptedRunId": r.runID(), "generation": 0,
	}
	return agui.Interrupt{ID: a.ApprovalID, Reason: "tool_call", Message: "Approval required to run " + a.ToolName,
		ToolCallID: a.ToolCallID, ResponseSchema: mustJSON(resp),
		Metadata: map[string]any{"kind": "approval", "toolName": a.ToolName, "input": json.RawMessage(a.Input), bindingKey: binding}}
}

// clientInterrupt hands a call of the client tool t to the client.
func (r *run) clientInterrupt(c PendingClientCall, t *Tool) agui.Interrupt {
	var outSchema json.RawMessage
	if t != nil {
		outSchema = t.OutputSchema
	}
	resp := any(map[string]any{})
	if outSchema != nil {
		resp = json.RawMessage(outSchema)
	}
	id := "client_tool_" + c.ToolCallID
	binding := map[string]any{
		"v": 1, "kind": "client-tool-execution", "interruptId": id, "toolName": c.ToolName, "toolCallId": c.ToolCallID,
		"outputSchemaHash": hashSchema(outSchema), "responseSchemaHash": hashValue(resp),
		"interruptedRunId": r.runID(), "generation": 0,
	}
	return agui.Interrupt{ID: id, Reason: "tanstack:client_tool_execution", Message: "Client tool " + c.ToolName + " is ready to run",
		ToolCallID: c.ToolCallID, ResponseSchema: mustJSON(resp),
		Metadata: map[string]any{"kind": "client_tool", "toolName": c.ToolName, "input": json.RawMessage(c.Input), bindingKey: binding}}
}

// genericInterrupt is a middleware's interrupt request, at batchIndex in
// the batch.
func (r *run) genericInterrupt(g InterruptRequest, batchIndex int) agui.Interrupt {
	id := newID("interrupt")
	def, _ := r.interruptDef(g.Definition)
	binding := map[string]any{"v": 1, "kind": "generic", "interruptId": id, "batchIndex": batchIndex,
		"interruptedRunId": r.runID(), "generation": 0, "definitionId": g.Definition, "key": g.Key}
	if def.ResponseSchema != nil {
		binding["responseSchemaHash"] = hashValue(def.ResponseSchema)
	}
	if def.PayloadSchema != nil {
		binding["payloadSchemaHash"] = hashValue(def.PayloadSchema)
	}
	if g.ExpiresAt != "" {
		binding["expiresAt"] = g.ExpiresAt
	}
	md := map[string]any{bindingKey: binding}
	for k, v := range g.Metadata {
		md[k] = v
	}
	if g.Payload != nil {
		md[interruptPayloadKey] = g.Payload
	}
	return agui.Interrupt{ID: id, Reason: g.Reason, Message: g.Message, ResponseSchema: def.ResponseSchema,
		ExpiresAt: g.ExpiresAt, Metadata: md}
}

const (
	bindingKey          = "tanstack:interruptBinding"
	interruptPayloadKey = "tanstack:interruptPayload"
	continuationKey     = "tanstack:interruptContinuation"
)

func rawOrNil(r json.RawMessage) any {
	if r == nil {
		return nil
	}
	return r
}

func mustJSON(v any) json.RawMessage {
	b, err := marshalCompact(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

func approvalResponseSchema(input, approval json.RawMessage) any {
	approve := map[string]any{"approved": map[string]any{"const": true}}
	reject := map[string]any{"approved": map[string]any{"const": false}}
	if input != nil {
		approve["editedArgs"] = json.RawMessage(input)
	}
	reqA, reqR := []string{"approved"}, []string{"approved"}
	if approval != nil {
		approve["payload"] = json.RawMessage(approval)
		reject["payload"] = json.RawMessage(approval)
		reqA, reqR = append(reqA, "payload"), append(reqR, "payload")
	}
	return map[string]any{"oneOf": []any{
		map[string]any{"type": "object", "properties": approve, "required": reqA, "additionalProperties": false},
		map[string]any{"type": "object", "properties": reject, "required": reqR, "additionalProperties": false},
	}}
}

// eventQueue holds CUSTOM chunks emitted from other goroutines (tools,
// sandbox watchers) until the run goroutine pipes them.
type eventQueue struct {
	queueMu  sync.Mutex
	queue    []agui.Event
	queueSig chan struct{}
}
