// Package chat is the goai chat engine: the agent loop that streams AG-UI
// events from a model adapter, runs tools, and passes every step through a
// middleware chain, as TanStack AI's chat() does.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/goai-sdk/goai/agui"
)

// Options configures one chat run.
type Options struct {
	Adapter       Adapter
	Messages      []agui.ModelMessage
	SystemPrompts []SystemPrompt
	Tools         []*Tool
	// ModelOptions are provider-native options (temperature, max tokens...)
	// under each provider's own keys.
	ModelOptions map[string]any
	// Metadata is for observability; adapters may forward it.
	Metadata   map[string]any
	Middleware []*Middleware
	// UserContext is an opaque value handed to tools and middleware.
	UserContext any
	// ThreadID defaults to "thread-<ms>-<rand>". RunID defaults to the
	// request id. ParentRunID names the interrupted run on resume.
	ThreadID, RunID, ParentRunID string
	// State is echoed as STATE_SNAPSHOT before an interrupt terminal.
	State json.RawMessage
	// Resume answers the parent run's interrupts.
	Resume []ResumeItem
	// Strategy decides whether to run another iteration; default MaxIterations(5).
	Strategy Strategy
	// OutputSchema requests structured output (JSON Schema).
	OutputSchema json.RawMessage
	// Debug selects logging; nil logs errors only.
	Debug *Debug
	// Interrupts registers the generic interrupt definitions middleware may
	// raise through OnInterruptBoundary.
	Interrupts []InterruptDefinition
	// LazyTools configures how Lazy tools are advertised.
	LazyTools LazyTools
	// Disconnect is the run's disconnect notifier, owned by the transport
	// (nil: the engine makes one nobody notifies).
	Disconnect *RunDisconnect
	// Profile is the wire profile the run's events are written in.
	// agui.ProfileTanStack reproduces @tanstack/ai 0.58.0 exactly, its
	// silent failures included; the default (agui.ProfileAGUI) keeps every
	// text message of a turn in the conversation (and so in
	// MESSAGES_SNAPSHOT) and answers a tool call the engine will not run
	// with a TOOL_CALL_RESULT saying why.
	Profile agui.Profile
}

// RunError is a run failure reported by the model (an adapter RUN_ERROR)
// or by the engine (structured output, interrupts).
type RunError struct {
	Message string
	Code    string
	// Err is the failure behind an engine-made RunError (a *PanicError
	// for CodeInternal), nil for one the model reported.
	Err error
}

func (e *RunError) Error() string { return e.Message }

func (e *RunError) Unwrap() error { return e.Err }

// HookError is a middleware hook that failed or panicked.
type HookError struct {
	Middleware string
	Hook       string
	Err        error
}

func (e *HookError) Error() string {
	return fmt.Sprintf("middleware %q %s: %v", e.Middleware, e.Hook, e.Err)
}

func (e *HookError) Unwrap() error { return e.Err }

// ErrCancelRequested is the cause to cancel a run's context with when a
// user explicitly stopped it; OnAbort then reports CancelRequested.
var ErrCancelRequested = errors.New(CancelRequestedReason)

// abortError carries a middleware abort reason through context.Cause.
type abortError struct{ reason string }

func (e *abortError) Error() string { return e.reason }

// errConsumerGone is the cause when the consumer stops iterating.
var errConsumerGone = errors.New("stream consumer stopped")

// Check runs the synchronous pre-flight checks of a run: adapter present,
// unique tool names, capability requirements met.
func Check(opts *Options) error {
	if opts.Adapter == nil {
		return errors.New("chat: Options.Adapter is nil")
	}
	if err := checkUniqueTools(opts.Tools); err != nil {
		return err
	}
	for i, m := range opts.Middleware {
		if m == nil {
			return fmt.Errorf("chat: Options.Middleware[%d] is nil", i)
		}
	}
	seen := map[string]bool{}
	for _, d := range opts.Interrupts {
		if d.ID == "" || seen[d.ID] {
			return fmt.Errorf("chat: interrupt definition ids must be unique and non-empty (%q)", d.ID)
		}
		seen[d.ID] = true
	}
	return validateCapabilities(opts)
}

func validateCapabilities(opts *Options) error {
	provided := map[CapabilityKey]bool{}
	var names []string
	for _, m := range opts.Middleware {
		for _, p := range m.Provides {
			provided[p] = true
			names = append(names, fmt.Sprintf("%q", p.Name()))
		}
	}
	check := func(who string, reqs []CapabilityKey) error {
		for _, q := range reqs {
			if !provided[q] {
				list := "none"
				if len(names) > 0 {
					list = strings.Join(names, ", ")
				}
				return fmt.Errorf("chat: %s requires capability %q, but no middleware provides it (provided: %s)", who, q.Name(), list)
			}
		}
		return nil
	}
	if rq, ok := opts.Adapter.(CapabilityRequirer); ok {
		if err := check(fmt.Sprintf("adapter %q", opts.Adapter.Name()), rq.Requires()); err != nil {
			return err
		}
	}
	for _, m := range opts.Middleware {
		if err := check(fmt.Sprintf("middleware %q", m.Name), m.Requires); err != nil {
			return err
		}
	}
	return nil
}

