package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
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

	heartbeat time.Duration // 0: DefaultHeartbeat
}

// Producer liveness defaults. A producer refreshes its lease every
// DefaultHeartbeat; recovery ([Recovery]) treats a run whose producer has
// been silent for DefaultLease as lost. DefaultLease is several heartbeats,
// so a slow store or a GC pause does not cost a healthy run its claim.
const (
	DefaultHeartbeat = 2 * time.Second
	DefaultLease     = 15 * time.Second
)

// SetHeartbeat sets how often this handler's durable producers refresh
// their lease (default DefaultHeartbeat). It must be well under the lease
// recovery uses ([Recovery].Lease), and be called before serving.
func (h *Handler) SetHeartbeat(d time.Duration) { h.prod.heartbeat = d }

func (p *producers) heartbeatEvery() time.Duration {
	if p.heartbeat > 0 {
		return p.heartbeat
	}
	return DefaultHeartbeat
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
//
// Exactly one producer runs per run id across every replica sharing the
// store: the record is created if absent, and the producer must then win
// the run's first claim (ClaimIf epoch 0). A repeated fresh POST, here or on
// another replica, or a POST of a run that already ended, loses that claim
// and is served the log instead: the model is never run twice.
func (h *Handler) startDurable(w http.ResponseWriter, r *http.Request, runID string, in *agui.RunInput, opts chat.Options, format agui.Format) {
	if err := durable.CheckRunID(runID); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid X-Run-Id %q", runID))
		return
	}
	if msg := repeatedResume(r); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	store := h.cfg.Store
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	if !h.prod.add(runID, cancel) {
		// The same fresh request again: it never starts a second producer.
		cancel(nil)
		h.serveLog(w, r, runID, durable.FromStart, format, nil)
		return
	}
	started := false
	defer func() {
		if !started {
			h.prod.done(runID)
			cancel(nil)
		}
	}()
	disc := chat.NewRunDisconnect()
	opts.Disconnect = disc
	bg := context.WithoutCancel(r.Context())
	rec, err := store.CreateOrResume(bg, durable.RunRecord{RunID: runID, ThreadID: in.ThreadID, Status: durable.StatusRunning, StartedAt: time.Now()})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "recording the run: "+err.Error())
		return
	}
	p := &producer{h: h, runID: runID, threadID: in.ThreadID, ctx: ctx, cancel: cancel, store: store}
	if ts, ok := store.(durable.ThreadStore); ok && durable.ValidRunID(in.ThreadID) {
		p.threads = ts
	}
	if rec.Status != durable.StatusRunning {
		// Ended or paused: its log is all there is to serve.
		h.serveLog(w, r, runID, durable.FromStart, format, nil)
		return
	}
	if rec.CancelRequested != nil && *rec.CancelRequested {
		// Cancelled: never start a producer for it; serve whatever log it has.
		h.serveLog(w, r, runID, durable.FromStart, format, nil)
		return
	}
	if l, ok := store.(durable.Leaser); ok {
		claim, err := l.ClaimIf(bg, runID, 0)
		if errors.Is(err, durable.ErrClaimNotAcquired) {
			// Another producer (maybe on another replica) owns the run, or
			// recovery ended it.
			h.serveLog(w, r, runID, durable.FromStart, format, nil)
			return
		}
		if err != nil {
			writeError(w, http.StatusInternalServerError, "claiming the run: "+err.Error())
			return
		}
		p.fence = durable.NewFence(store, claim, h.cfg.Logger)
		p.leaser = l
	}
	if err := p.accept(); err != nil {
		writeError(w, http.StatusInternalServerError, "appending to the run log: "+err.Error())
		return
	}
	if p.threads != nil {
		// The user's turn is visible to a reload at once, even while a slow
		// middleware setup delays the first chunk. An empty request means
		// "continue the stored thread" (§6.2): nothing to overwrite it with.
		if len(opts.Messages) > 0 {
			if msgs, err := encodeUIMessages(opts.Messages); err == nil {
				p.saveThread(msgs, nil)
			} else {
				h.cfg.Logger.Warn("encoding the request's messages for the thread failed", "runId", runID, "error", err)
			}
		}
		opts.Middleware = append(slices.Clip(opts.Middleware), p.transcript.middleware())
	}
	started = true
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
	fence    *durable.Fence // nil: the store cannot fence (no durable.Leaser)
	leaser   durable.Leaser // nil: no heartbeat
	batch    [][]byte
	w        *agui.Writer
	terminal *agui.Event // last terminal event written to the log

	threads    durable.ThreadStore // nil: the store keeps no threads, or the run names none
	transcript transcript
}

