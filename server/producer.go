package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// RunAcceptedEvent is the CUSTOM marker a durable run's log starts with, so
// a joiner finds data at once even while middleware setup is slow.
const RunAcceptedEvent = "run.accepted"

// startDurable starts (or finds) the producer of a fresh durable run, whose
// log the response then is, from the start.
//
// Exactly one producer runs per run id across every replica sharing the
// store: the record is created if absent, and the producer must then win
// the run's first claim (ClaimIf epoch 0). A repeated fresh POST, here or on
// another replica, or a POST of a run that already ended, loses that claim
// and is served the log instead: the model is never run twice.
//
// serve reports that the response is the run's log (disc: the disconnect
// of a run started here), which the caller serves before calling release:
// the handler then parks in serveLog for as long as the run lasts, and
// the frames of what started it are not on its stack.
func (h *Handler) startDurable(w http.ResponseWriter, r *http.Request, cr *chatRequest) (serve bool, disc *chat.RunDisconnect, release func()) {
	runID := cr.runID
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	added, ready := h.prod.add(runID, cancel)
	if !added {
		// The same fresh request again: it never starts a second producer.
		// Its run id is all it shares with the first, which may be another
		// principal's: the run's record says whose the log is.
		cancel(nil)
		select {
		case <-ready:
			return h.ownsRun(w, r, runID, cr.principal), nil, func() {}
		case <-r.Context().Done():
			return false, nil, func() {}
		}
	}
	started := false
	release = func() {
		if !started {
			h.prod.done(runID)
			cancel(nil)
		}
	}
	defer func() {
		if v := recover(); v != nil {
			release()
			panic(v)
		}
	}()
	serve, disc = h.launchDurable(ctx, cancel, w, r, cr, &started)
	return serve, disc, release
}

// launchDurable claims cr's run and starts its producer under ctx; serve reports
// that the response is the run's log (with disc, the disconnect of a run
// started here), else the response was written. started is set once the
// producer owns the run.
func (h *Handler) launchDurable(ctx context.Context, cancel context.CancelCauseFunc, w http.ResponseWriter, r *http.Request, cr *chatRequest, started *bool) (serve bool, disc *chat.RunDisconnect) {
	runID := cr.runID
	if err := h.checkStoreHealthy(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, "store_unhealthy", err.Error())
		return false, nil
	}
	p := h.newProducer(ctx, cancel, runID, cr.input.ThreadID, cr.principal)
	switch fresh, err := p.claimFresh(); {
	case err != nil:
		writeStoreError(w, err)
		return false, nil
	case !fresh:
		// Ended, paused, cancelled, or driven by another producer (maybe
		// on another replica): its log is all there is to serve.
		h.prod.markReady(runID)
		return true, nil
	}
	// The request (kept for a takeover), the accepted marker and the
	// user's turn are independent writes: issued together, they share the
	// store's next commit instead of waiting for one each. All are stored
	// before the model starts, so no later save of the thread is
	// overtaken by the first.
	kept := make(chan error, 1)
	if rs, ok := h.requestKeeper(cr); ok {
		go func() {
			defer func() {
				if v := recover(); v != nil {
					kept <- h.recovered(v, "runId", runID)
				}
			}()
			kept <- keepRequest(p.bg(), rs, runID, cr)
		}()
	} else {
		kept <- nil // nothing to keep: no goroutine for it
	}
	turnSaved := make(chan struct{})
	go func() {
		defer close(turnSaved)
		defer h.recoverLogged("runId", runID)
		p.saveRequestTurn(cr.opts.Messages)
	}()
	p.commits = p.newCommits()
	acceptErr := p.accept()
	keepErr := <-kept
	<-turnSaved
	if keepErr != nil || acceptErr != nil {
		p.commits.stop()
		if keepErr != nil {
			writeStoreError(w, keepErr)
		} else {
			writeStoreError(w, fmt.Errorf("appending to the run log: %w", acceptErr))
		}
		return false, nil
	}
	disc = chat.NewRunDisconnect()
	cr.opts.Disconnect = disc
	*started = true
	p.launch(cr.opts)
	return true, disc
}

// statusError is a failure with the HTTP status and code to answer it with.
type statusError struct {
	status int
	code   string
	msg    string
}

func (e *statusError) Error() string { return e.msg }

