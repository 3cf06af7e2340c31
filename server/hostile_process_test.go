package server_test

// A hostile-client suite against a real `goai serve` process: every probe
// of a careless or malicious client, each followed by the same questions:
// is the server alive, did the probe get the right status, and are other
// runs untouched, with nothing lost?

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/durable"
)

const (
	hostileAlice = "alice-secret-token-0001"
	hostileBob   = "bob-secret-token-000002"
)

type hostile struct {
	t   *testing.T
	url string
	p   *goaiProc
}

func (h *hostile) req(method, path string, hdr map[string]string, body io.Reader) (int, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+hostileAlice)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v\n%s", method, path, err, h.p.stderr.String())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// alive asserts the process still serves.
func (h *hostile) alive(after string) {
	h.t.Helper()
	select {
	case <-h.p.waited:
		h.t.Fatalf("goai serve died after %s:\n%s", after, h.p.stderr.String())
	default:
	}
	if st, b := h.req("GET", "/healthz", nil, nil); st != 200 {
		h.t.Fatalf("/healthz after %s: %d %s", after, st, b)
	}
}

func (h *hostile) expect(what string, st int, body []byte, want ...int) {
	h.t.Helper()
	for _, w := range want {
		if st == w {
			h.alive(what)
			return
		}
	}
	h.t.Fatalf("%s: %d %s, want %v", what, st, body, want)
}

func (h *hostile) chat(run, thread, text string) (int, []byte) {
	body := fmt.Sprintf(`{"threadId":%q,"runId":%q,"messages":[{"id":"u-%s","role":"user","content":%q}],"tools":[],"context":[]}`, thread, run, run, text)
	return h.req("POST", "/api/chat", map[string]string{"X-Run-Id": run}, strings.NewReader(body))
}

func terminalOf(t *testing.T, b []byte) agui.Event {
	t.Helper()
	var last agui.Event
	for f, err := range agui.ReadSSE(bytes.NewReader(b)) {
		if err != nil {
			t.Fatalf("stream: %v\n%s", err, b)
		}
		last = f.Event
	}
	return last
}