// Stream runs the chat and returns its events. The iterator yields a
// non-nil error once, last, when the run fails with a thrown error (a
// failing hook or adapter) or is aborted (*AbortError, matching ErrAborted);
// an adapter RUN_ERROR is an event, not an error. Stopping the iteration
// early aborts the run (OnAbort fires).
func Stream(ctx context.Context, opts Options) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		r, err := start(ctx, &opts, yield)
		if err != nil {
			yield(agui.Event{}, err)
			return
		}
		defer r.cancel(nil)
		r.execute()
	}
}

// Text runs the chat and returns the concatenated text deltas. An adapter
// RUN_ERROR becomes a *RunError; an aborted run an *AbortError.
func Text(ctx context.Context, opts Options) (string, error) {
	var b strings.Builder
	for ev, err := range Stream(ctx, opts) {
		if err != nil {
			return b.String(), err
		}
		switch ev.Type {
		case agui.TextMessageContent:
			b.WriteString(ev.Delta)
		case agui.RunError:
			return b.String(), &RunError{Message: ev.Message, Code: ev.Code}
		}
	}
	return b.String(), nil
}

// start checks the options and builds the run; a panic in the adapter's or
// a middleware's methods called meanwhile is an internal failure.
func start(ctx context.Context, opts *Options, yield func(agui.Event, error) bool) (r *run, err error) {
	defer func() {
		if p := recover(); p != nil {
			pe := &PanicError{Source: "chat setup", Value: p, Stack: debug.Stack()}
			NewLogger(opts.Debug).Log(CatErrors, "chat setup panicked: "+fmt.Sprint(p), slog.String("stack", string(pe.Stack)))
			r, err = nil, internalError(pe)
		}
	}()
	if err := Check(opts); err != nil {
		return nil, err
	}
	return newRun(ctx, opts, yield), nil
}

// toolPhase is what the last tool phase decided for the loop.
type toolPhase uint8

const (
	phaseContinue toolPhase = iota // run another model turn if the strategy agrees
	phaseStop                      // the loop ends: nothing more to run
	phaseWait                      // the run paused on interrupts
)

type cyclePhase uint8

const (
	cycleText cyclePhase = iota
	cycleTools
)

