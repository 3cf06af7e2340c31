package server

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/goai-sdk/goai/chat"
)

// InternalCode is the RUN_ERROR code of a run ended by a panic in the
// server or in code the run called (adapter, tool, middleware).
const InternalCode = "internal"

// recovered logs a recovered panic with its stack under the errors debug
// category and returns the failure that ends the run it happened in. The
// panic value goes to the log only: it may hold anything.
func (h *Handler) recovered(v any, attrs ...any) error {
	h.metrics.panics.Add(1)
	h.cfg.Logger.Error("recovered panic; ending this run only",
		append(attrs, "category", chat.CatErrors, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))...)
	return &chat.RunError{Message: "internal server error", Code: InternalCode}
}

// logEnginePanic logs, like recovered, a panic the engine itself recovered
// (an adapter, tool or middleware of this run): the run already ends with
// RUN_ERROR code "internal"; the server's log gets the stack whatever the
// run's own debug settings.
func (h *Handler) logEnginePanic(err error, attrs ...any) {
	var pe *chat.PanicError
	if !errors.As(err, &pe) {
		return
	}
	h.metrics.panics.Add(1)
	h.cfg.Logger.Error("recovered panic; ending this run only",
		append(attrs, "category", chat.CatErrors, "source", pe.Source, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))...)
}

// recoverLogged is deferred by goroutines with no run to end: the panic is
// logged and the goroutine ends; the server keeps serving.
func (h *Handler) recoverLogged(attrs ...any) {
	if v := recover(); v != nil {
		_ = h.recovered(v, attrs...)
	}
}