func TestHostileClients(t *testing.T) {
	bin := buildGoai(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# two users\nalice "+hostileAlice+"\nbob "+hostileBob+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "data", "goai.db")
	p := startServe(t, bin, []string{"GOAI_TOKEN_FILE=" + tokens, "GOAI_BODY_TIMEOUT=1s", "GOAI_MAX_RUNS=200"},
		"--store", "sqlite:"+db, "--model", "demo")
	h := &hostile{t: t, url: p.url, p: p}

	// A run before the probes: its log must come out of them intact.
	st, before := h.chat("before", "thread-before", "hello there")
	h.expect("a first run", st, before, 200)
	if ev := terminalOf(t, before); ev.Type != agui.RunFinished {
		t.Fatalf("first run ended with %s", ev.Type)
	}
	if fi, err := os.Stat(filepath.Dir(db)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("store directory mode %v %v, want 0700", fi.Mode(), err)
	}
	if fi, err := os.Stat(db); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("database mode %v %v, want 0600", fi.Mode(), err)
	}

	t.Run("empty messages", func(t *testing.T) {
		st, b := h.req("POST", "/api/chat", map[string]string{"X-Run-Id": "x1"}, strings.NewReader(`{"threadId":"t","runId":"x1","messages":[],"tools":[],"context":[]}`))
		h.expect("an empty conversation", st, b, 200, 400)
		if ev := terminalOf(t, b); st == 200 && !ev.IsTerminal() {
			t.Fatalf("no terminal event: %s", b)
		}
	})
	t.Run("no auth", func(t *testing.T) {
		st, b := h.req("POST", "/api/chat", map[string]string{"Authorization": "", "X-Run-Id": "x2"}, strings.NewReader(`{}`))
		h.expect("no credentials", st, b, 401)
		st, b = h.req("GET", "/api/chat?runId=before&offset=-1", map[string]string{"Authorization": ""}, nil)
		h.expect("an anonymous join", st, b, 401)
		if bytes.Contains(b, []byte(hostileAlice)) {
			t.Fatal("the token leaked into an error")
		}
	})
	t.Run("wrong owner", func(t *testing.T) {
		bob := map[string]string{"Authorization": "Bearer " + hostileBob}
		st, b := h.req("GET", "/api/chat?runId=before&offset=-1", bob, nil)
		h.expect("bob joins alice's run", st, b, 404)
		st, b = h.req("GET", "/api/chat?threadId=thread-before", bob, nil)
		h.expect("bob hydrates alice's thread", st, b, 403)
		st, b = h.req("POST", "/api/chat/cancel", bob, strings.NewReader(`{"runId":"before"}`))
		h.expect("bob cancels alice's run", st, b, 404)
		bob["X-Run-Id"] = "bob-1"
		st, b = h.req("POST", "/api/chat", bob, strings.NewReader(`{"threadId":"thread-before","runId":"bob-1","messages":[{"id":"x","role":"user","content":"mine now"}],"tools":[],"context":[]}`))
		h.expect("bob overwrites alice's thread", st, b, 403)
	})
	t.Run("CSRF", func(t *testing.T) {
		st, b := h.req("POST", "/api/chat/cancel", map[string]string{"Authorization": "", "Content-Type": "text/plain"}, strings.NewReader(`{"runId":"before"}`))
		h.expect("a text/plain cancel", st, b, 415, 401)
		st, b = h.req("POST", "/api/chat/cancel", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, strings.NewReader(`{"runId":"before"}`))
		h.expect("a cross-site cancel", st, b, 403)
	})
	t.Run("bad Host", func(t *testing.T) {
		st, b := h.req("GET", "/api/session", map[string]string{"Host": "rebound.evil.example"}, nil)
		h.expect("a rebinding Host", st, b, http.StatusMisdirectedRequest)
	})
	t.Run("slow bodies and idle connections", func(t *testing.T) {
		addr := strings.TrimPrefix(h.url, "http://")
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for i := range 60 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			if i%2 == 0 {
				// A slow body: headers, then a trickle that never ends.
				fmt.Fprintf(c, "POST /api/chat HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", addr, hostileAlice)
			}
		}
		// The server serves others while they hang.
		st, b := h.chat("during-slow", "thread-slow", "still there?")
		h.expect("a run while 60 connections hang", st, b, 200)
		// Each slow body is cut: the server answers 408 (or 429 past the
		// request rate) and closes.
		for i := 0; i < len(conns); i += 2 {
			_ = conns[i].SetReadDeadline(time.Now().Add(20 * time.Second))
			line, err := bufio.NewReader(conns[i]).ReadString('\n')
			if err != nil || !(strings.Contains(line, "408") || strings.Contains(line, "429")) {
				t.Fatalf("slow body %d: %q %v", i, line, err)
			}
		}
	})
	t.Run("8 MiB body", func(t *testing.T) {
		big := `{"threadId":"t","runId":"big","messages":[{"id":"u","role":"user","content":"` + strings.Repeat("a", 8<<20) + `"}],"tools":[],"context":[]}`
		st, b := h.req("POST", "/api/chat", map[string]string{"X-Run-Id": "big"}, strings.NewReader(big))
		// 408 when the loaded machine cannot move 8 MiB within the suite's
		// 1 s body deadline.
		h.expect("an 8 MiB body", st, b, 413, 408)
	})
	t.Run("deep nesting", func(t *testing.T) {
		deep := `{"threadId":"t","runId":"deep","state":` + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + `,"messages":[],"tools":[],"context":[]}`
		st, b := h.req("POST", "/api/chat", map[string]string{"X-Run-Id": "deep"}, strings.NewReader(deep))
		h.expect("200000 nested arrays", st, b, 400)
	})
	t.Run("invalid UTF-8", func(t *testing.T) {
		st, b := h.req("POST", "/api/chat", map[string]string{"X-Run-Id": "utf8"}, strings.NewReader("{\"threadId\":\"t\xff\xfe\",\"runId\":\"utf8\",\"messages\":[{\"id\":\"u\",\"role\":\"user\",\"content\":\"\xc3\x28\"}],\"tools\":[],\"context\":[]}"))
		h.expect("invalid UTF-8 in the body", st, b, 200, 400)
		st, b = h.req("POST", "/api/chat", map[string]string{"X-Run-Id": "bad\xff"}, strings.NewReader(`{"threadId":"t","runId":"r","messages":[],"tools":[],"context":[]}`))
		h.expect("invalid UTF-8 in X-Run-Id", st, b, 400)
	})
	t.Run("odd ids", func(t *testing.T) {
		for _, id := range []string{strings.Repeat("x", 5000), "tab\there", "%00", "../../etc/passwd", "ünïcødé", " "} {
			st, b := h.chat(id, "odd-thread-"+fmt.Sprint(len(id)), "hi")
			h.expect(fmt.Sprintf("run id %.20q", id), st, b, 200, 400)
		}
		st, b := h.req("POST", "/api/chat", map[string]string{"X-Run-Id": "ctl"}, strings.NewReader(`{"threadId":"t\u0001","runId":"ctl","messages":[],"tools":[],"context":[]}`))
		h.expect("a control character in threadId", st, b, 400)
	})
	t.Run("garbage offsets", func(t *testing.T) {
		for _, off := range []string{"garbage", "sqlite:v1:before:999999", "sqlite:v1:other:1", "-2", "sqlite:v1:before:0", "%20",
			durable.FormatOffset("sqlite", "before", 999999), durable.FormatOffset("sqlite", "other", 1),
			durable.FormatOffset("memory", "before", 1), strings.TrimSuffix(durable.FormatOffset("sqlite", "before", 1), "1") + "0"} {
			st, b := h.req("GET", "/api/chat?runId=before&offset="+off, nil, nil)
			h.expect("offset "+off, st, b, 400)
		}
		st, b := h.req("GET", "/api/chat?runId=before&offset=1&offset=2", nil, nil)
		h.expect("two offsets", st, b, 400)
		// An offset in the form minted before (docs/durable.md §1.3), as a
		// client may hold across an upgrade, resumes as the current form does.
		st, now := h.req("GET", "/api/chat?runId=before&offset="+durable.FormatOffset("sqlite", "before", 3), nil, nil)
		h.expect("a resume offset", st, now, 200)
		st, old := h.req("GET", "/api/chat?runId=before&offset=sqlite:v1:before:3", nil, nil)
		h.expect("a resume offset of the earlier form", st, old, 200)
		if !bytes.Equal(now, old) || !bytes.HasPrefix(now, []byte("id: "+durable.FormatOffset("sqlite", "before", 4)+"\n")) {
			t.Fatalf("resumed after seq 3:\n%s\nwith the earlier form:\n%s", now, old)
		}
	})
	t.Run("30 parallel duplicate POSTs", func(t *testing.T) {
		var wg sync.WaitGroup
		results := make([][]byte, 30)
		codes := make([]int, 30)
		for i := range 30 {
			wg.Go(func() { codes[i], results[i] = h.chat("dup", "thread-dup", "tell me a story") })
		}
		wg.Wait()
		for i := range 30 {
			if codes[i] != 200 || !bytes.Equal(results[i], results[0]) {
				t.Fatalf("duplicate %d: %d, %d bytes vs %d\n%s", i, codes[i], len(results[i]), len(results[0]), results[i])
			}
		}
		if terminalOf(t, results[0]).Type != agui.RunFinished {
			t.Fatalf("the duplicated run did not finish: %s", results[0])
		}
		h.alive("30 duplicates")
	})
	t.Run("nothing lost", func(t *testing.T) {
		st, b := h.req("GET", "/api/chat?runId=before&offset=-1", nil, nil)
		h.expect("re-reading the first run", st, b, 200)
		if !bytes.Equal(b, before) {
			t.Fatalf("the first run's log changed:\n%s\nvs\n%s", b, before)
		}
		st, b = h.req("GET", "/metrics", nil, nil)
		h.expect("metrics", st, b, 200)
		for _, s := range []string{"goai_runs_started_total", "goai_http_requests_total{code=\"401\"}", "goai_append_duration_seconds_bucket"} {
			if !bytes.Contains(b, []byte(s)) {
				t.Fatalf("metrics lack %s:\n%s", s, b)
			}
		}
		if strings.Contains(p.stderr.String(), hostileAlice) || strings.Contains(p.stderr.String(), hostileBob) {
			t.Fatal("a token reached the server log")
		}
	})
	t.Run("deleted database", func(t *testing.T) {
		st, b := h.req("GET", "/readyz", nil, nil)
		h.expect("readyz", st, b, 200)
		for _, f := range []string{db, db + "-wal", db + "-shm"} {
			_ = os.Remove(f)
		}
		st, b = h.req("GET", "/readyz", nil, nil)
		h.expect("readyz without its database", st, b, 503)
		st, b = h.chat("after-delete", "thread-del", "hi")
		h.expect("a run without its database", st, b, 503)
	})
}

// goai serve refuses a non-loopback address without a token, saying why.
func TestServeRefusesExposureWithoutToken(t *testing.T) {
	bin := buildGoai(t)
	cmd := exec.Command(bin, "serve", "--addr", "0.0.0.0:0", "--store", "none")
	cmd.Env = append(os.Environ(), "GOAI_TOKEN=", "GOAI_TOKEN_FILE=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("without a token")) || !bytes.Contains(out, []byte("--insecure")) {
		t.Fatalf("the refusal does not say why: %s", out)
	}
}
