package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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

// startGrace is how long a reader of a run whose record says it is running
// waits for the run's first log entry: a duplicate request on another
// replica may arrive before the producer stored anything.
const startGrace = 10 * time.Second

// join serves GET joins: the offset comes from Last-Event-ID or ?offset,
// else def ("" makes it required).
func (h *Handler) join(w http.ResponseWriter, r *http.Request, runID, def string) {
	if h.cfg.Store == nil {
		writeError(w, http.StatusNotFound, "no_store", "this server keeps no run logs")
		return
	}
	principal, ok := h.authorize(w, r, ActionJoin)
	if !ok {
		return
	}
	if msg := repeatedResume(r); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_request", msg)
		return
	}
	offset := r.Header.Get("Last-Event-ID")
	if offset == "" {
		offset = r.URL.Query().Get("offset")
	}
	if offset == "" {
		offset = def
	}
	if offset == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", NoResumeOffset)
		return
	}
	if runID == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "No run id provided (expected an X-Run-Id header or a ?runId query parameter).")
		return
	}
	if !h.ownsRun(w, r, runID, principal) {
		return
	}
	h.serveLog(w, r, principal, runID, offset, acceptFormat(r), nil)
}

// ownsRun answers 404 (existence is private) unless principal owns runID;
// an unknown run passes, for the log read to answer.
func (h *Handler) ownsRun(w http.ResponseWriter, r *http.Request, runID string, principal Principal) bool {
	if err := checkID("run id", runID); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return false
	}
	rec, err := h.cfg.Store.Get(r.Context(), runID)
	switch {
	case errors.Is(err, durable.ErrRunNotFound):
		return true
	case err != nil:
		writeError(w, http.StatusInternalServerError, "store", "reading the run record: "+err.Error())
		return false
	case rec.Owner != string(principal):
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("unknown run %q", runID))
		return false
	}
	return true
}

// ownsThread answers 403 unless principal may write threadID: a thread
// saved, with a run started, or claimed by another principal is theirs. A
// thread without an owner is claimed for principal when the store can
// (durable.ThreadClaimer), before anything runs on it: two principals
// starting a new thread's first runs at once both find it unowned, and
// only the claim decides between them; and a plain stream, which saves no
// thread, leaves its thread owned.
func (h *Handler) ownsThread(w http.ResponseWriter, r *http.Request, threadID string, principal Principal) bool {
	owner, found, err := h.threadOwner(r.Context(), threadID)
	if err == nil && !found && principal != "" && threadID != "" {
		if c, ok := h.cfg.Store.(durable.ThreadClaimer); ok {
			var got string
			got, err = c.ClaimThread(r.Context(), threadID, string(principal))
			owner, found = Principal(got), true
		}
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store", "reading the thread: "+err.Error())
		return false
	}
	if found && owner != principal {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("thread %q belongs to another user", threadID))
		return false
	}
	return true
}

func (h *Handler) threadOwner(ctx context.Context, threadID string) (Principal, bool, error) {
	if h.cfg.Store == nil || threadID == "" {
		return "", false, nil
	}
	// Every request to a thread asks; a store that can answer from the
	// owner column spares loading the transcript and the thread's runs.
	if o, ok := h.cfg.Store.(durable.ThreadOwners); ok {
		owner, found, err := o.ThreadOwner(ctx, threadID)
		return Principal(owner), found, err
	}
	if ts, ok := h.cfg.Store.(durable.ThreadStore); ok {
		th, found, err := ts.LoadThread(ctx, threadID)
		if err != nil || found {
			return Principal(th.Owner), found, err
		}
	}
	runs, err := h.cfg.Store.ListByThread(ctx, threadID)
	if err != nil || len(runs) == 0 {
		return "", false, err
	}
	return Principal(runs[0].Owner), true, nil
}

// serveLog streams a run's log after an offset until the log closes or the
// client leaves. disc, when set, is notified if the client goes away.
//
// A handler spends its stream's life in here, waiting for the log: what
// comes before and after the read is in functions of their own, so that a
// waiting handler's stack stays small.
func (h *Handler) serveLog(w http.ResponseWriter, r *http.Request, principal Principal, runID, after string, format agui.Format, disc *chat.RunDisconnect) {
	if after != durable.FromStart && after != durable.Now && !durable.ValidOffset(after) {
		badOffset(w, runID, after)
		return
	}
	leave := h.attachReader(runID)
	_, batched := h.cfg.Store.(durable.BatchReader)
	ls := &logStream{w: w, format: format, direct: batched, frames: &h.frames}
	defer ls.end(r, leave)
	ctx := r.Context()
	if d := h.cfg.releaseIdleAfter(); batched && d > 0 && canTakeOver(r) {
		ctx, ls.idle.cancel = context.WithCancelCause(ctx)
		ls.idle.d = d
	}
	err := h.readLog(ctx, runID, after, ls.send)
	if ls.idle.ended(ctx) && err == nil && r.Context().Err() == nil && !ls.gone {
		if ls.cs = h.takeOver(w, r, format); ls.cs != nil {
			// The connection is the handler's now: the read goes on in a
			// goroutine of its own, and net/http's are released.
			go h.follow(ls.cs, runID, ls.last, disc, leave)
			return
		}
		err = h.readLog(r.Context(), runID, ls.last, ls.send)
	}
	ls.ended = h.endLog(r, ls, principal, runID, after, disc, err)
}

