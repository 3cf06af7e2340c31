package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
)

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789ab"
)

// newAuthEnv serves two users, each with a token of their own.
func newAuthEnv(t *testing.T, mod func(*server.Config)) (*httptest.Server, *server.Handler, durable.Store) {
	t.Helper()
	store := durable.NewMemory(nil)
	cfg := server.Config{
		Store:  store,
		Tokens: map[string]server.Principal{aliceToken: "alice", bobToken: "bob"},
		Options: func(r *server.Request) (chat.Options, error) {
			n, delay := 3, 5
			switch r.Input.ThreadID {
			case "slow":
				n = 200
			case "held": // waits an hour for its one token: it ends when cancelled
				n, delay = 1, 3_600_000
			}
			return chat.Options{Adapter: scripted.New(slowScenario(t, n, delay)), Debug: chat.DebugNone()}, nil
		},
		CancelPoll: 20 * time.Millisecond,
		Info:       map[string]string{"model": "scripted"},
	}
	if mod != nil {
		mod(&cfg)
	}
	h := server.ChatHandler(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.StopAll(context.Canceled); h.Wait() })
	return srv, h, store
}

type call struct {
	method, path, body string
	hdr                map[string]string
}

func do(t *testing.T, srv *httptest.Server, c call) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if c.body != "" {
		rd = strings.NewReader(c.body)
	}
	req, _ := http.NewRequest(c.method, srv.URL+c.path, rd)
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

func bearer(tok string, more ...string) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + tok}
	for i := 0; i+1 < len(more); i += 2 {
		h[more[i]] = more[i+1]
	}
	return h
}

func wantStatus(t *testing.T, what string, got, want int, body string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %d %s, want %d", what, got, body, want)
	}
	if want >= 400 {
		var e struct{ Error, Code string }
		if json.Unmarshal([]byte(body), &e) != nil || e.Error == "" || e.Code == "" {
			t.Fatalf("%s: error body %q is not {error, code}", what, body)
		}
	}
}

