package server

import (
	"errors"
	"iter"
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