func (p *producer) bg() context.Context { return context.WithoutCancel(p.ctx) }

// flush appends the buffered events; append happens before any delivery,
// because readers only ever see what the log holds.
func (p *producer) flush() error {
	if len(p.batch) == 0 {
		return nil
	}
	var err error
	if p.fence != nil {
		_, err = p.fence.Append(p.bg(), p.batch)
	} else {
		_, err = p.store.Append(p.bg(), p.runID, p.batch)
	}
	p.batch = p.batch[:0]
	return err
}

// lost reports the claim-loss error once a successor (recovery, or another
// driver) has taken the run over.
func (p *producer) lost() error {
	if p.fence == nil {
		return nil
	}
	return p.fence.Lost()
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
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		p.watch()
	}()
	defer func() { <-watched }()
	defer p.cancel(nil) // stops the watcher
	sawTerminal := false
	var thrown error
	for ev, err := range chat.Stream(p.ctx, opts) {
		if err != nil {
			thrown = err
			break
		}
		sawTerminal = ev.IsTerminal()
		if werr := p.w.Write(&ev); werr != nil {
			if errors.Is(werr, durable.ErrClaimLost) {
				log.Warn("durable run taken over by a successor; stopping this producer", "error", werr)
			} else {
				log.Error("durable append failed; stopping the run", "error", werr)
			}
			p.cancel(werr)
			thrown = werr
			break
		}
	}
	if lost := p.lost(); lost != nil {
		// The successor owns the log and the record now: write nothing
		// more, not even a terminal, and leave the log to it.
		log.Warn("durable run claim lost; leaving the log to the successor", "error", lost)
		return
	}
	if p.detached(thrown) {
		// Aborted (say, by a shutdown) after the run detached from its
		// client, with no cancel (§1.5 step 5): the events produced so far
		// are stored, but the log stays open and un-terminalized and the
		// record running, for whoever drives the run next (a takeover, or
		// recovery's producer-lost end once this producer's lease lapses).
		if err := p.flush(); err != nil {
			log.Error("durable append failed", "error", err)
		}
		log.Info("detached durable run aborted; its log stays open")
		return
	}
	switch {
	case thrown != nil:
		// Every durable log ends with a terminal event, also for an abort
		// (where the live tanstack wire has none), so readers know it ended.
		re := ErrorEvent(thrown)
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
	if p.terminal == nil && thrown == nil {
		// A run that produced no terminal event at all (0.58.0's empty model
		// turn, kept on the tanstack wire): its log still needs one.
		fin := agui.Event{Type: agui.RunFinished, ThreadID: p.threadID, RunID: p.runID, Timestamp: time.Now().UnixMilli()}
		_ = p.w.Write(&fin)
	}
	if err := p.flush(); err != nil {
		log.Error("durable append failed", "error", err)
	}
	if lost := p.lost(); lost != nil {
		log.Warn("durable run claim lost while finishing; leaving the log to the successor", "error", lost)
		return
	}
	// The transcript is saved before the record leaves running, so a
	// hydration that finds no active run reads the final transcript.
	if msgs, err := p.transcript.final(); err != nil {
		log.Warn("encoding the run's conversation for the thread failed", "error", err)
	} else if msgs != nil && p.threads != nil {
		var pending []agui.Interrupt
		if t := p.terminal; t != nil && t.Type == agui.RunFinished && t.Outcome != nil && t.Outcome.Type == "interrupt" {
			pending = t.Outcome.Interrupts
		}
		p.saveThread(msgs, pending)
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
	// Close before the record turns terminal: a crash in between leaves a
	// running record over a closed log, which recovery finishes from the
	// log's own terminal; the other order would leave readers parked on an
	// open log of a run nothing lists as running.
	if err := p.closeLog(); err != nil {
		// Nothing more is appended (the terminal is stored; a second one
		// would contradict it on the wire), but parked readers wait until
		// something closes the log.
		log.Error("closing the run log failed", "error", err)
	}
	var err error
	if p.fence != nil {
		err = p.fence.Update(p.bg(), patch)
	} else {
		err = p.store.Update(p.bg(), p.runID, patch)
	}
	if err != nil {
		log.Error("updating the run record failed", "error", err)
	}
}

// closeLog closes the run's log, retrying a few times: readers tail it
// until it is closed, so a transient store failure must not strand them.
func (p *producer) closeLog() error {
	var err error
	for i, wait := range []time.Duration{0, 50 * time.Millisecond, 250 * time.Millisecond} {
		if wait > 0 {
			time.Sleep(wait)
		}
		if err = p.store.Close(p.bg(), p.runID); err == nil {
			return nil
		}
		p.h.cfg.Logger.Warn("closing the run log failed; retrying", "runId", p.runID, "attempt", i+1, "error", err)
	}
	return err
}

// detached reports whether the producer itself was aborted, without a
// cancel, after the run recorded a detach verdict (DetachedSince set on its
// record, as WithSandbox does when the client goes away) and without a
// source error: such a run is not over, only this producer is.
func (p *producer) detached(thrown error) bool {
	if p.ctx.Err() == nil {
		return false // not a producer abort (the run ended, or a middleware aborted it)
	}
	cause := context.Cause(p.ctx)
	if errors.Is(cause, chat.ErrCancelRequested) || errors.Is(cause, durable.ErrClaimLost) {
		return false
	}
	var ae *chat.AbortError
	if !errors.As(thrown, &ae) || ae.CancelRequested {
		return false // it ended anyway, failed, or was cancelled
	}
	rec, err := p.store.Get(p.bg(), p.runID)
	if err != nil {
		return false
	}
	return rec.DetachedSince != nil && (rec.CancelRequested == nil || !*rec.CancelRequested)
}

// watch runs beside the producer until it ends: it stops the producer when
// a cancel is recorded for the run, whichever replica recorded it, and
// refreshes the producer's lease so recovery knows it is alive. A refused
// heartbeat means a successor claimed the run: the producer stops.
func (p *producer) watch() {
	poll := p.h.cfg.cancelPoll()
	beat := p.h.prod.heartbeatEvery()
	t := time.NewTicker(min(poll, beat))
	defer t.Stop()
	lastBeat := time.Now()
	for {
		select {
		case <-p.ctx.Done():
			return
		case now := <-t.C:
			if p.leaser != nil && now.Sub(lastBeat) >= beat {
				err := p.leaser.Heartbeat(p.bg(), p.fence.Claim())
				if errors.Is(err, durable.ErrClaimLost) {
					// The store refuses this producer's next append, which
					// latches the loss in its fence; stop the run now.
					p.cancel(err)
					return
				}
				if err != nil {
					p.h.cfg.Logger.Warn("durable heartbeat failed", "runId", p.runID, "error", err)
				} else {
					lastBeat = now
				}
			}
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
	if msg := repeatedResume(r); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if after != durable.FromStart && after != durable.Now && !durable.ValidOffset(after) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid resume offset %q for run %q: malformed", after, runID))
		return
	}
	sent := false
	rc := http.NewResponseController(w)
	var buf []byte
	// Offsets are opaque, but the wire needs each to be a valid SSE id and
	// never repeated (§1.3): a backend breaking that fails the response
	// rather than corrupting a client's cursor. Logs are totally ordered,
	// so a repeat shows as the previous offset again (e.g. re-yielded after
	// a wake-up); only that one is kept, so a long catch-up costs no memory.
	prev := after
	for e, err := range h.cfg.Store.Read(r.Context(), runID, after) {
		if err == nil {
			if e.Offset == prev || !durable.ValidOffset(e.Offset) {
				err = fmt.Errorf("run log of %q yielded an invalid or repeated offset %q", runID, e.Offset)
			}
			prev = e.Offset
		}
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
		_, err := w.Write(buf)
		if err == nil {
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

// repeatedResume names a resume cursor given more than once (two
// Last-Event-ID headers, or ?offset= twice), which must never silently pick
// one of them.
func repeatedResume(r *http.Request) string {
	if v := r.Header.Values("Last-Event-ID"); len(v) > 1 {
		return fmt.Sprintf("repeated Last-Event-ID header: %q", v)
	}
	if v := r.URL.Query()["offset"]; len(v) > 1 {
		return fmt.Sprintf("repeated offset query parameter: %q", v)
	}
	if v := r.Header.Values("X-Run-Id"); len(v) > 1 {
		return fmt.Sprintf("repeated X-Run-Id header: %q", v)
	}
	if v := r.URL.Query()["runId"]; len(v) > 1 {
		return fmt.Sprintf("repeated runId query parameter: %q", v)
	}
	return ""
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

// acceptFormat picks the wire format: NDJSON when the request accepts
// application/x-ndjson or asks for ?format=ndjson (the TanStack client's
// fetchHttpStream sends no Accept header, so point it at
// /api/chat?format=ndjson), else SSE.
func acceptFormat(r *http.Request) agui.Format {
	if containsNDJSON(r.Header.Get("Accept")) || r.URL.Query().Get("format") == "ndjson" {
		return agui.NDJSON
	}
	return agui.SSE
}