// Two tokens, two principals: each reaches only their own runs and threads.
func TestTwoUsersOwnTheirRunsAndThreads(t *testing.T) {
	srv, h, _ := newAuthEnv(t, nil)
	st, _, b := do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-a", "r-a"), hdr: map[string]string{"X-Run-Id": "r-a"}})
	wantStatus(t, "no credentials", st, 401, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-a", "r-a"), hdr: bearer("wrong-token-0123456789", "X-Run-Id", "r-a")})
	wantStatus(t, "wrong token", st, 401, b)

	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-a", "r-a"), hdr: bearer(aliceToken, "X-Run-Id", "r-a")})
	wantStatus(t, "alice starts", st, 200, b)
	h.Wait()

	for _, c := range []struct {
		what string
		c    call
		want int
	}{
		{"bob joins alice's run", call{method: "GET", path: "/api/chat?runId=r-a&offset=-1"}, 404},
		{"bob joins by path", call{method: "GET", path: "/api/chat/runs/r-a"}, 404},
		{"bob hydrates alice's thread", call{method: "GET", path: "/api/chat?threadId=t-a"}, 403},
		{"bob cancels alice's run", call{method: "POST", path: "/api/chat/cancel", body: `{"runId":"r-a"}`}, 404},
		{"bob overwrites alice's thread", call{method: "POST", path: "/api/chat", body: chatBody("t-a", "r-b"), hdr: map[string]string{"X-Run-Id": "r-b"}}, 403},
		{"bob resumes alice's run", call{method: "POST", path: "/api/chat", body: chatBody("t-b", "r-a"), hdr: map[string]string{"X-Run-Id": "r-a", "Last-Event-ID": "-1"}}, 404},
		{"bob reuses alice's run id", call{method: "POST", path: "/api/chat", body: chatBody("t-b", "r-a"), hdr: map[string]string{"X-Run-Id": "r-a"}}, 404},
	} {
		hdr := bearer(bobToken)
		for k, v := range c.c.hdr {
			hdr[k] = v
		}
		c.c.hdr = hdr
		st, _, b := do(t, srv, c.c)
		wantStatus(t, c.what, st, c.want, b)
	}
	st, _, b = do(t, srv, call{method: "GET", path: "/api/chat?runId=r-a&offset=-1", hdr: bearer(aliceToken)})
	wantStatus(t, "alice joins", st, 200, b)
	if !strings.Contains(b, "RUN_FINISHED") {
		t.Fatalf("alice's join: %s", b)
	}
	st, _, b = do(t, srv, call{method: "GET", path: "/api/chat/threads/t-a", hdr: bearer(aliceToken)})
	wantStatus(t, "alice hydrates", st, 200, b)
	if !strings.Contains(b, `"u-r-a"`) {
		t.Fatalf("alice's hydration: %s", b)
	}
	// Bob's own thread works for bob.
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-b", "r-b"), hdr: bearer(bobToken, "X-Run-Id", "r-b")})
	wantStatus(t, "bob starts his own", st, 200, b)
}

func TestLoginSessionCookie(t *testing.T) {
	srv, _, _ := newAuthEnv(t, nil)
	st, _, b := do(t, srv, call{method: "GET", path: "/api/session"})
	if st != 200 || b != `{"authRequired":true,"authenticated":false}`+"\n" {
		t.Fatalf("session before login: %d %s", st, b)
	}
	st, _, b = do(t, srv, call{method: "POST", path: "/api/login", body: `{"token":"nope"}`})
	wantStatus(t, "wrong login", st, 401, b)
	st, hdr, b := do(t, srv, call{method: "POST", path: "/api/login", body: `{"token":"` + aliceToken + `"}`})
	wantStatus(t, "login", st, 204, b)
	cookies := (&http.Response{Header: hdr}).Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	c := cookies[0]
	if c.Name != server.SessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Value == aliceToken || len(c.Value) != 32 {
		t.Fatalf("session cookie %+v", c)
	}
	withCookie := map[string]string{"Cookie": c.Name + "=" + c.Value}
	st, _, b = do(t, srv, call{method: "GET", path: "/api/session", hdr: withCookie})
	if b != `{"authRequired":true,"authenticated":true}`+"\n" {
		t.Fatalf("session after login: %d %s", st, b)
	}
	st, _, b = do(t, srv, call{method: "GET", path: "/api/info", hdr: withCookie})
	if st != 200 || b != `{"model":"scripted"}`+"\n" {
		t.Fatalf("info: %d %s", st, b)
	}
	st, _, b = do(t, srv, call{method: "GET", path: "/api/info"})
	wantStatus(t, "info without credentials", st, 401, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/logout", hdr: withCookie})
	wantStatus(t, "logout", st, 204, b)
	st, _, b = do(t, srv, call{method: "GET", path: "/api/info", hdr: withCookie})
	wantStatus(t, "info after logout", st, 401, b)
	// Guessing through the login form is rate limited.
	limited := false
	for range 20 {
		st, hdr, _ := do(t, srv, call{method: "POST", path: "/api/login", body: `{"token":"guess"}`})
		if st == http.StatusTooManyRequests && hdr.Get("Retry-After") != "" {
			limited = true
			break
		}
	}
	if !limited {
		t.Fatal("20 wrong logins in a row were never rate limited")
	}
}

func TestAuthorizeDecidesPerAction(t *testing.T) {
	var seen []server.Action
	srv, _, _ := newAuthEnv(t, func(c *server.Config) {
		c.Authorize = func(r *http.Request, act server.Action) (server.Principal, error) {
			seen = append(seen, act)
			p, ok := server.TokenPrincipal(r)
			switch {
			case !ok:
				return "", server.ErrUnauthenticated
			case p == "bob" && act != server.ActionHydrate:
				return "", errors.New("bob may only read threads")
			}
			return p, nil
		}
	})
	st, _, b := do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-b", "r-b"), hdr: bearer(bobToken, "X-Run-Id", "r-b")})
	wantStatus(t, "bob starts", st, 403, b)
	st, _, b = do(t, srv, call{method: "GET", path: "/api/chat?threadId=t-none", hdr: bearer(bobToken)})
	wantStatus(t, "bob hydrates", st, 200, b)
	st, _, b = do(t, srv, call{method: "GET", path: "/api/chat?threadId=t-none"})
	wantStatus(t, "nobody hydrates", st, 401, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-a", "r-a"), hdr: bearer(aliceToken, "X-Run-Id", "r-a")})
	wantStatus(t, "alice starts", st, 200, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-a", "r-a"), hdr: bearer(aliceToken, "X-Run-Id", "r-a", "Last-Event-ID", "-1")})
	wantStatus(t, "alice resumes", st, 200, b)
	want := []server.Action{server.ActionStart, server.ActionHydrate, server.ActionHydrate, server.ActionStart, server.ActionResume}
	if len(seen) != len(want) {
		t.Fatalf("actions %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("actions %v, want %v", seen, want)
		}
	}
}

func TestBrowserDefences(t *testing.T) {
	srv, _, _ := newAuthEnv(t, func(c *server.Config) {
		c.Tokens = nil // an open local server: the browser checks still apply
		c.AllowedOrigins = []string{"https://app.example"}
		c.AllowedHosts = server.LoopbackHosts()
	})
	// CSRF: a cross-site form can send text/plain only.
	st, _, b := do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t", "r1"), hdr: map[string]string{"Content-Type": "text/plain"}})
	wantStatus(t, "text/plain POST", st, 415, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat/cancel", body: `{"runId":"r1"}`, hdr: map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}})
	wantStatus(t, "cross-site cancel", st, 403, b)
	st, hdr, b := do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t", "r2"), hdr: map[string]string{"Origin": "https://app.example", "Sec-Fetch-Site": "cross-site"}})
	wantStatus(t, "allowed origin", st, 200, b)
	if hdr.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("CORS header %q", hdr.Get("Access-Control-Allow-Origin"))
	}
	st, hdr, b = do(t, srv, call{method: "OPTIONS", path: "/api/chat", hdr: map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}})
	if st != 204 || !strings.Contains(hdr.Get("Access-Control-Allow-Headers"), "X-Run-Id") {
		t.Fatalf("preflight: %d %v %s", st, hdr, b)
	}
	st, _, b = do(t, srv, call{method: "OPTIONS", path: "/api/chat", hdr: map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}})
	wantStatus(t, "preflight from another origin", st, 403, b)
	// DNS rebinding: another name pointed at 127.0.0.1.
	st, _, b = do(t, srv, call{method: "GET", path: "/api/session", hdr: map[string]string{"Host": "evil.example"}})
	wantStatus(t, "foreign Host", st, http.StatusMisdirectedRequest, b)
	st, _, b = do(t, srv, call{method: "GET", path: "/api/session", hdr: map[string]string{"Host": "localhost:8080"}})
	wantStatus(t, "localhost", st, 200, b)
	if b != `{"authRequired":false,"authenticated":true}`+"\n" {
		t.Fatalf("open server session: %s", b)
	}
}

func TestRunCapAndRate(t *testing.T) {
	srv, h, _ := newAuthEnv(t, func(c *server.Config) { c.MaxRuns = 1; c.Tokens = nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := post(t, ctx, srv.URL+"/api/chat", map[string]string{"X-Run-Id": "busy"}, chatBody("slow", "busy"))
	defer res.Body.Close()
	st, hdr, b := do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t", "x"), hdr: map[string]string{"X-Run-Id": "x"}})
	wantStatus(t, "past MaxRuns", st, 429, b)
	if hdr.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat/cancel", body: `{"runId":"busy"}`})
	wantStatus(t, "cancel", st, 200, b)
	h.Wait()

	srv, _, _ = newAuthEnv(t, func(c *server.Config) { c.RequestsPerSecond, c.Burst = 0.001, 2 })
	var codes []int
	for range 3 {
		st, _, _ := do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-r", "r"), hdr: bearer(aliceToken)})
		codes = append(codes, st)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Fatalf("alice's 3 requests with a burst of 2: %v", codes)
	}
	if st, _, _ := do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-bob", "r"), hdr: bearer(bobToken)}); st != 200 {
		t.Fatalf("bob is limited by alice's rate: %d", st)
	}
}

func TestNewIDIs128BitRandom(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := server.NewID()
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" || seen[id] {
			t.Fatalf("id %q", id)
		}
		seen[id] = true
	}
}

// A run id in flight is as guarded as a finished one: another principal
// who sends it while its producer runs here (the duplicate-request path)
// is told it does not exist and reads nothing of it.
func TestRunIDInFlightIsNotShared(t *testing.T) {
	srv, h, store := newAuthEnv(t, nil)
	req, _ := http.NewRequest("POST", srv.URL+"/api/chat", strings.NewReader(chatBody("held", "r-live")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("X-Run-Id", "r-live")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	// Alice's stream has started: her producer runs.
	buf := make([]byte, 1)
	if _, err := io.ReadFull(res.Body, buf); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		c    call
		want int
	}{
		{"bob reuses the run id with his own thread", call{method: "POST", path: "/api/chat", body: chatBody("t-bob", "r-live"), hdr: bearer(bobToken, "X-Run-Id", "r-live")}, http.StatusNotFound},
		{"bob reuses the run id with alice's thread", call{method: "POST", path: "/api/chat", body: chatBody("held", "r-live"), hdr: bearer(bobToken, "X-Run-Id", "r-live")}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest(c.c.method, srv.URL+c.c.path, strings.NewReader(c.c.body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range c.c.hdr {
			req.Header.Set(k, v)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusOK {
			// Alice's stream, which ends only when she cancels: reading it
			// to its end would hang the test.
			res.Body.Close()
			t.Fatalf("%s: 200, alice's stream", c.what)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		wantStatus(t, c.what, res.StatusCode, c.want, string(b))
	}
	// The run was in flight all along: it ends only when cancelled.
	if rec, err := store.Get(context.Background(), "r-live"); err != nil || rec.Status != durable.StatusRunning {
		t.Fatalf("alice's run was no longer running: %+v %v", rec, err)
	}
	st, _, b := do(t, srv, call{method: "POST", path: "/api/chat/cancel", body: `{"runId":"r-live"}`, hdr: bearer(aliceToken)})
	wantStatus(t, "alice cancels", st, http.StatusOK, b)
	io.Copy(io.Discard, res.Body)
	h.Wait()
}

// The application's Options (which may act on the request's thread: goai
// serve readies its workspace) run only for a request admitted to run:
// not for another principal's thread, nor for a reconnect.
func TestOptionsRunOnlyForAdmittedRuns(t *testing.T) {
	var calls sync.Map // thread -> *atomic.Int32
	srv, h, _ := newAuthEnv(t, func(cfg *server.Config) {
		build := cfg.Options
		cfg.Options = func(r *server.Request) (chat.Options, error) {
			n, _ := calls.LoadOrStore(r.Input.ThreadID, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			return build(r)
		}
	})
	count := func() int32 {
		n, ok := calls.Load("t-a")
		if !ok {
			return 0
		}
		return n.(*atomic.Int32).Load()
	}
	st, _, b := do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-a", "r-a"), hdr: bearer(aliceToken, "X-Run-Id", "r-a")})
	wantStatus(t, "alice starts", st, 200, b)
	h.Wait()
	if n := count(); n != 1 {
		t.Fatalf("alice's run built its options %d times", n)
	}
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-a", "r-b"), hdr: bearer(bobToken, "X-Run-Id", "r-b")})
	wantStatus(t, "bob posts to alice's thread", st, 403, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-a", "r-c"), hdr: bearer(bobToken)})
	wantStatus(t, "bob streams on alice's thread without a run id", st, 403, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-a", "r-a"), hdr: bearer(aliceToken, "X-Run-Id", "r-a", "Last-Event-ID", "-1")})
	wantStatus(t, "alice reconnects", st, 200, b)
	if n := count(); n != 1 {
		t.Fatalf("options built %d times: for a refused request or a reconnect", n)
	}
}

// TestPlainStreamOwnsItsThread: a plain stream (no X-Run-Id) saves no
// thread, but it claims its thread all the same, so that nobody else can
// stream on it, start runs on it or hydrate it (in goai serve, reach its
// workspace) by naming it.
func TestPlainStreamOwnsItsThread(t *testing.T) {
	srv, _, _ := newAuthEnv(t, nil)
	st, _, b := do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-p", "r-p"), hdr: bearer(aliceToken)})
	wantStatus(t, "alice streams", st, 200, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-p", "r-q"), hdr: bearer(bobToken)})
	wantStatus(t, "bob streams on alice's thread", st, 403, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-p", "r-q"), hdr: bearer(bobToken, "X-Run-Id", "r-q")})
	wantStatus(t, "bob starts a run on alice's thread", st, 403, b)
	st, _, b = do(t, srv, call{method: "GET", path: "/api/chat?threadId=t-p", hdr: bearer(bobToken)})
	wantStatus(t, "bob hydrates alice's thread", st, 403, b)
	st, _, b = do(t, srv, call{method: "GET", path: "/api/chat?threadId=t-p", hdr: bearer(aliceToken)})
	wantStatus(t, "alice hydrates her thread", st, 200, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-p", "r-p2"), hdr: bearer(aliceToken)})
	wantStatus(t, "alice streams again", st, 200, b)
}

// staleOwners answers every ThreadOwner as if the thread were new: as two
// principals' reads do when they race for a new thread's first run.
type staleOwners struct{ *durable.Memory }

func (staleOwners) ThreadOwner(context.Context, string) (string, bool, error) { return "", false, nil }

// TestNewThreadIsClaimedOnce: when two principals' first runs of one new
// thread both find it unowned, the claim decides, and the second is
// refused before anything runs for it.
func TestNewThreadIsClaimedOnce(t *testing.T) {
	var bobsOptions atomic.Int32
	srv, _, _ := newAuthEnv(t, func(cfg *server.Config) {
		cfg.Store = staleOwners{durable.NewMemory(nil)}
		build := cfg.Options
		cfg.Options = func(r *server.Request) (chat.Options, error) {
			if r.Input.RunID == "r-b" {
				bobsOptions.Add(1)
			}
			return build(r)
		}
	})
	st, _, b := do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-new", "r-a"), hdr: bearer(aliceToken, "X-Run-Id", "r-a")})
	wantStatus(t, "alice starts the thread", st, 200, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-new", "r-b"), hdr: bearer(bobToken, "X-Run-Id", "r-b")})
	wantStatus(t, "bob starts a run on the thread alice claimed", st, 403, b)
	st, _, b = do(t, srv, call{method: "POST", path: "/api/chat", body: chatBody("t-new", "r-b"), hdr: bearer(bobToken)})
	wantStatus(t, "bob streams on the thread alice claimed", st, 403, b)
	if n := bobsOptions.Load(); n != 0 {
		t.Fatalf("bob's refused requests built their options %d times", n)
	}
}