// writeStoreError answers a failed store step: with its own status when it
// has one, else 500.
func writeStoreError(w http.ResponseWriter, err error) {
	var se *statusError
	if errors.As(err, &se) {
		writeError(w, se.status, se.code, se.Error())
		return
	}
	writeError(w, http.StatusInternalServerError, "store", err.Error())
}

// newProducer is the producer of one run, not started.
func (h *Handler) newProducer(ctx context.Context, cancel context.CancelCauseFunc, runID, threadID string, owner Principal) *producer {
	p := &producer{h: h, runID: runID, threadID: threadID, owner: owner, ctx: ctx, cancel: cancel, store: h.cfg.Store}
	if ts, ok := p.store.(durable.ThreadStore); ok && durable.ValidRunID(threadID) {
		p.threads = ts
	}
	return p
}

// claimFresh records a fresh run and wins its first claim (ClaimIf epoch
// 0). fresh is false, with no error, for a run that already ended, paused
// or was cancelled, and for one another producer claimed.
func (p *producer) claimFresh() (fresh bool, err error) {
	want := durable.RunRecord{RunID: p.runID, ThreadID: p.threadID, Status: durable.StatusRunning, StartedAt: time.Now(), Owner: string(p.owner)}
	if st, ok := p.store.(durable.RunStarter); ok {
		// One write, so one commit to wait for before the first byte.
		rec, claim, claimed, err := st.StartRun(p.bg(), want)
		if err != nil {
			return false, fmt.Errorf("recording the run: %w", err)
		}
		if rec.Owner != string(p.owner) {
			return false, &statusError{http.StatusNotFound, "not_found", fmt.Sprintf("unknown run %q", p.runID)}
		}
		if !claimed {
			return false, nil
		}
		p.fence, p.leaser = durable.NewFence(p.store, claim, p.h.cfg.Logger), st
		return true, nil
	}
	rec, err := p.store.CreateOrResume(p.bg(), want)
	if err != nil {
		return false, fmt.Errorf("recording the run: %w", err)
	}
	if rec.Owner != string(p.owner) {
		return false, &statusError{http.StatusNotFound, "not_found", fmt.Sprintf("unknown run %q", p.runID)}
	}
	if rec.Status != durable.StatusRunning || (rec.CancelRequested != nil && *rec.CancelRequested) {
		return false, nil
	}
	l, ok := p.store.(durable.Leaser)
	if !ok {
		return true, nil
	}
	claim, err := l.ClaimIf(p.bg(), p.runID, 0)
	if errors.Is(err, durable.ErrClaimNotAcquired) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claiming the run: %w", err)
	}
	p.fence, p.leaser = durable.NewFence(p.store, claim, p.h.cfg.Logger), l
	return true, nil
}

// saveRequestTurn makes the user's turn visible to a reload at once, even
// while a slow middleware setup delays the first chunk. An empty request
// means "continue the stored thread": nothing to overwrite it with.
func (p *producer) saveRequestTurn(msgs []agui.ModelMessage) {
	if p.threads == nil || len(msgs) == 0 {
		return
	}
	enc, err := encodeUIMessages(msgs)
	if err != nil {
		p.h.cfg.Logger.Warn("encoding the request's messages for the thread failed", "runId", p.runID, "error", err)
		return
	}
	p.saveThread(enc, nil)
}

// launch marks the run ready for readers and drives it on its own
// goroutine to its end, whatever happens to the client. The transcript
// middleware keeps the thread.
func (p *producer) launch(opts chat.Options) {
	if p.threads != nil {
		opts.Middleware = append(slices.Clip(opts.Middleware), p.transcript.middleware())
	}
	p.h.prod.markReady(p.runID)
	p.h.metrics.runStarted()
	// The handler's keeper renews the lease until the run is done (after
	// its end is written), and stops the producer on a cancel recorded
	// elsewhere.
	p.h.prod.keepLease(p)
	go func() {
		defer p.h.prod.done(p.runID)
		defer p.cancel(nil)
		defer p.commits.stop()
		p.run(&opts)
	}()
}

