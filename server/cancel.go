package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// postCancel records a cancel and stops the producer if it runs here
// (producers elsewhere see the record within a poll interval). The run is
// named by the path ({id}) or the body {"runId"}.
func (h *Handler) postCancel(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Store == nil {
		writeError(w, http.StatusNotFound, "no_store", "this server keeps no run records")
		return
	}
	principal, ok := h.authorize(w, r, ActionCancel)
	if !ok {
		return
	}
	runID := r.PathValue("id")
	if runID == "" {
		var body struct {
			RunID string `json:"runId"`
		}
		if !decodeJSONBody(w, r, 64<<10, &body) {
			return
		}
		if body.RunID == "" {
			writeError(w, http.StatusBadRequest, "invalid_request", `cancel body must be {"runId": "..."}`)
			return
		}
		runID = body.RunID
	}
	if err := checkID("runId", runID); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	rec, err := h.cfg.Store.Get(r.Context(), runID)
	switch {
	case errors.Is(err, durable.ErrRunNotFound) || (err == nil && rec.Owner != string(principal)):
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("unknown run %q", runID))
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "store", err.Error())
		return
	}
	if err := h.cfg.Store.Update(r.Context(), runID, durable.RunPatch{CancelRequested: durable.Set(true)}); err != nil {
		writeError(w, http.StatusInternalServerError, "store", err.Error())
		return
	}
	local := h.prod.stop(runID, chat.ErrCancelRequested)
	writeJSON(w, http.StatusOK, map[string]any{"runId": runID, "cancelRequested": true, "stoppedHere": local})
}