// end stops ls's sender and idle timer (after a panic too) and, unless its
// connection was taken over, counts its reader out.
func (ls *logStream) end(r *http.Request, leave func(ended, gone bool)) {
	if ls.sw != nil {
		ls.sw.Close()
	}
	if ls.idle.cancel != nil {
		ls.idle.stop()
		ls.idle.cancel(nil)
	}
	if ls.cs == nil {
		leave(ls.ended, r.Context().Err() != nil)
	}
}

func badOffset(w http.ResponseWriter, runID, after string) {
	writeError(w, http.StatusBadRequest, "invalid_offset", fmt.Sprintf("invalid resume offset %q for run %q: malformed", after, runID))
}

// logStream is the response of a log read: it starts with the first entry,
// so that an error before it still gets a status.
//
// A log read in batches (direct) is written by the handler itself, one
// flush per batch (docs/durable.md §1.6). A log read entry by entry goes
// through a stream writer, whose sender flushes whatever has queued, so
// that a catch-up is not a flush per entry.
type logStream struct {
	w       http.ResponseWriter
	format  agui.Format
	direct  bool
	started bool                     // the status and headers are written
	rc      *http.ResponseController // direct: flushes w
	sw      *streamWriter            // not direct: the sender, once started
	buf     []byte                   // not direct: one frame
	frames  *sync.Pool               // direct: the handler's buffers for a batch's frames
	gone    bool                     // a write failed: the client is gone
	ended   bool                     // the log was read to its end

	idle idleTimer   // direct: takes the connection over when it fires
	cs   *connStream // the connection, taken over
	last string      // the offset of the last entry written
}

// maxFrameBuf bounds the frames of a batch held before they are written,
// and the buffers the handler keeps for the next batch: an unpaced batch's
// frames take a few KiB.
const maxFrameBuf = 32 << 10

// send writes es, one batch of the log or one entry.
func (ls *logStream) send(es []durable.Entry) error {
	if !ls.started {
		ls.started = true
		setStreamHeaders(ls.w, ls.format)
		ls.w.WriteHeader(http.StatusOK)
		if ls.direct {
			ls.rc = http.NewResponseController(ls.w)
		} else {
			ls.sw = newStreamWriter(ls.w)
		}
	}
	var err error
	if ls.direct {
		// The batch's frames in one write: each write to the response
		// locks its connection and copies into its buffer. The buffer is
		// the handler's, held only while a batch is written: a waiting
		// stream holds none, and a run's stream grows none afresh.
		bp, _ := ls.frames.Get().(*[]byte)
		if bp == nil {
			bp = new([]byte)
		}
		buf := (*bp)[:0]
		for _, e := range es {
			buf = agui.AppendFrame(buf, ls.format, e.Offset, e.Data)
			if len(buf) >= maxFrameBuf { // a catch-up's long page: written as it goes
				if _, err = ls.w.Write(buf); err != nil {
					break
				}
				buf = buf[:0]
			}
		}
		if err == nil {
			if _, err = ls.w.Write(buf); err == nil {
				err = ls.rc.Flush()
			}
		}
		if cap(buf) <= 2*maxFrameBuf { // a large entry's buffer does not stay held
			*bp = buf
			ls.frames.Put(bp)
		}
	} else {
		for _, e := range es {
			ls.buf = agui.AppendFrame(ls.buf[:0], ls.format, e.Offset, e.Data)
			if _, err = ls.sw.Write(ls.buf); err != nil {
				break
			}
		}
	}
	if err != nil {
		ls.gone = true
		return err
	}
	if len(es) > 0 {
		ls.last = es[len(es)-1].Offset
		if ls.idle.cancel != nil {
			ls.idle.wrote()
		}
	}
	return nil
}

