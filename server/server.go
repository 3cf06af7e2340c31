// Package server serves chat runs over HTTP: POST /api/chat takes the
// TanStack AI client's request body (AG-UI RunAgentInput) and streams the
// run as Server-Sent Events, or NDJSON when the client accepts it.
package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// DefaultMaxBodyBytes bounds a request body.
const DefaultMaxBodyBytes = 8 << 20

// Request is a validated chat request.
type Request struct {
	HTTP     *http.Request
	Input    *agui.RunInput
	Messages []agui.ModelMessage
}

// Config configures a chat handler.
type Config struct {
	// Options builds the chat options of one request: adapter, server
	// tools, middleware. Messages, ids, resume and state are filled from
	// the request; client tools are merged in (server tools win).
	Options func(req *Request) (chat.Options, error)
	// Profile is the wire profile; default agui.ProfileAGUI.
	Profile agui.Profile
	// MaxBodyBytes bounds the request body; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logger receives request failures; default slog.Default().
	Logger *slog.Logger
	// Store, when set, makes runs durable: a run outlives its connection,
	// every event is appended to the run's log before delivery (SSE id: /
	// NDJSON envelope carry offsets), and clients re-attach with
	// Last-Event-ID or GET ?runId=&offset=. Requests without X-Run-Id stay
	// plain streams.
	Store durable.Store
	// BatchSize is how many events a durable producer appends at once;
	// default 32 (terminal and tool-end events flush early).
	BatchSize int
	// CancelPoll is how often a producer checks its run record for a cancel
	// recorded by another replica; default 500ms.
	CancelPoll time.Duration
}

func (c *Config) batchSize() int {
	if c.BatchSize > 0 {
		return c.BatchSize
	}
	return 32
}

func (c *Config) cancelPoll() time.Duration {
	if c.CancelPoll > 0 {
		return c.CancelPoll
	}
	return 500 * time.Millisecond
}

// ChatHandler returns the /api/chat handler: POST streams a run, GET joins
// a durable run or hydrates a thread, POST .../cancel stops a run.
func ChatHandler(cfg Config) *Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Profile == "" {
		cfg.Profile = agui.ProfileAGUI
	}
	return &Handler{cfg: cfg}
}

type Handler struct {
	cfg  Config
	prod producers
}

// Wait blocks until every durable producer started by h has finished.
func (h *Handler) Wait() { h.prod.wg.Wait() }

// StopAll aborts every producer of this process with cause.
func (h *Handler) StopAll(cause error) {
	h.prod.mu.Lock()
	for _, c := range h.prod.cancel {
		c(cause)
	}
	h.prod.mu.Unlock()
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"error": msg})
	_, _ = w.Write(append(b, '\n'))
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/cancel") {
		h.serveCancel(w, r)
		return
	}
	if r.Method == http.MethodGet {
		h.serveGet(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
			return
		}
		writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return
	}
	in, err := agui.ParseRunInput(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var raw struct {
		Messages json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(body, &raw)
	msgs, _, err := agui.ConvertMessages(raw.Messages)
	if err != nil {
		writeError(w, http.StatusBadRequest, "messages: "+err.Error())
		return
	}
	req := &Request{HTTP: r, Input: in, Messages: msgs}
	opts, err := h.cfg.Options(req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	opts.Messages = msgs
	opts.ThreadID = in.ThreadID
	opts.RunID = in.RunID
	opts.ParentRunID = in.ParentRunID
	opts.State = in.State
	opts.Profile = h.cfg.Profile
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
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}

	format := acceptFormat(r)
	if runID := r.Header.Get("X-Run-Id"); h.cfg.Store != nil && runID != "" {
		opts.RunID = runID
		if last := r.Header.Get("Last-Event-ID"); last != "" {
			// A reconnect re-sends the request: serve the log, never re-run.
			h.serveLog(w, r, runID, last, format, nil)
			return
		}
		h.startDurable(w, r, runID, in, opts, format)
		return
	}
	setStreamHeaders(w, format)
	w.WriteHeader(http.StatusOK)

	fw := &flushWriter{w: w, rc: http.NewResponseController(w)}
	enc := agui.NewWriter(fw, agui.WriterOptions{Format: format, Profile: h.cfg.Profile, ThreadID: in.ThreadID, RunID: in.RunID})
	failed, werr := WriteRun(enc, chat.Stream(r.Context(), opts))
	if failed != nil && werr == nil {
		h.cfg.Logger.Error("chat run failed", "runId", in.RunID, "error", failed)
	}
}

// flushWriter flushes after every frame so events reach the client as they
// are produced.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.rc.Flush()
}

func containsNDJSON(accept string) bool { return strings.Contains(accept, "application/x-ndjson") }

// MergeTools adds the client's tools to the server's: a server tool wins a
// name collision; a client-only tool becomes a client tool (no Execute).
func MergeTools(server []*chat.Tool, client []agui.ClientTool) []*chat.Tool {
	out := append([]*chat.Tool(nil), server...)
	have := make(map[string]bool, len(server))
	for _, t := range server {
		have[t.Name] = true
	}
	for _, c := range client {
		if have[c.Name] || c.Name == "" {
			continue
		}
		have[c.Name] = true
		out = append(out, &chat.Tool{Name: c.Name, Description: c.Description, InputSchema: c.Parameters})
	}
	return out
}
