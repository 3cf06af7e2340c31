package chat

import (
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"runtime/debug"

	"github.com/goai-sdk/goai/agui"
)

// CodeInternal is the RUN_ERROR code of a run that ended because code the
// engine called for it (an adapter, a tool, a middleware hook, a strategy)
// panicked. Only that run ends; the process keeps serving.
const CodeInternal = "internal"

// PanicError is a panic recovered from code the engine ran for a run. The
// stack is logged under the errors debug category, never streamed; the
// message names what panicked and, for a runtime error, which one, but not
// an arbitrary panic value (it could hold anything, a key included).
type PanicError struct {
	// Source names what panicked, e.g. `adapter "openai"` or `tool "add"`;
	// empty inside a *HookError, whose message names the hook.
	Source string
	Value  any
	Stack  []byte
}

func (e *PanicError) Error() string {
	msg := "panic"
	if e.Source != "" {
		msg = e.Source + ": panic"
	}
	if re, ok := e.Value.(runtime.Error); ok {
		msg += ": " + re.Error()
	}
	return msg
}

// recovered turns a recovered panic value into a *PanicError and logs it
// with its stack.
func (r *run) recovered(what string, p any) *PanicError {
	pe := &PanicError{Source: what, Value: p, Stack: debug.Stack()}
	r.log.Log(CatErrors, what+" panicked: "+fmt.Sprint(p), slog.String("stack", string(pe.Stack)))
	return pe
}

// internalError is the error a failed run's stream ends with: a panic
// becomes a *RunError with CodeInternal (the transport's RUN_ERROR code),
// wrapping the original error.
func internalError(err error) error {
	if isPanic(err) {
		return &RunError{Message: err.Error(), Code: CodeInternal, Err: err}
	}
	return err
}

// guardedBody runs the run algorithm; a panic in it (engine code, or user
// code not guarded closer to its call) fails the run. A panic raised by the
// consumer's own loop body passes through untouched: it is theirs.
func (r *run) guardedBody() (err error) {
	defer func() {
		if r.consumer == consumerInBody {
			return
		}
		if p := recover(); p != nil {
			err = r.recovered("chat engine", p)
		}
	}()
	return r.body()
}

// guardStream wraps an adapter's stream so a panic inside the adapter ends
// the stream with a *PanicError naming it. A panic from the loop body (the
// engine, or the consumer's code behind it) is not the adapter's and passes.
func (r *run) guardStream(what string, open func() iter.Seq2[agui.Event, error]) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		inBody := false
		defer func() {
			if inBody {
				return
			}
			if p := recover(); p != nil {
				yield(agui.Event{}, r.recovered(what, p))
			}
		}()
		for ev, err := range open() {
			inBody = true
			if !yield(ev, err) {
				return
			}
			inBody = false
		}
	}
}

// guard runs user code on the run goroutine, turning a panic into an error.
func (r *run) guard(what string, fn func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = r.recovered(what, p)
		}
	}()
	fn()
	return nil
}

func isPanic(err error) bool {
	var pe *PanicError
	return errors.As(err, &pe)
}

func (r *run) adapterLabel() string { return fmt.Sprintf("adapter %q", r.mctx.Provider) }
