// Package server serves chat runs over HTTP: POST /api/chat takes the
// TanStack AI client's request body (AG-UI RunAgentInput) and streams the
// run as Server-Sent Events, or NDJSON when the client accepts it.
//
// The API, its routes and the checks every request passes are listed in
// routes.go. With a [durable.Store] runs are durable: they outlive their
// connection, and clients re-attach, hydrate threads and cancel.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// DefaultMaxBodyBytes bounds a request body.
const DefaultMaxBodyBytes = 8 << 20

// Request is a validated chat request.
type Request struct {
	// HTTP is the request, or nil when a successor re-drives a run from
	// its stored request after the producing server died (Redrive).
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
	// Linger is how long an idle durable producer holds an event to share
	// its append with the ones right behind it. Appends are a group commit
	// either way: one starts as soon as the previous one has finished, and
	// carries everything queued meanwhile, so no event waits longer than
	// one append plus Linger. Default 0 (measured: lingering only adds
	// latency for paced tokens, and bursts batch during appends anyway).
	Linger time.Duration
	// ReleaseIdleAfter is how long (up to twice that) a durable stream
	// waits for its run's next event before the handler takes its
	// connection over from net/http, which releases net/http's two
	// goroutines and buffers for it (about 40 KiB a waiting stream);
	// default DefaultReleaseIdleAfter, negative: never. HTTP/1.1 without
	// TLS only; when the stream ends, the connection goes back to the
	// http.Server that accepted it. Handler.Shutdown ends such streams.
	ReleaseIdleAfter time.Duration
	// CancelPoll is how often a producer checks its run record for a cancel
	// recorded by another replica; default 500ms.
	CancelPoll time.Duration
	// Fallback serves the requests no API route matches (the web UI);
	// default 404.
	Fallback http.Handler

	// Tokens maps bearer tokens to the principals they authenticate. When
	// set, every /api/ request but /api/session, /api/login and
	// /api/logout needs Authorization: Bearer <token>, or the session
	// cookie POST /api/login hands out for a token. Tokens are compared in
	// constant time and never logged.
	Tokens map[string]Principal
	// Authorize, when set, decides every API request: it returns the
	// request's principal, or an error (ErrUnauthenticated: 401; any
	// other: 403). TokenPrincipal(r) gives what Tokens identified, if
	// anything. Ownership is enforced on top of it: a principal never
	// reaches another principal's runs and threads.
	Authorize func(r *http.Request, act Action) (Principal, error)
	// AllowedOrigins are the browser origins (scheme://host[:port]) besides
	// the server's own that may make state-changing requests; CORS
	// (with preflight) is answered for them only.
	AllowedOrigins []string
	// AllowedHosts, when set, are the only Host names answered (a
	// DNS-rebinding defence for a server bound to loopback; see
	// LoopbackHosts). Empty: any Host.
	AllowedHosts []string
	// MaxRuns caps the runs in flight in this process; past it a new run
	// is answered 429 with Retry-After. Zero: no cap.
	MaxRuns int
	// RequestsPerSecond and Burst bound each principal's chat POSTs
	// (token bucket); zero means DefaultRate and DefaultBurst, negative
	// RequestsPerSecond means no bound.
	RequestsPerSecond float64
	Burst             int
	// BodyTimeout bounds reading a request body; default
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Info is what GET /api/info answers, as JSON (for example the model,
	// wire profile and store in use). Never put secrets in it.
	Info any
}

func (c *Config) bodyTimeout() time.Duration {
	if c.BodyTimeout > 0 {
		return c.BodyTimeout
	}
	return DefaultBodyTimeout
}

func (c *Config) releaseIdleAfter() time.Duration {
	if c.ReleaseIdleAfter == 0 {
		return DefaultReleaseIdleAfter
	}
	return max(c.ReleaseIdleAfter, 0)
}

func (c *Config) linger() time.Duration { return max(c.Linger, 0) }

func (c *Config) cancelPoll() time.Duration {
	if c.CancelPoll > 0 {
		return c.CancelPoll
	}
	return 500 * time.Millisecond
}

// ChatHandler returns the handler of the chat API (see routes.go): POST
// /api/chat streams a run, GET joins a durable run or hydrates a thread,
// POST /api/chat/cancel stops a run.
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
	h := &Handler{cfg: cfg}
	h.prod.store, h.prod.pollEvery, h.prod.logger, h.prod.recovered = cfg.Store, cfg.cancelPoll(), cfg.Logger, h.recovered
	h.limits.rate, h.limits.burst = rate.Limit(cfg.RequestsPerSecond), cfg.Burst
	if cfg.RequestsPerSecond == 0 {
		h.limits.rate = DefaultRate
	}
	if h.limits.burst <= 0 {
		h.limits.burst = DefaultBurst
	}
	h.root = h.routes()
	return h
}

// Handler serves the chat API. Create it with ChatHandler.
type Handler struct {
	cfg      Config
	root     http.Handler
	prod     producers
	sessions sessions
	limits   limits
	metrics  metrics
	draining atomic.Bool
	conns    connStreams // durable streams taken over from net/http
	frames   sync.Pool   // *[]byte: buffers for a durable batch's frames (logStream.send)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.root.ServeHTTP(w, r) }

// Drain makes /readyz report not ready and refuses new runs (503), for a
// graceful shutdown; runs in flight go on.
func (h *Handler) Drain() { h.draining.Store(true) }

// Wait blocks until every durable producer started by h has finished.
func (h *Handler) Wait() { h.prod.wg.Wait() }

// Shutdown ends the durable streams whose connections the handler took
// over from net/http (Config.ReleaseIdleAfter; http.Server's
// Shutdown and Close do not see those). It waits for them to end with
// their logs until ctx is done, then cuts the rest short, so that their
// clients resume elsewhere, and returns ctx's error. Call it once the runs
// produced here had their chance to end (Wait, StopAll): after
// http.Server.Shutdown, but before an httptest.Server's Close, whose wait
// for its connections must not see one handed back meanwhile.
func (h *Handler) Shutdown(ctx context.Context) error {
	return h.conns.shutdown(ctx)
}

// StopAll aborts every producer of this process with cause.
func (h *Handler) StopAll(cause error) {
	h.prod.mu.Lock()
	for _, c := range h.prod.cancel {
		c(cause)
	}
	h.prod.mu.Unlock()
}

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
