package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of the resource bounds.
const (
	// DefaultBodyTimeout bounds reading one request body: a client that
	// trickles its body is cut off.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultRate and DefaultBurst bound each principal's chat POSTs.
	DefaultRate  = 10 // per second
	DefaultBurst = 40
)

// loopbackHosts are the Host names a loopback-bound server answers.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// LoopbackHosts returns the Host names a server bound to a loopback address
// accepts (Config.AllowedHosts), plus extra names.
func LoopbackHosts(extra ...string) []string {
	return append(slices.Clip(loopbackHosts), extra...)
}

// guard wraps every route: panic recovery, request logging and metrics,
// the Host check, CORS for the allowed origins, the cross-origin check on
// state-changing requests, Content-Type on API POSTs and the body read
// deadline.
func (h *Handler) guard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	for _, o := range h.cfg.AllowedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			h.cfg.Logger.Warn("ignoring an invalid allowed origin", "origin", o, "error", err)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer h.endRequest(sw, r, time.Now())
		if !h.admitRequest(sw, r, cop) {
			return
		}
		var body *bodyTracker
		if r.Body != nil && r.Body != http.NoBody {
			body = &bodyTracker{ReadCloser: r.Body}
			r.Body = body
		}
		next.ServeHTTP(sw, r)
		if body != nil && !body.eof {
			// The handler answered without reading the whole body: the
			// server drains what is left before reusing the connection,
			// which a client trickling its body must not be able to
			// stretch (the deadline is reset for the next request).
			_ = http.NewResponseController(sw).SetReadDeadline(time.Now().Add(time.Second))
		}
	})
}

// endRequest, deferred by guard, recovers a handler's panic (answering
// 500 if nothing was written) and logs and counts the request.
func (h *Handler) endRequest(sw *statusWriter, r *http.Request, start time.Time) {
	if v := recover(); v != nil {
		if v == http.ErrAbortHandler {
			panic(v)
		}
		_ = h.recovered(v, "method", r.Method, "path", r.URL.Path)
		if !sw.wrote {
			writeError(sw, http.StatusInternalServerError, InternalCode, "internal server error")
		}
	}
	h.metrics.request(sw.status())
	// Never the query (it may carry ids), the token or the cookie.
	h.cfg.Logger.Info("http request", "method", r.Method, "path", r.URL.Path, "status", sw.status(), "duration", time.Since(start).Round(time.Microsecond))
}

// admitRequest applies guard's checks before the route: the Host, CORS
// (answering a preflight itself), cross-origin protection and the
// Content-Type of API POSTs. It reports whether the route may run; if
// not, it has answered.
func (h *Handler) admitRequest(w http.ResponseWriter, r *http.Request, cop *http.CrossOriginProtection) bool {
	if !h.hostAllowed(r.Host) {
		writeError(w, http.StatusMisdirectedRequest, "bad_host", fmt.Sprintf("this server does not answer for host %q", r.Host))
		return false
	}
	origin := r.Header.Get("Origin")
	allowed := origin != "" && slices.Contains(h.cfg.AllowedOrigins, origin)
	if allowed {
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Add("Vary", "Origin")
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		if !allowed {
			writeError(w, http.StatusForbidden, "cross_origin", "cross-origin requests from this origin are not allowed")
			return false
		}
		hd := w.Header()
		hd.Set("Access-Control-Allow-Methods", "GET, POST")
		hd.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, X-Run-Id, Last-Event-ID, Accept")
		hd.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	if err := cop.Check(r); err != nil {
		writeError(w, http.StatusForbidden, "cross_origin", "cross-origin request refused: "+err.Error())
		return false
	}
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/api/logout" && !isJSON(r.Header.Get("Content-Type")) {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "POST bodies must be Content-Type: application/json")
		return false
	}
	return true
}

// bodyTracker notes whether a request body was read to its end.
type bodyTracker struct {
	io.ReadCloser
	eof bool
}

func (b *bodyTracker) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// hostAllowed applies Config.AllowedHosts (DNS-rebinding defence).
func (h *Handler) hostAllowed(hostport string) bool {
	if len(h.cfg.AllowedHosts) == 0 {
		return true
	}
	host := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	for _, a := range h.cfg.AllowedHosts {
		if strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// isTimeout reports a body read cut by the read deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// statusWriter records the status of a response for logs and metrics.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if !s.wrote {
		s.code, s.wrote = http.StatusOK, true
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusWriter) status() int {
	if !s.wrote {
		return http.StatusOK
	}
	return s.code
}

// Unwrap lets http.ResponseController reach Flush and the deadlines.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// limits holds the request-rate limiters.
type limits struct {
	mu     sync.Mutex
	rate   rate.Limit
	burst  int
	byUser map[Principal]*rate.Limiter
	byIP   map[string]*rate.Limiter // login attempts

	plainRuns atomic.Int64 // plain streams in flight (durable runs: producers)
}

// maxLimiters bounds each limiter table; past it the table starts afresh
// (a reset only forgives, it never blocks anyone).
const maxLimiters = 10000

func (l *limits) limiter(m *map[Principal]*rate.Limiter, key Principal, r rate.Limit, burst int) *rate.Limiter {
	if *m == nil || len(*m) >= maxLimiters {
		*m = map[Principal]*rate.Limiter{}
	}
	lim := (*m)[key]
	if lim == nil {
		lim = rate.NewLimiter(r, burst)
		(*m)[key] = lim
	}
	return lim
}

// allowRequest spends one token of principal's request budget.
func (l *limits) allowRequest(p Principal) bool {
	if l.rate < 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limiter(&l.byUser, p, l.rate, l.burst).Allow()
}

// allowLogin spends one of ip's login attempts (5 at once, then one every
// 2 s): a token cannot be guessed through the login form.
func (l *limits) allowLogin(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byIP == nil || len(l.byIP) >= maxLimiters {
		l.byIP = map[string]*rate.Limiter{}
	}
	lim := l.byIP[ip]
	if lim == nil {
		lim = rate.NewLimiter(rate.Every(2*time.Second), 5)
		l.byIP[ip] = lim
	}
	return lim.Allow()
}

// activeRuns counts the runs in flight here.
func (h *Handler) activeRuns() int { return int(h.limits.plainRuns.Load()) + h.prod.count() }

// admitRun answers 429 with Retry-After when Config.MaxRuns runs are in
// flight.
func (h *Handler) admitRun(w http.ResponseWriter) bool {
	if h.cfg.MaxRuns > 0 && h.activeRuns() >= h.cfg.MaxRuns {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusTooManyRequests, "too_many_runs", fmt.Sprintf("%d runs are in flight, the most this server runs at once; retry later", h.cfg.MaxRuns))
		return false
	}
	return true
}