// endLog finishes a log read that returned err: it retries a run starting
// elsewhere, then answers what went wrong, or notifies disc of a client
// gone. It reports whether the log was read to its end.
func (h *Handler) endLog(r *http.Request, ls *logStream, principal Principal, runID, after string, disc *chat.RunDisconnect, err error) (ended bool) {
	for grace := time.Now().Add(startGrace); !ls.started && errors.Is(err, durable.ErrRunNotFound) &&
		after == durable.FromStart && h.startingElsewhere(r.Context(), principal, runID, grace); {
		err = h.readLog(r.Context(), runID, after, ls.send)
	}
	if ls.sw != nil && ls.sw.Close() != nil {
		ls.gone = true
	}
	switch {
	case ls.gone || r.Context().Err() != nil:
		// The client is gone: a failed write or flush ends delivery.
		if disc != nil {
			disc.Notify()
		}
	case err != nil && ls.started:
		h.cfg.Logger.Error("reading the run log", "runId", runID, "error", err)
	case err != nil:
		writeLogError(ls.w, runID, err)
	default:
		if !ls.started { // an empty log: headers only
			setStreamHeaders(ls.w, ls.format)
			ls.w.WriteHeader(http.StatusOK)
		}
		return true
	}
	return false
}

// attachReader counts a reader of runID (un-stamping the run if it was
// detached) and returns what to call when it leaves: the last reader leaving
// a run still produced here before its log ended, because its client went
// away, stamps it detached.
func (h *Handler) attachReader(runID string) (leave func(ended, gone bool)) {
	h.metrics.streams.Add(1)
	if h.prod.attach(runID) {
		h.setDetached(runID, false)
	}
	return func(ended, gone bool) {
		if h.prod.detach(runID) && !ended && gone {
			h.setDetached(runID, true)
		}
		h.metrics.streams.Add(-1)
	}
}

// readLog calls send with the entries of runID's log after after until the
// log closes: with each batch of a durable.BatchReader, else with each
// entry. Offsets are opaque, but the wire needs each to be a valid SSE id
// and never repeated: a backend breaking that fails the response rather
// than corrupting a client's cursor. Logs are totally ordered, so a repeat
// shows as the previous offset again (e.g. re-yielded after a wake-up);
// only that one is kept, so a long catch-up costs no memory.
func (h *Handler) readLog(ctx context.Context, runID, after string, send func([]durable.Entry) error) error {
	prev := after
	// sendValid sends the entries of es up to the first bad offset, and
	// fails there.
	sendValid := func(es []durable.Entry) error {
		for i, e := range es {
			if e.Offset == prev || !durable.ValidOffset(e.Offset) {
				bad := fmt.Errorf("run log of %q yielded an invalid or repeated offset %q", runID, e.Offset)
				if i == 0 {
					return bad
				}
				return cmp.Or(send(es[:i]), bad)
			}
			prev = e.Offset
		}
		return send(es)
	}
	if br, ok := h.cfg.Store.(durable.BatchReader); ok {
		for es, err := range br.ReadBatches(ctx, runID, after) {
			if err == nil {
				err = sendValid(es)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	one := make([]durable.Entry, 1)
	for e, err := range h.cfg.Store.Read(ctx, runID, after) {
		one[0] = e
		if err == nil {
			err = sendValid(one)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeLogError answers a read of a run's log that failed before its first
// entry.
func writeLogError(w http.ResponseWriter, runID string, err error) {
	switch {
	case errors.Is(err, durable.ErrInvalidOffset):
		writeError(w, http.StatusBadRequest, "invalid_offset", err.Error())
	case errors.Is(err, durable.ErrRunNotFound):
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("unknown run %q", runID))
	default:
		writeError(w, http.StatusInternalServerError, "store", err.Error())
	}
}

// startingElsewhere reports, after a short pause, whether runID's record
// says it is running but its producer has stored nothing yet (a duplicate
// request racing the first, maybe on another replica), so the read is worth
// retrying until deadline. The record must be principal's: a reader whose
// ownership check found no run must not be served one created since by
// someone else.
func (h *Handler) startingElsewhere(ctx context.Context, principal Principal, runID string, deadline time.Time) bool {
	if time.Now().After(deadline) {
		return false
	}
	rec, err := h.cfg.Store.Get(ctx, runID)
	if err != nil || rec.Owner != string(principal) || rec.Status != durable.StatusRunning || time.Since(rec.StartedAt) > startGrace {
		return false
	}
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// setDetached records that a durable run produced here has no client left
// (so the detached-run reaper, Recovery.DetachedTTL, applies to it), or
// that a client is back.
func (h *Handler) setDetached(runID string, detached bool) {
	ctx := context.Background()
	rec, err := h.cfg.Store.Get(ctx, runID)
	if err != nil || rec.Status != durable.StatusRunning || (rec.DetachedSince != nil) == detached {
		return
	}
	patch := durable.RunPatch{DetachedSince: durable.Clear[time.Time]()}
	if detached {
		patch.DetachedSince = durable.Set(time.Now())
	}
	if err := h.cfg.Store.Update(ctx, runID, patch); err != nil {
		h.cfg.Logger.Warn("recording the run's client presence failed", "runId", runID, "detached", detached, "error", err)
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
