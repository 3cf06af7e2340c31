package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// chatRequest is a POST /api/chat decoded once into engine options.
type chatRequest struct {
	input     *agui.RunInput
	body      []byte // as received: stored for a run a successor may take over
	opts      chat.Options
	format    agui.Format
	runID     string // X-Run-Id: "" for a plain stream
	lastEvent string // Last-Event-ID: a re-attach
	principal Principal
}

// maxIDLen bounds run and thread ids: they are keys in the store and
// appear in offsets and logs.
const maxIDLen = 256

// checkID reports an id the server does not accept: too long, not UTF-8,
// or holding control characters.
func checkID(what, id string) error {
	if len(id) > maxIDLen {
		return fmt.Errorf("%s is longer than %d bytes", what, maxIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%s is not valid UTF-8", what)
	}
	for _, c := range id {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%s holds a control character", what)
		}
	}
	return nil
}

// decodeChat reads and validates a chat POST (the body is parsed once,
// agui.ParseRunInput). Its engine options are built by prepareRun, once
// the request is admitted. On failure it has answered the request.
func (h *Handler) decodeChat(w http.ResponseWriter, r *http.Request) (*chatRequest, bool) {
	body, ok := readBody(w, r, h.cfg.MaxBodyBytes, h.cfg.bodyTimeout())
	if !ok {
		return nil, false
	}
	in, err := agui.ParseRunInput(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return nil, false
	}
	for what, id := range map[string]string{"threadId": in.ThreadID, "runId": in.RunID, "parentRunId": in.ParentRunID} {
		if err := checkID(what, id); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
			return nil, false
		}
	}
	cr := &chatRequest{input: in, body: body, format: acceptFormat(r)}
	if h.cfg.Store != nil {
		cr.runID = r.Header.Get("X-Run-Id")
		cr.lastEvent = r.Header.Get("Last-Event-ID")
	}
	if cr.runID != "" {
		if err := checkID("X-Run-Id", cr.runID); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
			return nil, false
		}
	}
	return cr, true
}

// prepareRun builds the engine options of an admitted request that runs
// the engine. Not before: the application's Options may act on the
// request's thread (goai serve readies the thread's workspace), which a
// principal refused the thread must not reach. On failure it has answered
// the request.
func (h *Handler) prepareRun(w http.ResponseWriter, r *http.Request, cr *chatRequest) bool {
	opts, err := h.engineOptions(r, cr.input)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return false
	}
	if cr.runID != "" {
		opts.RunID = cr.runID
	}
	cr.opts = opts
	return true
}

// engineOptions builds a request's engine options from its parsed body:
// the application's Options, then what the request itself carries
// (messages, ids, state, resume answers, client tools, an output schema).
// r is nil when a successor re-drives a stored request (Redrive).
func (h *Handler) engineOptions(r *http.Request, in *agui.RunInput) (chat.Options, error) {
	msgs, _, err := agui.ConvertMessages(in.RawMessages)
	if err != nil {
		return chat.Options{}, fmt.Errorf("messages: %w", err)
	}
	opts, err := h.cfg.Options(&Request{HTTP: r, Input: in, Messages: msgs})
	if err != nil {
		return chat.Options{}, err
	}
	opts.Messages = msgs
	opts.ThreadID = in.ThreadID
	opts.RunID = in.RunID
	opts.ParentRunID = in.ParentRunID
	opts.State = in.State
	opts.Profile = h.cfg.Profile
	// The engine's own error lines (a recovered panic's stack among them)
	// go to the server's logger unless the application routed them.
	switch {
	case opts.Debug == nil:
		opts.Debug = &chat.Debug{Logger: h.cfg.Logger}
	case opts.Debug.Logger == nil:
		d := *opts.Debug
		d.Logger = h.cfg.Logger
		opts.Debug = &d
	}
	for _, e := range in.Resume {
		opts.Resume = append(opts.Resume, chat.ResumeItem{InterruptID: e.InterruptID, Status: e.Status, Payload: e.Payload, Metadata: e.Metadata})
	}
	opts.Tools = MergeTools(opts.Tools, in.Tools)
	if opts.OutputSchema == nil {
		// A client asks for structured output with forwardedProps.outputSchema.
		var fp struct {
			OutputSchema json.RawMessage `json:"outputSchema"`
		}
		if json.Unmarshal(in.ForwardedProps, &fp) == nil && len(fp.OutputSchema) > 0 && string(fp.OutputSchema) != "null" {
			opts.OutputSchema = fp.OutputSchema
		}
	}
	if err := chat.Check(&opts); err != nil {
		return chat.Options{}, err
	}
	return opts, nil
}
