package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Action is what a request wants to do, passed to Config.Authorize.
type Action string

// Actions.
const (
	// ActionStart starts a run (POST /api/chat), writing its thread.
	ActionStart Action = "start"
	// ActionResume re-attaches to a run with Last-Event-ID (a POST that
	// repeats the run's request after a cut connection).
	ActionResume Action = "resume"
	// ActionJoin reads a run's log (GET ?runId=&offset=).
	ActionJoin Action = "join"
	// ActionHydrate reads a thread (GET ?threadId=).
	ActionHydrate Action = "hydrate"
	// ActionCancel cancels a run.
	ActionCancel Action = "cancel"
	// ActionInfo reads the server's description (GET /api/info).
	ActionInfo Action = "info"
)

// Principal names who makes a request. Runs and threads record the
// principal that started them, and only that principal may join, hydrate,
// overwrite or cancel them. The empty Principal is the anonymous user of an
// open server.
type Principal string

// Authorization errors an Authorize func returns; any other error is a 403
// too.
var (
	// ErrUnauthenticated: no valid credentials (HTTP 401).
	ErrUnauthenticated = errors.New("authentication required")
	// ErrForbidden: valid credentials that may not do this (HTTP 403).
	ErrForbidden = errors.New("forbidden")
)

// SessionCookie is the cookie POST /api/login sets.
const SessionCookie = "goai_session"

// sessionTTL bounds a login session.
const sessionTTL = 7 * 24 * time.Hour

// maxSessions bounds the session table; past it the oldest is dropped.
const maxSessions = 10000

type identityKey struct{}

// TokenPrincipal returns the principal the request's credentials (a
// Config.Tokens bearer token or a login session) name, for use inside
// Config.Authorize.
func TokenPrincipal(r *http.Request) (Principal, bool) {
	p, ok := r.Context().Value(identityKey{}).(Principal)
	return p, ok
}

// NewID returns a random 128-bit identifier (32 hex digits), as the server
// mints for run, thread and session ids.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

type session struct {
	principal Principal
	expires   time.Time
}

// sessions is the in-memory table of login sessions: the cookie holds a
// random id, never the token.
type sessions struct {
	mu sync.Mutex
	m  map[string]session
}

func (s *sessions) create(p Principal) string {
	id := NewID()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]session{}
	}
	if len(s.m) >= maxSessions {
		var oldest string
		var at time.Time
		for k, v := range s.m {
			if v.expires.Before(now) {
				delete(s.m, k)
				continue
			}
			if oldest == "" || v.expires.Before(at) {
				oldest, at = k, v.expires
			}
		}
		if len(s.m) >= maxSessions {
			delete(s.m, oldest)
		}
	}
	s.m[id] = session{principal: p, expires: now.Add(sessionTTL)}
	return id
}

func (s *sessions) lookup(id string) (Principal, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	if !ok {
		return "", false
	}
	if time.Now().After(v.expires) {
		delete(s.m, id)
		return "", false
	}
	return v.principal, true
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// authRequired reports whether the API needs credentials.
func (h *Handler) authRequired() bool { return len(h.cfg.Tokens) > 0 || h.cfg.Authorize != nil }

// tokenPrincipal finds the principal of token, comparing in constant time
// against every configured token.
func (h *Handler) tokenPrincipal(token string) (Principal, bool) {
	var found Principal
	ok := 0
	for t, p := range h.cfg.Tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			found, ok = p, 1
		}
	}
	return found, ok == 1
}

// identify resolves the request's credentials: a bearer token or a session
// cookie.
func (h *Handler) identify(r *http.Request) (Principal, bool) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, token, _ := strings.Cut(auth, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return "", false
		}
		return h.tokenPrincipal(strings.TrimSpace(token))
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		return h.sessions.lookup(c.Value)
	}
	return "", false
}

// authorize decides whether r may do act and returns its principal. On
// refusal it has written the error response.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, act Action) (Principal, bool) {
	p, known := h.identify(r)
	if h.cfg.Authorize != nil {
		if known {
			r = r.WithContext(context.WithValue(r.Context(), identityKey{}, p))
		}
		ap, err := h.cfg.Authorize(r, act)
		switch {
		case err == nil:
			return ap, true
		case errors.Is(err, ErrUnauthenticated):
			writeError(w, http.StatusUnauthorized, "unauthenticated", err.Error())
		default:
			writeError(w, http.StatusForbidden, "forbidden", err.Error())
		}
		return "", false
	}
	if len(h.cfg.Tokens) == 0 {
		return "", true // an open server (local development)
	}
	if !known {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "authentication required: send Authorization: Bearer <token> or log in")
		return "", false
	}
	return p, true
}

// sessionState is the body of GET /api/session.
type sessionState struct {
	AuthRequired  bool `json:"authRequired"`
	Authenticated bool `json:"authenticated"`
}

func (h *Handler) serveSession(w http.ResponseWriter, r *http.Request) {
	st := sessionState{AuthRequired: h.authRequired()}
	if !st.AuthRequired {
		st.Authenticated = true
	} else {
		_, st.Authenticated = h.identify(r)
		if h.cfg.Authorize != nil && !st.Authenticated {
			_, err := h.cfg.Authorize(r, ActionInfo)
			st.Authenticated = err == nil
		}
	}
	writeJSON(w, http.StatusOK, st)
}

func (h *Handler) serveLogin(w http.ResponseWriter, r *http.Request) {
	if !h.limits.allowLogin(clientIP(r)) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "rate_limited", "too many login attempts; retry later")
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if !decodeJSONBody(w, r, 64<<10, &body) {
		return
	}
	p, ok := h.tokenPrincipal(body.Token)
	if !ok || body.Token == "" {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "wrong token")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: h.sessions.create(p), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		MaxAge: int(sessionTTL / time.Second),
	})
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) serveLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		h.sessions.drop(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) serveInfo(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.authorize(w, r, ActionInfo); !ok {
		return
	}
	info := h.cfg.Info
	if info == nil {
		info = map[string]any{}
	}
	writeJSON(w, http.StatusOK, info)
}
