package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// transcript captures a durable run's conversation for its thread. Its
// middleware, appended last to the run's middleware, records the
// conversation as UIMessage JSON when the run ends (OnFinish, OnError,
// OnAbort) or pauses on an interrupt (the interrupt RUN_FINISHED in
// OnChunk); the producer saves it once the run's events are in the log.
type transcript struct {
	mu   sync.Mutex
	msgs json.RawMessage
	err  error
}

func (tr *transcript) middleware() *chat.Middleware {
	return &chat.Middleware{
		Name: "goai-durable-thread",
		OnChunk: func(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
			if ev.Type == agui.RunFinished && ev.Outcome != nil && ev.Outcome.Type == "interrupt" {
				tr.capture(c)
			}
			return chat.Pass, nil
		},
		ChunkTypes: []agui.EventType{agui.RunFinished}, // the hook is on every chunk's path
		OnFinish:   func(c *chat.Context, _ chat.FinishInfo) error { tr.capture(c); return nil },
		OnError:    func(c *chat.Context, _ chat.ErrorInfo) error { tr.capture(c); return nil },
		OnAbort:    func(c *chat.Context, _ chat.AbortInfo) error { tr.capture(c); return nil },
	}
}

// capture encodes the conversation now: a deep snapshot, whatever the
// engine does with its messages afterwards.
func (tr *transcript) capture(c *chat.Context) {
	msgs := c.Conversation()
	if msgs == nil {
		msgs = c.Messages
	}
	b, err := encodeUIMessages(msgs)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.msgs, tr.err = b, err
}

// final returns the captured conversation, nil when none was captured.
func (tr *transcript) final() (json.RawMessage, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.msgs, tr.err
}

// encodeUIMessages converts a conversation to the UIMessage JSON array a
// client hydrates from.
func encodeUIMessages(msgs []agui.ModelMessage) (json.RawMessage, error) {
	ui := agui.ModelToUIMessages(msgs)
	if ui == nil {
		ui = []agui.UIMessage{}
	}
	return agui.AppendUIMessages(make([]byte, 0, 1024), ui)
}

func marshalNoEscape(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// saveThread stores the thread's transcript (UIMessage JSON) and the
// interrupts the run paused on, if any. A failure is logged, never the
// run's failure.
func (p *producer) saveThread(msgs json.RawMessage, pending []agui.Interrupt) {
	th := durable.Thread{ThreadID: p.threadID, Messages: msgs, RunID: p.runID, UpdatedAt: time.Now(), Owner: string(p.owner)}
	var err error
	if len(pending) > 0 {
		th.Interrupts, err = marshalNoEscape(pending)
	}
	if err == nil {
		err = p.threads.SaveThread(p.bg(), th)
	}
	if err != nil {
		p.h.cfg.Logger.Warn("saving the durable run's thread failed", "runId", p.runID, "threadId", p.threadID, "error", err)
	}
}

// Hydration is the body of GET /api/chat?threadId=: what a reloading client
// paints before joining ActiveRun (docs/durable.md §1.4).
type Hydration struct {
	// Messages is the thread's transcript as UIMessages ([] when none).
	Messages json.RawMessage `json:"messages"`
	// ActiveRun is the thread's running run, to join with
	// GET ?runId=&offset=-1; nil when none runs.
	ActiveRun *ActiveRun `json:"activeRun"`
	// Interrupts are the pending interrupts of the thread's latest run,
	// nil when it did not pause.
	Interrupts *PendingInterrupts `json:"interrupts"`
	// LastRun is the run that saved the transcript last, once it ended, so
	// a client can show how it ended (a failed or cancelled run's error,
	// and its partial answer from the run's log, which the transcript
	// lacks); nil when unknown.
	LastRun *LastRun `json:"lastRun,omitempty"`
}

// LastRun is how a thread's latest run ended.
type LastRun struct {
	RunID  string            `json:"runId"`
	Status durable.RunStatus `json:"status"`
	Error  *durable.RunError `json:"error,omitempty"`
}

// ActiveRun names a thread's running run.
type ActiveRun struct {
	RunID string `json:"runId"`
}

// PendingInterrupts are the interrupts a paused run waits on, as its
// RUN_FINISHED outcome listed them (agui.Interrupt objects).
type PendingInterrupts struct {
	RunID   string          `json:"runId"`
	Pending json.RawMessage `json:"pending"`
}

// hydrate serves a thread's state. The active run is read before the
// transcript: producers save the final transcript before their record
// leaves running, so "no active run" implies the transcript is final.
func (h *Handler) hydrate(w http.ResponseWriter, r *http.Request, threadID string) {
	if h.cfg.Store == nil {
		writeError(w, http.StatusNotFound, "no_store", "this server keeps no run logs")
		return
	}
	principal, ok := h.authorize(w, r, ActionHydrate)
	if !ok {
		return
	}
	if err := checkID("threadId", threadID); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	ctx := r.Context()
	foreign := func() {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("thread %q belongs to another user", threadID))
	}
	rec, active, err := h.cfg.Store.FindActiveRun(ctx, threadID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store", "finding the thread's active run: "+err.Error())
		return
	}
	if active && rec.Owner != string(principal) {
		foreign()
		return
	}
	out := Hydration{Messages: json.RawMessage("[]")}
	if active {
		out.ActiveRun = &ActiveRun{RunID: rec.RunID}
	}
	if ts, ok := h.cfg.Store.(durable.ThreadStore); ok {
		th, found, err := ts.LoadThread(ctx, threadID)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "store", "loading the thread: "+err.Error())
			return
		}
		if found && th.Owner != string(principal) {
			foreign()
			return
		}
		if found {
			out.Messages = th.Messages
			// A newer run that is running supersedes the paused one.
			if len(th.Interrupts) > 0 && string(th.Interrupts) != "[]" && (!active || rec.RunID == th.RunID) {
				out.Interrupts = &PendingInterrupts{RunID: th.RunID, Pending: th.Interrupts}
			}
			if last, err := h.cfg.Store.Get(ctx, th.RunID); err == nil && last.Status != durable.StatusRunning {
				out.LastRun = &LastRun{RunID: last.RunID, Status: last.Status, Error: last.Error}
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}