// run is the state of one chat invocation.
type run struct {
	opts     *Options
	tanstack bool // Options.Profile is agui.ProfileTanStack
	yield    func(agui.Event, error) bool
	stopped  bool // the consumer stopped iterating
	// yielding is set while the consumer's loop body runs; a panic seen
	// with it set is the consumer's own and is never recovered.
	yielding bool

	callerCtx context.Context
	runCtx    context.Context
	cancel    context.CancelCauseFunc
	mctx      *Context
	log       *Logger
	mws       []*Middleware
	chunkMws  []*Middleware // middleware with OnChunk, in order
	hookCopy  []hookChunk   // the copy each of chunkMws may write to

	requestID string
	threadID  string
	start     time.Time

	messages      []agui.ModelMessage
	systemPrompts []SystemPrompt
	tools         []*Tool
	modelOptions  map[string]any
	metadata      map[string]any
	resume        []ResumeItem

	iterationCount        int
	cycle                 cyclePhase
	toolPhase             toolPhase
	toolCallCount         int
	lastTurnToolCallCount int
	countedCalls          map[string]bool

	// current turn
	currentMessageID    string
	currentCreatedAt    time.Time
	identityCaptured    bool
	accumulated         []byte              // the turn's text so far
	textStart           int                 // agui profile: where the current text message starts in accumulated
	turnTexts           []agui.ModelMessage // agui profile: the turn's earlier text messages
	thinking            []agui.Thinking
	thinkingContent     string
	thinkingSignature   string
	finished            *agui.Event // raw RUN_FINISHED of the turn
	lastFinishReason    string
	calls               toolCallAccumulator
	streamedToolErrors  map[string]ToolResult
	streamedErrorOrder  []string
	heldModelFinished   []agui.Event
	heldToolFinished    []agui.Event
	hasPublicRunStarted bool
	earlyTermination    bool
	finalizationError   *RunError
	terminalHookCalled  bool
	middlewareAborted   bool

	so *structuredState // nil unless Options.OutputSchema is set

	chunk agui.Event // the model chunk in flight (see streamModelTurn)
	// held, when set, collects emitted events instead of yielding them (an
	// interrupt terminal passes OnChunk before the snapshots are sent).
	held *[]agui.Event

	disconnect    *RunDisconnect
	lazy          *lazyManager // nil without lazy tools
	interruptDefs map[string]InterruptDefinition
	aborted       *AbortError // set when OnAbort ran

	caps  map[CapabilityKey]any
	capMu sync.Mutex

	deferMu  sync.Mutex
	deferred []func(context.Context) error

	// queue of CUSTOM chunks emitted from other goroutines (tools, sandbox)
	queueMu  sync.Mutex
	queue    []agui.Event
	queueSig chan struct{}

	sandboxHooks hookQueue

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

func newRun(ctx context.Context, opts *Options, yield func(agui.Event, error) bool) *run {
	r := &run{opts: opts, yield: yield, callerCtx: ctx, start: time.Now(), tanstack: opts.Profile == agui.ProfileTanStack}
	r.runCtx, r.cancel = context.WithCancelCause(ctx)
	r.log = NewLogger(opts.Debug)
	r.requestID = newID("chat")
	r.threadID = opts.ThreadID
	if r.threadID == "" {
		r.threadID = newID("thread")
	}
	r.mws = opts.Middleware
	for _, m := range r.mws {
		if m.OnChunk != nil {
			r.chunkMws = append(r.chunkMws, m)
		}
	}
	r.hookCopy = make([]hookChunk, len(r.chunkMws))
	r.messages = append([]agui.ModelMessage(nil), opts.Messages...)
	r.systemPrompts = append([]SystemPrompt(nil), opts.SystemPrompts...)
	r.tools = append([]*Tool(nil), opts.Tools...)
	if r.lazy = newLazyManager(r.tools, opts.Messages, opts.LazyTools); r.lazy != nil {
		r.tools = r.lazy.active()
	}
	r.modelOptions = opts.ModelOptions
	r.metadata = opts.Metadata
	r.resume = opts.Resume
	r.toolPhase = phaseContinue
	r.countedCalls = map[string]bool{}
	r.streamedToolErrors = map[string]ToolResult{}
	r.caps = map[CapabilityKey]any{}
	r.queueSig = make(chan struct{}, 1)
	r.approvals = map[string]approvalDecision{}
	r.clientResults = map[string]json.RawMessage{}
	r.cancelledIDs = map[string]bool{}
	r.deniedResults = map[string]any{}
	runID := opts.RunID
	if runID == "" {
		runID = r.requestID
	}
	r.mctx = &Context{
		ctx:          r.runCtx,
		RequestID:    r.requestID,
		StreamID:     newID("stream"),
		RunID:        runID,
		ParentRunID:  opts.ParentRunID,
		ThreadID:     r.threadID,
		Phase:        PhaseInit,
		Provider:     opts.Adapter.Name(),
		Model:        opts.Adapter.Model(),
		MessageCount: len(opts.Messages),
		UserContext:  opts.UserContext,
		run:          r,
	}
	r.syncContext()
	r.mctx.Metadata = opts.Metadata
	// The empty id is the ad-hoc definition: no schemas to check.
	r.interruptDefs = map[string]InterruptDefinition{"": {}}
	for _, d := range opts.Interrupts {
		r.interruptDefs[d.ID] = d
	}
	r.so = newStructuredState(opts)
	r.disconnect = opts.Disconnect
	if r.disconnect == nil {
		r.disconnect = NewRunDisconnect()
	}
	r.disconnect.attach(context.WithoutCancel(r.runCtx), r.log)
	r.provideRuntime()
	return r
}

func (r *run) syncContext() {
	c := r.mctx
	c.Messages = r.messages
	c.SystemPrompts = r.systemPrompts
	c.HasTools = len(r.tools) > 0
	names := make([]string, len(r.tools))
	for i, t := range r.tools {
		names[i] = t.Name
	}
	c.ToolNames = names
	c.ModelOptions = r.modelOptions
}

func (r *run) runID() string { return r.mctx.RunID }

func (r *run) abort(reason string) {
	r.middlewareAborted = true
	r.cancel(&abortError{reason: reason})
}

func (r *run) cancelled() bool { return r.runCtx.Err() != nil }

func (r *run) abortReason() string {
	cause := context.Cause(r.runCtx)
	if cause == nil {
		return ""
	}
	var ae *abortError
	if errors.As(cause, &ae) {
		return ae.reason
	}
	return cause.Error()
}

// emit hands an event to the consumer.
func (r *run) emit(ev agui.Event) {
	if r.held != nil {
		*r.held = append(*r.held, ev)
		return
	}
	if r.stopped {
		return
	}
	if r.log.Enabled(CatOutput) {
		r.log.Log(CatOutput, "type="+string(ev.Type))
	}
	r.yielding = true
	ok := r.yield(ev, nil)
	r.yielding = false
	if !ok {
		r.stopped = true
		r.cancel(errConsumerGone)
		return
	}
	r.mctx.ChunkIndex++
}

func now() int64 { return time.Now().UnixMilli() }

// execute is the run algorithm (core.md §1.2).
func (r *run) execute() {
	r.log.Log(CatAgentLoop, "run started", slog.String("threadId", r.threadID))
	err := r.guardedBody()
	var rerr *ResumeError
	if errors.As(err, &rerr) && !r.terminalHookCalled {
		// A rejected resume: onError, then one RUN_ERROR; nothing ran.
		r.terminalHookCalled = true
		r.log.Log(CatErrors, "chat interrupt resume failed", slog.String("error", err.Error()))
		r.runOnError(&RunError{Message: rerr.Error(), Code: rerr.Code()})
		r.emit(r.resumeErrorEvent(rerr))
		err = nil
	}
	if err != nil && !r.terminalHookCalled && r.cancelled() && !isPanic(err) {
		// A hook that failed because the run was cancelled under it (a
		// client gone during a slow setup) is an abort, not an error.
		r.terminalHookCalled = true
		r.runAbort(r.abortReason())
		err = nil
	}
	if err != nil && !r.terminalHookCalled {
		r.terminalHookCalled = true
		var ae *abortError
		if errors.As(err, &ae) {
			r.runAbort(ae.reason)
			err = nil
		} else {
			r.log.Log(CatErrors, "chat run failed", slog.String("error", err.Error()), slog.String("threadId", r.threadID))
			r.runOnError(err)
		}
	}
	if !r.terminalHookCalled && r.cancelled() {
		r.terminalHookCalled = true
		r.runAbort(r.abortReason())
	}
	r.finish()
	switch {
	case r.stopped:
	case r.aborted != nil:
		// No terminal event: the stream ends with the abort as its error, so
		// transports can tell an abort from a run that simply ended.
		r.yield(agui.Event{}, r.aborted)
	case err != nil:
		var ae *abortError
		if !errors.As(err, &ae) {
			r.yield(agui.Event{}, internalError(err))
		}
	}
}

// ErrAborted matches the *AbortError that ends an aborted run's stream.
var ErrAborted = errors.New("chat: run aborted")

// AbortError ends the stream of a run stopped by its caller's context, by
// a middleware's Abort or by an abort decision. The run yielded no
// terminal event (as in 0.58.0); OnAbort has run.
type AbortError struct {
	Reason          string
	CancelRequested bool
}

func (e *AbortError) Error() string { return "chat: run aborted: " + e.Reason }

// Is reports whether target is ErrAborted.
func (e *AbortError) Is(target error) bool { return target == ErrAborted }

// finish waits for sandbox hooks, delivers events queued during the
// terminal hooks (a sandbox draining its watcher), and runs deferred work.
func (r *run) finish() {
	r.disconnect.terminal()
	defer r.disconnect.wait()
	r.sandboxHooks.wait()
	if !r.stopped {
		if err := r.drainQueue(); err != nil {
			r.log.Log(CatErrors, "delivering queued events after the run failed: "+err.Error())
		}
		r.sandboxHooks.wait()
	}
	r.deferMu.Lock()
	fns := r.deferred
	r.deferred = nil
	r.deferMu.Unlock()
	if len(fns) == 0 {
		return
	}
	ctx := context.WithoutCancel(r.runCtx)
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					r.recovered("deferred work", p) // isolated, like its errors
				}
			}()
			_ = fn(ctx)
		})
	}
	wg.Wait()
}

