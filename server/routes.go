package server

import (
	"net/http"
	"strings"

	"github.com/goai-sdk/goai/durable"
)

// routes is the whole HTTP API in one place. Every route passes the
// checks of (*Handler).guard first: request logging and metrics, panic
// recovery, the Host check, the cross-origin check on state-changing
// requests (and CORS preflights for Config.AllowedOrigins), and
// Content-Type: application/json on POST under /api/.
//
//	POST /api/chat                   start a run (SSE, or NDJSON with Accept: application/x-ndjson
//	                                 or ?format=ndjson); with X-Run-Id and a store the run is
//	                                 durable; with Last-Event-ID it re-attaches after that offset
//	GET  /api/chat?runId=R&offset=O  join a durable run's log (O: -1 from the start, now, or an offset)
//	GET  /api/chat?threadId=T        hydrate a thread: {messages, activeRun, interrupts}
//	POST /api/chat/cancel            {"runId"}: record a cancel
//	GET  /api/chat/runs/{id}         join (offset from ?offset or Last-Event-ID; default -1)
//	POST /api/chat/runs/{id}/cancel  cancel
//	GET  /api/chat/threads/{id}      hydrate
//	GET  /api/session                {"authRequired", "authenticated"} (no credentials needed)
//	POST /api/login                  {"token"}: 204 and the goai_session cookie; 401 for a wrong token
//	POST /api/logout                 204; drops the session
//	GET  /api/info                   Config.Info as JSON
//	GET  /healthz                    200 while the process serves
//	GET  /readyz                     200 when the store is writable and still the same file
//	GET  /metrics                    Prometheus text format, goai_ series
//
// Every /api/ route but /api/session, /api/login and /api/logout needs
// credentials when Config.Tokens or Config.Authorize is set. Errors are
// {"error": "...", "code": "..."}.
func (h *Handler) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chat", h.postChat)
	mux.HandleFunc("GET /api/chat", h.getChat)
	mux.HandleFunc("POST /api/chat/cancel", h.postCancel)
	mux.HandleFunc("GET /api/chat/runs/{id}", h.getRun)
	mux.HandleFunc("POST /api/chat/runs/{id}/cancel", h.postCancel)
	mux.HandleFunc("GET /api/chat/threads/{id}", h.getThread)
	mux.HandleFunc("GET /api/session", h.serveSession)
	mux.HandleFunc("POST /api/login", h.serveLogin)
	mux.HandleFunc("POST /api/logout", h.serveLogout)
	mux.HandleFunc("GET /api/info", h.serveInfo)
	mux.HandleFunc("GET /healthz", h.serveHealthz)
	mux.HandleFunc("GET /readyz", h.serveReadyz)
	mux.HandleFunc("GET /metrics", h.serveMetrics)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such API route: "+r.Method+" "+r.URL.Path)
	})
	fallback := h.cfg.Fallback
	if fallback == nil {
		// Mounted alone at some path of the application's own mux: the
		// chat API answers there (POST runs, GET joins and hydrates,
		// .../cancel cancels).
		fallback = http.HandlerFunc(h.anyPath)
	}
	mux.Handle("/", fallback)
	return h.guard(mux)
}

// anyPath serves the chat API on a path of the application's choosing.
func (h *Handler) anyPath(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/cancel"):
		h.postCancel(w, r)
	case r.Method == http.MethodPost:
		h.postChat(w, r)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		h.getChat(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET or POST")
	}
}

// postChat starts a run, or re-attaches to a durable one.
//
// Its goroutine then spends the stream's life in serveStream or serveLog:
// the checks come first, in admitChat, so that their frame is not on the
// stack of every open stream.
func (h *Handler) postChat(w http.ResponseWriter, r *http.Request) {
	cr, ok := h.admitChat(w, r)
	switch {
	case !ok:
	case cr.runID != "" && cr.lastEvent != "":
		// A reconnect re-sends the request: serve the log, never re-run.
		h.serveLog(w, r, cr.principal, cr.runID, cr.lastEvent, cr.format, nil)
	case !h.prepareRun(w, r, cr):
	case cr.runID == "":
		h.serveStream(w, r, cr)
	default:
		serve, disc, release := h.startDurable(w, r, cr)
		defer release()
		if serve {
			h.serveLog(w, r, cr.principal, cr.runID, durable.FromStart, cr.format, disc)
		}
	}
}

// admitChat authorizes, rate-limits and decodes a chat POST, and checks
// that its principal may do what it asks; false: it was answered.
func (h *Handler) admitChat(w http.ResponseWriter, r *http.Request) (*chatRequest, bool) {
	if msg := repeatedResume(r); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_request", msg)
		return nil, false
	}
	act := ActionStart
	if h.cfg.Store != nil && r.Header.Get("X-Run-Id") != "" && r.Header.Get("Last-Event-ID") != "" {
		act = ActionResume
	}
	principal, ok := h.authorize(w, r, act)
	if !ok {
		return nil, false
	}
	if !h.limits.allowRequest(principal) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "rate_limited", "too many requests; retry later")
		return nil, false
	}
	cr, ok := h.decodeChat(w, r)
	if !ok {
		return nil, false
	}
	cr.principal = principal
	switch {
	case cr.runID == "":
		// A plain stream keeps no log, but its thread is the thread's
		// owner's all the same: the application's options may act on it
		// (goai serve's agent works in the thread's workspace).
		return cr, h.ownsThread(w, r, cr.input.ThreadID, principal) && h.admitRun(w)
	case cr.lastEvent != "":
		return cr, h.ownsRun(w, r, cr.runID, principal)
	}
	return cr, h.ownsThread(w, r, cr.input.ThreadID, principal) && h.admitRun(w)
}

// getChat joins a durable run (?runId, X-Run-Id) or hydrates a thread
// (?threadId).
func (h *Handler) getChat(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if thread := q.Get("threadId"); thread != "" && q.Get("runId") == "" && r.Header.Get("X-Run-Id") == "" {
		h.hydrate(w, r, thread)
		return
	}
	runID := r.Header.Get("X-Run-Id")
	if runID == "" {
		runID = q.Get("runId")
	}
	h.join(w, r, runID, "")
}

func (h *Handler) getRun(w http.ResponseWriter, r *http.Request) {
	h.join(w, r, r.PathValue("id"), durable.FromStart)
}

func (h *Handler) getThread(w http.ResponseWriter, r *http.Request) {
	h.hydrate(w, r, r.PathValue("id"))
}
