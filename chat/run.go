package chat

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/goai-sdk/goai/agui"
)

// toolPhase is what the last tool phase decided for the loop.
type toolPhase uint8

const (
	phaseContinue toolPhase = iota // run another model turn if the strategy agrees
	phaseStop                      // the loop ends: nothing more to run
	phaseWait                      // the run paused on interrupts
)

// cyclePhase is which half of an iteration runs next.
type cyclePhase uint8

const (
	cycleText cyclePhase = iota
	cycleTools
)

// run is the state of one chat invocation, by aspect: the run itself
// (options, contexts, middleware, conversation, loop counters) here, and
// embedded, the current model turn (turnState), the answers a resume
// brought (resumeState), the events other goroutines queue (eventQueue) and
// how the run ended (endState).
type run struct {
	opts     *Options
	tanstack bool // Options.Profile is agui.ProfileTanStack
	yield    func(agui.Event, error) bool

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
	lastFinishReason      string
	heldModelFinished     []agui.Event // the turn's RUN_FINISHED, until its tool phase is known
	heldToolFinished      []agui.Event // ... until the tool phase ran
	publicRunStarted      bool         // the consumer got the run's RUN_STARTED

	turnState
	resumeState
	eventQueue
	endState
	consumer consumerState

	so *structuredState // nil unless Options.OutputSchema is set

	chunk agui.Event // the model chunk in flight (see streamModelTurn)
	// held, when set, collects emitted events instead of yielding them (an
	// interrupt terminal passes OnChunk before the snapshots are sent).
	held *[]agui.Event

	disconnect    *RunDisconnect
	lazy          *lazyManager                   // nil without lazy tools
	interruptDefs map[string]InterruptDefinition // Options.Interrupts by id; nil without any (interruptDef)

	caps  map[CapabilityKey]any
	capMu sync.Mutex

	deferMu  sync.Mutex
	deferred []func(context.Context) error

	sandboxHooks hookQueue
	bridge       bridgeState // bridged tool calls (toolrunner.go)
}

// runEnd is where the run stands on its way to an end: still going, bound
// to end a certain way once the loop unwinds, or ended (a terminal hook
// ran). It is the one answer to "has the run ended, and how". A run paused
// on interrupts runs no terminal hook: it stays endNone (toolPhase is
// phaseWait).
type runEnd uint8

const (
	endNone     runEnd = iota // running, or paused
	endStopping               // a resume's stop policy: the run ends now, successfully
	endFailing                // the run fails with endState.failure (the model's RUN_ERROR, a structured-output problem)
	endAborting               // a middleware called Abort: the run is cancelled, OnAbort follows
	endFinished               // OnFinish ran
	endFailed                 // OnError ran
	endAborted                // OnAbort ran; endState.aborted says why
)

// ended reports whether a terminal hook ran.
func (e runEnd) ended() bool { return e >= endFinished }

// endState is how the run ends: the stage, and what the failing or aborted
// stages carry.
type endState struct {
	end     runEnd
	failure *RunError   // set with endFailing, kept through endFailed
	aborted *AbortError // set with endAborted
}

// stopEarly ends the run before its loop would (a resume's stop policy).
func (e *endState) stopEarly() {
	if e.end == endNone {
		e.end = endStopping
	}
}

// fail records the error the run will end with; the first one wins, and an
// abort already under way wins over it.
func (e *endState) fail(err *RunError) {
	if e.end == endNone {
		e.end, e.failure = endFailing, err
	}
}

// ending reports whether the loop must stop: the run is bound to end
// (stopping, failing or aborting) or has ended.
func (e *endState) ending() bool { return e.end != endNone }

// consumerState is where the consumer of the event stream is.
type consumerState uint8

const (
	consumerWaiting consumerState = iota // between events: the engine runs
	consumerInBody                       // the consumer's loop body runs: a panic there is its own
	consumerGone                         // the consumer stopped iterating: nothing more is yielded
)

