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
	// Attach marks a takeover: the run was started by a host that died,
	// and its first model call re-reads the work in flight (see Attacher)
	// instead of starting it again. An adapter that cannot attach fails.
	Attach bool
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
	if opts.Attach && !CanAttach(opts) {
		return ErrCannotAttach
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
			yieldError(yield, err)
			return
		}
		defer r.cancel(nil)
		r.execute()
	}
}

// yieldError yields err alone. Not inlined: its empty event would be in
// the frame of Stream's iterator, under every wait of the run.
//
//go:noinline
func yieldError(yield func(agui.Event, error) bool, err error) {
	yield(agui.Event{}, err)
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