type producer struct {
	h        *Handler
	runID    string
	threadID string
	owner    Principal
	ctx      context.Context
	cancel   context.CancelCauseFunc
	store    durable.Store
	fence    *durable.Fence // nil: the store cannot fence (no durable.Leaser)
	leaser   durable.Leaser // nil: no heartbeat
	commits  *groupCommit
	w        *agui.Writer
	terminal *agui.Event // last terminal event written to the log
	align    *aligner    // a taken-over run: drops what the log already holds

	threads    durable.ThreadStore // nil: the store keeps no threads, or the run names none
	transcript transcript

	keptAlone int    // the entries keep copied one by one
	entryBuf  []byte // what keep cuts entries from (the drive goroutine's)
}

func (p *producer) bg() context.Context { return context.WithoutCancel(p.ctx) }

// append stores one batch: append happens before any delivery, because
// readers only ever see what the log holds.
func (p *producer) append(batch [][]byte) error {
	start := time.Now()
	var err error
	if p.fence != nil {
		_, err = p.fence.Append(p.bg(), batch)
	} else {
		_, err = p.store.Append(p.bg(), p.runID, batch)
	}
	p.h.metrics.appended(len(batch), time.Since(start))
	return err
}

// newCommits returns the producer's append pipeline, which queues its
// appends with the store when the store queues them (the store then takes
// each batch when it runs the append).
func (p *producer) newCommits() *groupCommit {
	g := newGroupCommit(p.append, p.h.cfg.linger())
	g.queueWith(p.queueAppends, p.h.metrics.appended)
	return g
}

// queueAppends returns a function that queues an append of the run's
// entries with the store, fenced as append is, taking its batch with take
// and reporting to done; nil when the store does not queue appends.
func (p *producer) queueAppends(take func() [][]byte, done func(error) bool) func() {
	if p.fence != nil {
		return p.fence.QueueAppends(take, done)
	}
	q, ok := p.store.(durable.QueuedAppender)
	if !ok {
		return nil
	}
	return func() { q.AppendQueued(p.runID, durable.AppendOptions{}, take, done) }
}

// flush waits until every event emitted so far is stored.
func (p *producer) flush() error { return p.commits.flush() }

// lost reports the claim-loss error once a successor (recovery, or another
// driver) has taken the run over.
func (p *producer) lost() error {
	if p.fence == nil {
		return nil
	}
	return p.fence.Lost()
}

func (p *producer) emit(e *agui.Event, wire []byte) error {
	if p.align != nil {
		if ok, err := p.align.admit(e, wire); !ok || err != nil {
			return err
		}
	}
	if e.IsTerminal() {
		c := *e
		p.terminal = &c
	}
	return p.commits.add(p.keep(wire))
}

// keep's bounds: the entries copied one by one, then the sizes of the
// buffers it cuts the rest from.
const (
	keptAlone   = 8
	minEntryBuf = 1 << 10
	maxEntryBuf = 8 << 10
)

// keep returns a copy of wire for the log. A run's first keptAlone entries
// are copies of their own: a run waiting on its model after its first
// tokens then holds no buffer's unused end, times the streams held idle
// (bench/README.md, eighteenth pass). Later
// entries are cut from a buffer the producer fills entry after entry, one
// allocation for many; the buffers double from minEntryBuf to maxEntryBuf,
// and an entry larger than that gets a buffer of its own size. Each copy
// is capped, and the producer never writes into a buffer's cut part again,
// so an entry is never modified once handed to the log
// (durable.QueuedAppender keeps them as they are).
func (p *producer) keep(wire []byte) []byte {
	if p.keptAlone < keptAlone {
		p.keptAlone++
		return append(make([]byte, 0, len(wire)), wire...)
	}
	if cap(p.entryBuf)-len(p.entryBuf) < len(wire) {
		size := max(len(wire), min(2*cap(p.entryBuf), maxEntryBuf), minEntryBuf)
		p.entryBuf = make([]byte, 0, size)
	}
	at := len(p.entryBuf)
	p.entryBuf = append(p.entryBuf, wire...)
	return p.entryBuf[at:len(p.entryBuf):len(p.entryBuf)]
}

func (p *producer) accept() error {
	p.w = agui.NewWriter(nil, agui.WriterOptions{Profile: p.h.cfg.Profile, ThreadID: p.threadID, RunID: p.runID, Emit: p.emit})
	marker := agui.Event{Type: agui.Custom, Name: RunAcceptedEvent, Value: json.RawMessage("{}"), Timestamp: time.Now().UnixMilli()}
	if err := p.w.Write(&marker); err != nil {
		return err
	}
	return p.flush()
}

