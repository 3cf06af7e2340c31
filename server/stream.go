package server

import (
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
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, cr *chatRequest) {
	h.limits.plainRuns.Add(1)
	defer h.limits.plainRuns.Add(-1)
	setStreamHeaders(w, cr.format)
	w.WriteHeader(http.StatusOK)
	sw := newStreamWriter(w)
	defer sw.Close() // a no-op after the Close below; stops the sender if the engine's consumer panicked
	enc := agui.NewWriter(sw, agui.WriterOptions{Format: cr.format, Profile: h.cfg.Profile, ThreadID: cr.input.ThreadID, RunID: cr.input.RunID})
	h.metrics.runStarted()
	failed, werr := WriteRun(enc, h.safeStream(chat.Stream(r.Context(), cr.opts), "runId", cr.input.RunID))
	if err := sw.Close(); werr == nil {
		werr = err
	}
	h.metrics.streamFinished(failed, werr)
	if failed != nil && werr == nil {
		h.cfg.Logger.Error("chat run failed", "runId", cr.input.RunID, "error", failed)
		h.logEnginePanic(failed, "runId", cr.input.RunID)
	}
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
