package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// NoResumeOffset is the 400 body of a join without an offset (the
// reference's exact message).
const NoResumeOffset = "No resume offset provided (expected a Last-Event-ID header or an ?offset query parameter)."

// RunAcceptedEvent is the CUSTOM marker a durable run's log starts with, so
// a joiner finds data at once even while middleware setup is slow.
const RunAcceptedEvent = "run.accepted"

// producers tracks the runs this process is producing.
type producers struct {
	mu     sync.Mutex
	cancel map[string]context.CancelCauseFunc
	wg     sync.WaitGroup
}

func (p *producers) add(runID string, cancel context.CancelCauseFunc) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel == nil {
		p.cancel = map[string]context.CancelCauseFunc{}
	}
	if _, dup := p.cancel[runID]; dup {
		return false
	}
	p.cancel[runID] = cancel
	p.wg.Add(1)
	return true
}

func (p *producers) done(runID string) {
	p.mu.Lock()
	delete(p.cancel, runID)
	p.mu.Unlock()
	p.wg.Done()
}

func (p *producers) stop(runID string, cause error) bool {
	p.mu.Lock()
	c, ok := p.cancel[runID]
	p.mu.Unlock()
	if ok {
		c(cause)
	}
	return ok
}

// ErrCancelled is the cause a cancel request stops a producer with.
var ErrCancelled = chat.ErrCancelRequested

// startDurable starts (or finds) the producer of a fresh durable run and
// serves its log from the start.
func (h *Handler) startDurable(w http.ResponseWriter, r *http.Request, runID string, in *agui.RunInput, opts chat.Options, format agui.Format) {
	store := h.cfg.Store
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	if !h.prod.add(runID, cancel) {
		// The same fresh request again: it never starts a second producer.
		cancel(nil)
		h.serveLog(w, r, runID, durable.FromStart, format, nil)
		return
	}
	disc := chat.NewRunDisconnect()
	opts.Disconnect = disc
	bg := context.WithoutCancel(r.Context())
	if _, err := store.CreateOrResume(bg, durable.RunRecord{RunID: runID, ThreadID: in.ThreadID, Status: durable.StatusRunning, StartedAt: time.Now()}); err != nil {
		h.prod.done(runID)
		cancel(nil)
		writeError(w, http.StatusInternalServerError, "recording the run: "+err.Error())
		return
	}
	p := &producer{h: h, runID: runID, threadID: in.ThreadID, ctx: ctx, cancel: cancel, store: store}
	if err := p.accept(); err != nil {
		h.prod.done(runID)
		cancel(nil)
		writeError(w, http.StatusInternalServerError, "appending to the run log: "+err.Error())
		return
	}
	go func() {
		defer h.prod.done(runID)
		defer cancel(nil)
		p.run(opts)
	}()
	h.serveLog(w, r, runID, durable.FromStart, format, disc)
}

type producer struct {
	h        *Handler
	runID    string
	threadID string
	ctx      context.Context
	cancel   context.CancelCauseFunc
	store    durable.Store
	batch    [][]byte
	w        *agui.Writer
	terminal *agui.Event // last terminal event written to the log
}

func (p *producer) bg() context.Context { return context.WithoutCancel(p.ctx) }

// flush appends the buffered events; append happens before any delivery,
// because readers only ever see what the log holds.
func (p *producer) flush() error {
	if len(p.batch) == 0 {
		return nil
	}
	_, err := p.store.Append(p.bg(), p.runID, p.batch)
	p.batch = p.batch[:0]
	return err
}

func (p *producer) emit(e *agui.Event) error {
	p.batch = append(p.batch, agui.AppendWire(nil, e))
	if e.IsTerminal() {
		c := *e
		p.terminal = &c
	}
	switch e.Type {
	case agui.RunStarted, agui.RunFinished, agui.RunError, agui.ToolCallEnd:
		return p.flush()
	}
	if len(p.batch) >= p.h.cfg.batchSize() {
		return p.flush()
	}
	return nil
}