func (r *run) body() error {
	if err := r.runSetup(); err != nil {
		return err
	}
	r.mctx.Phase = PhaseInit
	if err := r.runConfig(); err != nil {
		return err
	}
	if err := r.applyResume(); err != nil {
		return err
	}
	if err := r.eachHook("onStart", func(m *Middleware) error {
		if m.OnStart == nil {
			return nil
		}
		return m.OnStart(r.mctx)
	}); err != nil {
		return err
	}
	if r.cancelled() {
		return nil
	}
	if r.earlyTermination {
		return r.successfulEarlyTermination()
	}
	wait, err := r.pendingToolCalls()
	if err != nil || wait {
		return err
	}
	skipLoop := r.so != nil && !r.so.combined && len(r.tools) == 0
	for !skipLoop {
		if r.earlyTermination || r.cancelled() {
			break
		}
		if r.cycle == cycleText {
			r.log.Log(CatAgentLoop, fmt.Sprintf("iteration=%d", r.mctx.Iteration))
			if err := r.beginIteration(); err != nil {
				return err
			}
			r.mctx.Phase = PhaseBeforeModel
			r.mctx.Iteration = r.iterationCount
			if err := r.runConfig(); err != nil {
				return err
			}
			if paused, err := r.boundary(PhaseBeforeModel); err != nil || paused {
				return err
			}
			if err := r.streamModelTurn(); err != nil {
				return err
			}
			if r.earlyTermination || r.cancelled() {
				break
			}
			if paused, err := r.boundary(PhaseAfterModel); err != nil || paused {
				return err
			}
			if r.shouldExecuteToolPhase() {
				r.heldToolFinished = append(r.heldToolFinished, r.heldModelFinished...)
				r.heldModelFinished = nil
			} else if r.so == nil || !r.so.combined {
				r.flushHeld(&r.heldModelFinished)
			}
			r.cycle = cycleTools
			continue // the tool cycle always follows
		}
		if err := r.processToolCalls(); err != nil {
			return err
		}
		if r.cancelled() {
			return nil
		}
		r.cycle = cycleText
		r.iterationCount++
		// 0.58.0 asks onShouldContinue even after a pause.
		cont, err := r.shouldContinue()
		if err != nil {
			return err
		}
		if !cont || r.toolPhase == phaseWait {
			break
		}
	}
	r.log.Log(CatAgentLoop, "run finished", slog.String("finishReason", r.lastFinishReason))
	if r.cancelled() || r.toolPhase == phaseWait || r.terminalHookCalled {
		return nil
	}
	if r.so != nil && r.finalizationError == nil && !r.earlyTermination {
		if r.so.combined {
			if err := r.harvestCombined(); err != nil {
				return err
			}
			if r.finalizationError == nil && !r.cancelled() {
				r.flushHeld(&r.heldModelFinished)
			}
		} else if err := r.structuredFinalization(); err != nil {
			return err
		}
		if r.cancelled() {
			return nil
		}
	}
	if r.finalizationError != nil {
		r.terminalHookCalled = true
		r.runOnError(r.finalizationError)
		return nil
	}
	r.addTerminalAssistantMessage()
	r.terminalHookCalled = true
	return r.runOnFinish()
}

