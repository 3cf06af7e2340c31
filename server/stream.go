package server

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// WriteRun writes a run's events with w and ends the stream as its profile
// requires: Close after a run that ended, Abort (RUN_ERROR with the reason
// in the agui profile) after an abort, and a RUN_ERROR after a thrown
// error, which it also returns as failed. A write error stops it at once
// and is returned as werr (the client went away).
func WriteRun(w *agui.Writer, events iter.Seq2[agui.Event, error]) (failed, werr error) {
	for ev, err := range events {
		if err != nil {
			var ae *chat.AbortError
			if errors.As(err, &ae) {
				return nil, w.Abort(ae.Reason, AbortCode(ae))
			}
			re := ErrorEvent(err)
			if werr := w.Write(&re); werr != nil {
				return err, werr
			}
			return err, w.Close()
		}
		if werr := w.Write(&ev); werr != nil {
			return nil, werr
		}
	}
	return nil, w.Close()
}

// AbortCode is the RUN_ERROR code of an aborted run: "cancelled" for an
// explicit cancel, else "aborted".
func AbortCode(ae *chat.AbortError) string {
	if ae.CancelRequested {
		return "cancelled"
	}
	return "aborted"
}

// ErrorEvent is the RUN_ERROR written when a run throws.
func ErrorEvent(err error) agui.Event {
	ev := agui.Event{Type: agui.RunError, Timestamp: time.Now().UnixMilli(), Message: err.Error()}
	var re *chat.RunError
	if errors.As(err, &re) && re.Code != "" {
		ev.Code = re.Code
	}
	return ev
}

// serveStream runs a plain (not durable) stream on the request goroutine.
// A panic in the engine or in what it calls here ends this stream alone
// with RUN_ERROR code "internal".
//
// The goroutine spends the run parked in the model with serveStream on its
// stack: the stream's setup and ending are functions of their own, so that
// a waiting stream's stack stays in the smallest size class.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, cr *chatRequest) {
	h.limits.plainRuns.Add(1)
	defer h.limits.plainRuns.Add(-1)
	sw, enc := h.startPlain(w, cr)
	defer sw.Close() // a no-op after the Close in endPlain; stops the sender if the engine's consumer panicked
	failed, werr := WriteRun(enc, h.plainEvents(r.Context(), cr))
	h.endPlain(sw, cr, failed, werr)
}

// startPlain answers 200 and returns the stream's writers.
//
//go:noinline
func (h *Handler) startPlain(w http.ResponseWriter, cr *chatRequest) (*streamWriter, *agui.Writer) {
	setStreamHeaders(w, cr.format)
	w.WriteHeader(http.StatusOK)
	sw := newStreamWriter(w)
	enc := agui.NewWriter(sw, agui.WriterOptions{Format: cr.format, Profile: h.cfg.Profile, ThreadID: cr.input.ThreadID, RunID: cr.input.RunID})
	h.metrics.runStarted()
	return sw, enc
}

// endPlain sends what is left of the stream and records how it ended.
//
//go:noinline
func (h *Handler) endPlain(sw *streamWriter, cr *chatRequest, failed, werr error) {
	if err := sw.Close(); werr == nil {
		werr = err
	}
	h.metrics.streamFinished(failed, werr)
	if failed != nil && werr == nil {
		h.cfg.Logger.Error("chat run failed", "runId", cr.input.RunID, "error", failed)
		h.logEnginePanic(failed, "runId", cr.input.RunID)
	}
}

// plainEvents starts the engine for cr. Not inlined: the options it passes
// by value would be in serveStream's frame, on the stack of every open
// plain stream.
//
//go:noinline
func (h *Handler) plainEvents(ctx context.Context, cr *chatRequest) iter.Seq2[agui.Event, error] {
	return h.safeStream(chat.Stream(ctx, cr.opts), "runId", cr.input.RunID)
}

// safeStream turns a panic raised while events yields into the stream's
// last error.
func (h *Handler) safeStream(events iter.Seq2[agui.Event, error], attrs ...any) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		inYield := false
		defer func() {
			if v := recover(); v != nil {
				if inYield {
					panic(v) // the consumer's own panic: not ours to swallow
				}
				yield(agui.Event{}, h.recovered(v, attrs...))
			}
		}()
		for ev, err := range events {
			inYield = true
			if !yield(ev, err) {
				return
			}
			inYield = false
		}
	}
}