func (p *producer) accept() error {
	p.w = agui.NewWriter(nil, agui.WriterOptions{Profile: p.h.cfg.Profile, ThreadID: p.threadID, RunID: p.runID, Emit: p.emit})
	marker := agui.Event{Type: agui.Custom, Name: RunAcceptedEvent, Value: json.RawMessage("{}"), Timestamp: time.Now().UnixMilli()}
	if err := p.w.Write(&marker); err != nil {
		return err
	}
	return p.flush()
}

// run drives the engine to its end whatever happens to the client, then
// terminalizes and closes the log and the run record.
func (p *producer) run(opts chat.Options) {
	log := p.h.cfg.Logger.With("runId", p.runID)
	go p.watchCancel()
	sawTerminal := false
	var thrown error
	for ev, err := range chat.Stream(p.ctx, opts) {
		if err != nil {
			thrown = err
			break
		}
		sawTerminal = ev.IsTerminal()
		if werr := p.w.Write(&ev); werr != nil {
			log.Error("durable append failed; stopping the run", "error", werr)
			p.cancel(werr)
			thrown = werr
			break
		}
	}
	switch {
	case thrown != nil:
		// Every durable log ends with a terminal event, also for an abort
		// (where the live tanstack wire has none), so readers know it ended.
		re := errorEvent(thrown)
		var ae *chat.AbortError
		if errors.As(thrown, &ae) {
			re.Message, re.Code = "Run aborted: "+ae.Reason, "aborted"
			if ae.CancelRequested {
				re.Message, re.Code = "Run cancelled", "cancelled"
			}
		}
		_ = p.w.Write(&re)
	case !sawTerminal && p.ctx.Err() != nil:
		cause := context.Cause(p.ctx)
		re := agui.Event{Type: agui.RunError, Timestamp: time.Now().UnixMilli(), Message: "Run aborted: " + cause.Error(), Code: "aborted"}
		if errors.Is(cause, chat.ErrCancelRequested) {
			re.Message, re.Code = "Run cancelled", "cancelled"
		}
		_ = p.w.Write(&re)
	}
	_ = p.w.Close()
	if err := p.flush(); err != nil {
		log.Error("durable append failed", "error", err)
	}
	patch := durable.RunPatch{Status: durable.Set(durable.StatusCompleted), FinishedAt: durable.Set(time.Now())}
	if t := p.terminal; t != nil && t.Type == agui.RunError {
		status := durable.StatusFailed
		if t.Code == "cancelled" || t.Code == "aborted" {
			status = durable.StatusAborted
		}
		patch.Status = durable.Set(status)
		patch.Error = durable.Set(durable.RunError{Message: t.Message, Code: t.Code})
	} else if t != nil && t.Outcome != nil && t.Outcome.Type == "interrupt" {
		patch.Status = durable.Set(durable.StatusInterrupted)
	}
	if err := p.store.Update(p.bg(), p.runID, patch); err != nil {
		log.Error("updating the run record failed", "error", err)
	}
	if err := p.store.Close(p.bg(), p.runID); err != nil {
		log.Error("closing the run log failed", "error", err)
	}
}

// watchCancel stops the producer when a cancel is recorded for the run,
// whichever replica recorded it.
func (p *producer) watchCancel() {
	t := time.NewTicker(p.h.cfg.cancelPoll())
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			rec, err := p.store.Get(p.bg(), p.runID)
			if err == nil && rec.CancelRequested != nil && *rec.CancelRequested {
				p.cancel(chat.ErrCancelRequested)
				return
			}
		}
	}
}

// serveLog streams a run's log after an offset until the log closes or the
// client leaves. disc, when set, is notified if the client goes away.
func (h *Handler) serveLog(w http.ResponseWriter, r *http.Request, runID, after string, format agui.Format, disc *chat.RunDisconnect) {
	sent := false
	rc := http.NewResponseController(w)
	var buf []byte
	for e, err := range h.cfg.Store.Read(r.Context(), runID, after) {
		if err != nil {
			if sent {
				h.cfg.Logger.Error("reading the run log", "runId", runID, "error", err)
				return
			}
			switch {
			case errors.Is(err, durable.ErrInvalidOffset):
				writeError(w, http.StatusBadRequest, err.Error())
			case errors.Is(err, durable.ErrRunNotFound):
				writeError(w, http.StatusNotFound, fmt.Sprintf("unknown run %q", runID))
			default:
				writeError(w, http.StatusInternalServerError, err.Error())
			}
			return
		}
		if !sent {
			setStreamHeaders(w, format)
			w.WriteHeader(http.StatusOK)
			sent = true
		}
		buf = appendFrame(buf[:0], format, e)
		if _, err := w.Write(buf); err == nil {
			err = rc.Flush()
		}
		if err != nil || r.Context().Err() != nil {
			break
		}
	}
	if r.Context().Err() != nil && disc != nil {
		disc.Notify()
	}
	if !sent && r.Context().Err() == nil {
		setStreamHeaders(w, format)
		w.WriteHeader(http.StatusOK)
	}
}