func newRun(ctx context.Context, opts *Options, yield func(agui.Event, error) bool) *run {
	r := &run{opts: opts, yield: yield, callerCtx: ctx, start: time.Now(), tanstack: opts.Profile == agui.ProfileTanStack}
	r.runCtx, r.cancel = context.WithCancelCause(ctx)
	r.log = NewLogger(opts.Debug)
	r.requestID = newID("chat")
	r.threadID = opts.ThreadID
	if r.threadID == "" {
		r.threadID = newID("thread")
	}
	r.useMiddleware(opts.Middleware)
	r.takeConversation(opts)
	r.toolPhase = phaseContinue
	r.countedCalls = map[string]bool{}
	r.streamedToolErrors = map[string]ToolResult{}
	r.caps = map[CapabilityKey]any{}
	r.queueSig = make(chan struct{}, 1)
	r.resumeState = newResumeState()
	r.mctx = r.newContext(opts)
	r.syncContext()
	r.mctx.Metadata = opts.Metadata
	if len(opts.Interrupts) > 0 {
		r.interruptDefs = make(map[string]InterruptDefinition, len(opts.Interrupts))
		for _, d := range opts.Interrupts {
			r.interruptDefs[d.ID] = d
		}
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

// useMiddleware takes the run's middleware, noting which see chunks.
func (r *run) useMiddleware(mws []*Middleware) {
	r.mws = mws
	for _, m := range mws {
		if m.OnChunk != nil {
			r.chunkMws = append(r.chunkMws, m)
		}
	}
	r.hookCopy = make([]hookChunk, len(r.chunkMws))
}

// takeConversation copies what the run may change (history, prompts,
// tools) and takes the rest of the request as given.
func (r *run) takeConversation(opts *Options) {
	r.messages = append([]agui.ModelMessage(nil), opts.Messages...)
	r.systemPrompts = append([]SystemPrompt(nil), opts.SystemPrompts...)
	r.tools = append([]*Tool(nil), opts.Tools...)
	if r.lazy = newLazyManager(r.tools, opts.Messages, opts.LazyTools); r.lazy != nil {
		r.tools = r.lazy.active()
	}
	r.modelOptions = opts.ModelOptions
	r.metadata = opts.Metadata
	r.resume = opts.Resume
}

// newContext is the middleware's view of the run.
func (r *run) newContext(opts *Options) *Context {
	runID := opts.RunID
	if runID == "" {
		runID = r.requestID
	}
	return &Context{
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
	if !r.end.ended() {
		r.end = endAborting
	}
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

// execute is the run algorithm (docs/engine.md §2).
//
// Its frame stays small: a run waiting on its model parks with execute on
// its stack, so what the ending needs (events by value, log attributes)
// lives in settle's frame, which is not.
func (r *run) execute() {
	r.logStart()
	r.settle(r.guardedBody())
}

func (r *run) logStart() {
	r.log.Log(CatAgentLoop, "run started", slog.String("threadId", r.threadID))
}

// settle ends the run after its body returned err.
func (r *run) settle(err error) {
	var rerr *ResumeError
	if errors.As(err, &rerr) && !r.end.ended() {
		// A rejected resume: onError, then one RUN_ERROR; nothing ran.
		r.log.Log(CatErrors, "chat interrupt resume failed", slog.String("error", err.Error()))
		r.runOnError(&RunError{Message: rerr.Error(), Code: rerr.Code()})
		r.emit(r.resumeErrorEvent(rerr))
		err = nil
	}
	if err != nil && !r.end.ended() && r.cancelled() && !isPanic(err) {
		// A hook that failed because the run was cancelled under it (a
		// client gone during a slow setup) is an abort, not an error.
		r.runAbort(r.abortReason())
		err = nil
	}
	if err != nil && !r.end.ended() {
		var ae *abortError
		if errors.As(err, &ae) {
			r.runAbort(ae.reason)
			err = nil
		} else {
			r.log.Log(CatErrors, "chat run failed", slog.String("error", err.Error()), slog.String("threadId", r.threadID))
			r.runOnError(err)
		}
	}
	if !r.end.ended() && r.cancelled() {
		r.runAbort(r.abortReason())
	}
	r.finish()
	switch {
	case r.consumer == consumerGone:
	case r.end == endAborted:
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

// finish waits for sandbox hooks, delivers events queued during the
// terminal hooks (a sandbox draining its watcher), and runs deferred work.
func (r *run) finish() {
	r.disconnect.terminal()
	defer r.disconnect.wait()
	r.sandboxHooks.wait()
	if r.consumer != consumerGone {
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

// interruptDef returns the generic interrupt definition registered as id.
// The empty id is the ad-hoc definition, with no schemas to check, unless
// Options.Interrupts registers one under it. (A map per run only when
// there are definitions: every idle run holds its run state.)
func (r *run) interruptDef(id string) (InterruptDefinition, bool) {
	if d, ok := r.interruptDefs[id]; ok {
		return d, true
	}
	return InterruptDefinition{}, id == ""
}