// drive runs the engine and writes its events to the log. A panic in
// anything the engine calls on this goroutine (adapter, middleware) is
// recovered here and becomes the run's failure (code "internal"): it ends
// this run alone.
func (p *producer) drive(opts *chat.Options) (sawTerminal bool, thrown error) {
	defer func() {
		if v := recover(); v != nil {
			thrown = p.h.recovered(v, "runId", p.runID)
		}
	}()
	for ev, err := range p.events(opts) {
		if err != nil {
			p.h.logEnginePanic(err, "runId", p.runID)
			return sawTerminal, err
		}
		sawTerminal = ev.IsTerminal()
		if werr := p.w.Write(&ev); werr != nil {
			log := p.h.cfg.Logger.With("runId", p.runID)
			if errors.Is(werr, durable.ErrClaimLost) {
				log.Warn("durable run taken over by a successor; stopping this producer", "error", werr)
			} else {
				log.Error("durable append failed; stopping the run", "error", werr)
			}
			p.cancel(werr)
			return sawTerminal, werr
		}
	}
	return sawTerminal, nil
}

// events starts the engine. Not inlined: the options it passes by value
// would be in drive's frame, under every wait of the run's model.
//
//go:noinline
func (p *producer) events(opts *chat.Options) iter.Seq2[agui.Event, error] {
	return chat.Stream(p.ctx, *opts)
}

// run drives the engine to its end whatever happens to the client, then
// terminalizes and closes the log and the run record.
//
// The producer's goroutine spends the run parked in its model, with run
// and drive on its stack: they hold options by pointer and leave the
// ending to conclude, so that an idle run's stack stays small.
func (p *producer) run(opts *chat.Options) {
	defer p.cancel(nil)
	p.conclude(p.drive(opts))
}

// conclude ends the run after the engine stopped.
func (p *producer) conclude(sawTerminal bool, thrown error) {
	log := p.h.cfg.Logger.With("runId", p.runID)
	if p.align != nil && thrown == nil {
		thrown = p.align.end()
	}
	if lost := p.lost(); lost != nil {
		// The successor owns the log and the record now: write nothing
		// more, not even a terminal, and leave the log to it.
		log.Warn("durable run claim lost; leaving the log to the successor", "error", lost)
		return
	}
	if p.detached(thrown) {
		// Aborted (say, by a shutdown) after the run detached from its
		// client, with no cancel: the events produced so far are stored,
		// but the log stays open and un-terminalized and the record
		// running, for whoever drives the run next (a takeover, or
		// recovery's producer-lost end once this producer's lease lapses).
		if err := p.flush(); err != nil {
			log.Error("durable append failed", "error", err)
		}
		log.Info("detached durable run aborted; its log stays open")
		return
	}
	if p.align != nil && !p.align.diverged {
		// A replay cut short (a cancel, a shutdown) still ends its run:
		// what the producer writes now follows the stored prefix.
		p.align = nil
	}
	p.writeEnd(sawTerminal, thrown)
	if err := p.flush(); err != nil {
		log.Error("durable append failed", "error", err)
	}
	if lost := p.lost(); lost != nil {
		log.Warn("durable run claim lost while finishing; leaving the log to the successor", "error", lost)
		return
	}
	p.finish(log)
}

// writeEnd writes the run's terminal event when the engine did not: every
// durable log ends with one, also for an abort (where the live tanstack
// wire has none) and for 0.58.0's empty model turn, so readers know it
// ended.
func (p *producer) writeEnd(sawTerminal bool, thrown error) {
	switch {
	case thrown != nil:
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
		fin := agui.Event{Type: agui.RunFinished, ThreadID: p.threadID, RunID: p.runID, Timestamp: time.Now().UnixMilli()}
		_ = p.w.Write(&fin)
	}
}

// finish saves the thread, closes the log and records the run's outcome.
func (p *producer) finish(log interface {
	Warn(string, ...any)
	Error(string, ...any)
}) {
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
	p.h.metrics.runFinished(patch)
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
// record, stamped when the client went away) and without a source error:
// such a run is not over, only this producer is.
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