func appendFrame(b []byte, format agui.Format, e durable.Entry) []byte {
	if format == agui.NDJSON {
		b = append(b, `{"id":`...)
		b = agui.AppendString(b, e.Offset)
		b = append(b, `,"chunk":`...)
		b = append(b, e.Data...)
		return append(b, '}', '\n')
	}
	b = append(b, "id: "...)
	b = append(b, e.Offset...)
	b = append(b, "\ndata: "...)
	b = append(b, e.Data...)
	return append(b, '\n', '\n')
}

func setStreamHeaders(w http.ResponseWriter, format agui.Format) {
	hd := w.Header()
	hd.Set("Content-Type", format.ContentType())
	hd.Set("Cache-Control", "no-cache")
	if format == agui.SSE {
		hd.Set("Connection", "keep-alive")
	}
	hd.Set("X-Accel-Buffering", "no")
}

// serveGet handles joins (?runId&offset) and hydration (?threadId).
func (h *Handler) serveGet(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if h.cfg.Store == nil {
		writeError(w, http.StatusNotFound, "this server keeps no run logs")
		return
	}
	if thread := q.Get("threadId"); thread != "" && q.Get("runId") == "" && r.Header.Get("X-Run-Id") == "" {
		h.hydrate(w, r, thread)
		return
	}
	runID := r.Header.Get("X-Run-Id")
	if runID == "" {
		runID = q.Get("runId")
	}
	offset := r.Header.Get("Last-Event-ID")
	if offset == "" {
		offset = q.Get("offset")
	}
	if offset == "" {
		writeError(w, http.StatusBadRequest, NoResumeOffset)
		return
	}
	if runID == "" {
		writeError(w, http.StatusBadRequest, "No run id provided (expected an X-Run-Id header or a ?runId query parameter).")
		return
	}
	h.serveLog(w, r, runID, offset, acceptFormat(r), nil)
}

func (h *Handler) hydrate(w http.ResponseWriter, r *http.Request, threadID string) {
	rec, ok, err := h.cfg.Store.FindActiveRun(r.Context(), threadID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := map[string]any{"messages": []any{}, "activeRun": nil, "interrupts": nil}
	if ok {
		out["activeRun"] = map[string]string{"runId": rec.RunID}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}

// serveCancel records a cancel and stops the producer if it runs here
// (producers elsewhere see the record within a poll interval).
func (h *Handler) serveCancel(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	if h.cfg.Store == nil {
		writeError(w, http.StatusNotFound, "this server keeps no run records")
		return
	}
	var body struct {
		RunID string `json:"runId"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&body); err != nil || body.RunID == "" {
		writeError(w, http.StatusBadRequest, "cancel body must be {\"runId\": \"...\"}")
		return
	}
	if _, err := h.cfg.Store.Get(r.Context(), body.RunID); err != nil {
		if errors.Is(err, durable.ErrRunNotFound) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("unknown run %q", body.RunID))
			return
		}
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if err := h.cfg.Store.Update(r.Context(), body.RunID, durable.RunPatch{CancelRequested: durable.Set(true)}); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	local := h.prod.stop(body.RunID, chat.ErrCancelRequested)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"runId": body.RunID, "cancelRequested": true, "stoppedHere": local})
}

func acceptFormat(r *http.Request) agui.Format {
	if containsNDJSON(r.Header.Get("Accept")) {
		return agui.NDJSON
	}
	return agui.SSE
}

var _ = slog.Default