func (r *run) shouldExecuteToolPhase() bool {
	return r.lastFinishReason == agui.FinishToolCalls && len(r.tools) > 0 && r.calls.has()
}

func (r *run) beginIteration() error {
	r.currentMessageID = newID("msg")
	r.currentCreatedAt = time.Now()
	r.identityCaptured = false
	r.accumulated = r.accumulated[:0]
	r.textStart, r.turnTexts = 0, nil
	r.thinking = nil
	r.thinkingContent, r.thinkingSignature = "", ""
	r.finished = nil
	clear(r.streamedToolErrors)
	r.streamedErrorOrder = r.streamedErrorOrder[:0]
	r.mctx.CurrentMessageID = r.currentMessageID
	info := IterationInfo{Iteration: r.iterationCount, MessageID: r.currentMessageID}
	return r.eachHook("onIteration", func(m *Middleware) error {
		if m.OnIteration == nil {
			return nil
		}
		return m.OnIteration(r.mctx, info)
	})
}

func (r *run) loopState() LoopState {
	return LoopState{
		IterationCount:        r.iterationCount,
		Messages:              r.messages,
		FinishReason:          r.lastFinishReason,
		ToolCallCount:         r.toolCallCount,
		LastTurnToolCallCount: r.lastTurnToolCallCount,
	}
}

func (r *run) shouldContinue() (bool, error) {
	st := r.loopState()
	strategy := r.opts.Strategy
	if strategy == nil {
		strategy = MaxIterations(5)
	}
	var ok bool
	if err := r.guard("agent loop strategy", func() { ok = strategy(st) }); err != nil {
		return false, err
	}
	mwOK := true
	for _, m := range r.mws {
		if m.OnShouldContinue == nil {
			continue
		}
		var v bool
		if err := r.callHook(m, "onShouldContinue", func() error {
			var err error
			v, err = m.OnShouldContinue(r.mctx, st)
			return err
		}); err != nil {
			return false, err
		}
		if !v {
			mwOK = false
			break
		}
	}
	return ok && mwOK && r.toolPhase == phaseContinue, nil
}

// streamModelTurn runs one adapter call (core.md §1.3).
func (r *run) streamModelTurn() error {
	r.mctx.Phase = PhaseModelStream
	req := r.buildRequest()
	if r.log.Enabled(CatRequest) {
		r.log.Log(CatRequest, fmt.Sprintf("activity=chat provider=%s model=%s messages=%d tools=%d stream=true",
			r.mctx.Provider, r.mctx.Model, len(r.messages), len(r.tools)))
	}
	stream := r.guardStream(r.adapterLabel(), func() iter.Seq2[agui.Event, error] { return r.opts.Adapter.ChatStream(r.runCtx, req) })
	for raw, err := range stream {
		if err != nil {
			if r.cancelled() {
				return nil
			}
			return err
		}
		if r.cancelled() {
			break
		}
		if r.log.Enabled(CatProvider) {
			r.log.Log(CatProvider, "chunk", slog.Any("chunk", raw))
		}
		r.handleRaw(&raw)
		// The chunk travels through the hooks by pointer; a run-owned slot
		// keeps that from costing a heap copy per chunk.
		r.chunk = raw
		if r.so != nil && r.so.combined {
			if r.chunk, err = r.structuredModelChunk(&raw); err != nil {
				return err
			}
		}
		if err := r.chunkChain(&r.chunk, 0, true); err != nil {
			return err
		}
		if raw.Type == agui.RunFinished && raw.Usage != nil {
			if err := r.runOnUsage(*raw.Usage); err != nil {
				return err
			}
		}
		if err := r.drainQueue(); err != nil {
			return err
		}
		if r.earlyTermination {
			break
		}
	}
	return r.drainQueue()
}

func (r *run) buildRequest() *Request {
	specs := make([]ToolSpec, len(r.tools))
	for i, t := range r.tools {
		specs[i] = ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Metadata: t.Metadata}
	}
	approvals := make(map[string]bool, len(r.approvals))
	for id, d := range r.approvals {
		approvals[id] = d.approved
	}
	return &Request{
		Model:         r.mctx.Model,
		Messages:      r.messages,
		Tools:         specs,
		Metadata:      r.metadata,
		ModelOptions:  r.modelOptions,
		SystemPrompts: r.systemPrompts,
		Logger:        r.log,
		ThreadID:      r.threadID,
		RunID:         r.opts.RunID,
		ParentRunID:   r.opts.ParentRunID,
		Capabilities:  r.mctx,
		Approvals:     approvals,
		OutputSchema:  r.combinedSchema(),
	}
}

func (r *run) combinedSchema() json.RawMessage {
	if r.so != nil && r.so.combined {
		return r.so.schema
	}
	return nil
}

// handleRaw updates engine state from the raw adapter chunk, before any
// middleware sees it, so rewriting middleware cannot change history.
func (r *run) handleRaw(c *agui.Event) {
	switch c.Type {
	case agui.TextMessageStart:
		if c.MessageID != "" {
			r.startTextMessage(c.MessageID)
			r.captureIdentity(c.MessageID)
		}
	case agui.TextMessageContent:
		if c.Content != "" {
			// Content is cumulative for the current text message.
			r.accumulated = append(r.accumulated[:r.textStart], c.Content...)
		} else {
			r.accumulated = append(r.accumulated, c.Delta...)
		}
	case agui.ToolCallStart:
		if c.ParentMessageID != "" {
			r.captureIdentity(c.ParentMessageID)
		}
		r.calls.start(c)
	case agui.ToolCallArgs:
		r.calls.args(c)
	case agui.ToolCallEnd:
		r.calls.end(c)
		state := c.State
		if state == "" {
			if ts := c.TanstackMeta(); ts != nil {
				state, _ = ts["state"].(string)
			}
		}
		if state == "output-error" && c.Result != nil {
			r.recordStreamedError(c.ToolCallID, resultContentString(c.Result))
		}
	case agui.ToolCallResult:
		if ts := c.TanstackMeta(); ts != nil && ts["state"] == "output-error" {
			r.recordStreamedError(c.ToolCallID, c.Content)
		}
	case agui.RunFinished:
		cp := *c
		r.finished = &cp
		switch fr := c.FinishReason; fr {
		case agui.FinishStop, agui.FinishLength, agui.FinishContentFilter, agui.FinishToolCalls:
			r.lastFinishReason = fr
		default:
			if _, isNull := c.Extra["finishReason"]; isNull {
				r.lastFinishReason = ""
			} else {
				r.lastFinishReason = c.FinishReasonValue()
			}
		}
	case agui.RunError:
		r.earlyTermination = true
		if r.finalizationError == nil {
			msg := c.Message
			code := c.Code
			if c.Error != nil {
				if msg == "" {
					msg = c.Error.Message
				}
				if code == "" {
					code = c.Error.Code
				}
			}
			if msg == "" {
				msg = "Run failed"
			}
			r.finalizationError = &RunError{Message: msg, Code: code}
		}
	case agui.StepStarted:
		r.finalizeThinking()
	case agui.StepFinished:
		if c.Signature != "" {
			r.thinkingSignature = c.Signature
		}
	case agui.ReasoningMessageContent:
		r.thinkingContent += c.Delta
	case agui.ReasoningEncryptedValue:
		if c.Subtype == "tool-call" {
			r.setThoughtSignature(c.EntityID, c.EncryptedValue)
			return
		}
		r.thinkingSignature = c.EncryptedValue
	}
}

func (r *run) recordStreamedError(id, content string) {
	call, ok := r.calls.byID(id)
	if !ok {
		return
	}
	if _, seen := r.streamedToolErrors[id]; !seen {
		r.streamedErrorOrder = append(r.streamedErrorOrder, id)
	}
	r.streamedToolErrors[id] = ToolResult{ToolCallID: id, ToolName: call.Function.Name, Result: content, State: "output-error"}
}

func (r *run) setThoughtSignature(callID, sig string) {
	for i := range r.messages {
		for j := range r.messages[i].ToolCalls {
			tc := &r.messages[i].ToolCalls[j]
			if tc.ID == callID {
				md := make(map[string]any, len(tc.Metadata)+1)
				for k, v := range tc.Metadata {
					md[k] = v
				}
				md["thoughtSignature"] = sig
				tc.Metadata = md
				return
			}
		}
	}
}

func (r *run) captureIdentity(id string) {
	r.currentMessageID = id
	r.mctx.CurrentMessageID = id
	if !r.identityCaptured {
		r.currentCreatedAt = time.Now()
		r.identityCaptured = true
	}
}

func (r *run) finalizeThinking() {
	if r.thinkingContent != "" || r.thinkingSignature != "" {
		r.thinking = append(r.thinking, agui.Thinking{Content: r.thinkingContent, Signature: r.thinkingSignature})
		r.thinkingContent, r.thinkingSignature = "", ""
	}
}

// chunkChain pipes one chunk through the OnChunk hooks from index i, then
// emits what survives. modelTurn selects the model-stream emission rules
// (RUN_FINISHED held).
func (r *run) chunkChain(ev *agui.Event, i int, modelTurn bool) error {
	for ; i < len(r.chunkMws); i++ {
		m := r.chunkMws[i]
		var act ChunkAction
		if err := r.callHook(m, "onChunk", func() error {
			var err error
			act, err = m.OnChunk(r.mctx, r.hookCopy[i].load(ev))
			return err
		}); err != nil {
			return err
		}
		switch act.op {
		case opDrop:
			if r.log.Enabled(CatMiddleware) {
				r.log.Log(CatMiddleware, fmt.Sprintf("hook=onChunk middleware=%s dropped type=%s", m.Name, ev.Type))
			}
			return nil
		case opReplace:
			for k := range act.events {
				if err := r.chunkChain(&act.events[k], i+1, modelTurn); err != nil {
					return err
				}
			}
			return nil
		}
	}
	r.emitPublic(ev, modelTurn)
	return nil
}

// emitPublic normalizes a post-middleware chunk, adds its fan-outs, and
// yields the results (core.md §2.3).
func (r *run) emitPublic(ev *agui.Event, modelTurn bool) {
	n := agui.Normalize(ev)
	r.emitNormalized(n, modelTurn)
	for _, extra := range agui.Fanout(ev) {
		r.emitNormalized(agui.Normalize(&extra), modelTurn)
	}
}

func (r *run) emitNormalized(n agui.Event, modelTurn bool) {
	if modelTurn && r.so != nil && !r.so.combined && (n.Type == agui.RunFinished || n.Type == agui.RunStarted && (r.tanstack || r.hasPublicRunStarted)) {
		// Path A: the finalization call's pair brackets the run. 0.58.0
		// drops the loop's RUN_STARTED too, so an error in the loop arrives
		// before any RUN_STARTED; the agui profile keeps the first one.
		return
	}
	if modelTurn && n.Type == agui.RunFinished {
		r.heldModelFinished = append(r.heldModelFinished, n)
		return
	}
	if n.Type == agui.RunStarted {
		if r.hasPublicRunStarted {
			return
		}
		r.hasPublicRunStarted = true
	}
	r.emit(n)
}

func (r *run) flushHeld(held *[]agui.Event) {
	for _, ev := range *held {
		r.emit(ev)
	}
	*held = nil
}

// pipe sends an engine-made chunk through middleware to the consumer.
func (r *run) pipe(ev agui.Event) error {
	if err := r.chunkChain(&ev, 0, false); err != nil {
		return err
	}
	return nil
}

func (r *run) syntheticFinished(reason string) agui.Event {
	return agui.WithTanstack(agui.Event{
		Type: agui.RunFinished, RunID: r.runID(), ThreadID: r.threadID, Timestamp: now(),
	}, map[string]any{"finishReason": reason, "model": r.mctx.Model})
}

func (r *run) syntheticRunStarted(fin agui.Event) error {
	if r.hasPublicRunStarted {
		return nil
	}
	return r.pipe(agui.Event{Type: agui.RunStarted, RunID: fin.RunID, ThreadID: fin.ThreadID, Timestamp: now()})
}

func (r *run) successfulEarlyTermination() error {
	r.lastFinishReason = agui.FinishStop
	fin := r.syntheticFinished(agui.FinishStop)
	if err := r.syntheticRunStarted(fin); err != nil {
		return err
	}
	fin.Timestamp = now()
	fin.Outcome = &agui.Outcome{Type: "success"}
	if err := r.pipe(fin); err != nil {
		return err
	}
	r.terminalHookCalled = true
	return r.runOnFinish()
}

func (r *run) addAssistantToolCallMessage(calls []agui.ToolCall) {
	r.finalizeThinking()
	r.flushTurnTexts()
	msg := agui.ModelMessage{Role: agui.RoleAssistant, ToolCalls: calls, ID: r.currentMessageID,
		CreatedAt: r.currentCreatedAt.UTC().Format(time.RFC3339Nano), Thinking: r.thinking}
	if text := r.turnText(); text != "" {
		msg.Content = agui.Text(text)
	}
	r.messages = append(r.messages, msg)
	r.mctx.Messages = r.messages
}

func (r *run) addTerminalAssistantMessage() {
	r.finalizeThinking()
	if so := r.structuredMessage(); so != nil {
		id := r.so.messageID
		if id == "" {
			id = r.currentMessageID
		}
		r.flushTurnTexts()
		if text := r.turnText(); id != r.currentMessageID && text != "" {
			r.messages = append(r.messages, agui.ModelMessage{Role: agui.RoleAssistant, ID: r.currentMessageID,
				Content: agui.Text(text), Thinking: r.thinking})
		}
		r.messages = append(r.messages, agui.ModelMessage{Role: agui.RoleAssistant, ID: id, Content: agui.Text(r.so.raw), StructuredOutput: so})
		r.mctx.Messages = r.messages
		return
	}
	for _, m := range r.messages {
		if m.Role == agui.RoleAssistant && m.ID == r.currentMessageID {
			return
		}
	}
	r.flushTurnTexts()
	text := r.turnText()
	if text == "" && len(r.thinking) == 0 {
		return
	}
	msg := agui.ModelMessage{Role: agui.RoleAssistant, ID: r.currentMessageID, Thinking: r.thinking,
		CreatedAt: r.currentCreatedAt.UTC().Format(time.RFC3339Nano)}
	if text != "" {
		msg.Content = agui.Text(text)
	}
	if msg.ID == "" {
		msg.ID = newID("msg")
	}
	r.messages = append(r.messages, msg)
	r.mctx.Messages = r.messages
}

// Conversation returns the conversation as the run left it: the input plus
// every assistant turn and tool result. It is meant for hooks (OnFinish).
func (c *Context) Conversation() []agui.ModelMessage { return c.run.messages }

func (r *run) recordToolCalls(calls []agui.ToolCall) {
	r.lastTurnToolCallCount = len(calls)
	for _, c := range calls {
		if !r.countedCalls[c.ID] {
			r.countedCalls[c.ID] = true
			r.toolCallCount++
		}
	}
}

// resultContentString renders a raw result the way TOOL_CALL_RESULT carries it.
func resultContentString(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// startTextMessage notes a TEXT_MESSAGE_START. In the agui profile a new
// message id closes the turn's current text message, which then becomes an
// assistant message of its own: the client showed it as one, and a
// MESSAGES_SNAPSHOT must not take it away. 0.58.0 runs every text of a
// turn into the last message.
func (r *run) startTextMessage(id string) {
	if r.tanstack || id == r.currentMessageID || len(r.accumulated) == r.textStart {
		return
	}
	r.turnTexts = append(r.turnTexts, agui.ModelMessage{Role: agui.RoleAssistant, ID: r.currentMessageID,
		Content: agui.Text(string(r.accumulated[r.textStart:])), CreatedAt: r.currentCreatedAt.UTC().Format(time.RFC3339Nano)})
	r.textStart = len(r.accumulated)
	r.identityCaptured = false // the next message gets its own creation time
}

// flushTurnTexts appends the turn's earlier text messages (agui profile).
func (r *run) flushTurnTexts() {
	r.messages = append(r.messages, r.turnTexts...)
	r.turnTexts = nil
}

// turnText is the text of the turn's last message (all of the turn's text
// in the tanstack profile).
func (r *run) turnText() string { return string(r.accumulated[r.textStart:]) }
