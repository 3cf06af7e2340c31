package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/provider/mockprovider"
	"github.com/goai-sdk/goai/provider/scripted"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs goai serve in-process on a free port with a store and
// data directory of its own, and returns its base URL and data directory.
func startServe(t *testing.T, args ...string) (string, string) {
	t.Helper()
	return startServeIn(t, t.TempDir(), args...)
}

// startServeIn is startServe with the data directory given.
func startServeIn(t *testing.T, data string, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- serve(ctx, append([]string{"--addr", "127.0.0.1:0", "--store", "sqlite:" + filepath.Join(data, "goai.db")}, args...), pw, stderr)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("goai serve stderr:\n%s", stderr.String())
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case l := <-lines:
		i := strings.Index(l, "http://")
		if i < 0 {
			t.Fatalf("startup line %q", l)
		}
		t.Logf("%s", l)
		return strings.Fields(l[i:])[0], data
	case code := <-done:
		t.Fatalf("goai serve exited %d: %s", code, stderr.String())
	}
	return "", ""
}

type event map[string]any

func (e event) str(k string) string { s, _ := e[k].(string); return s }

// post runs one durable request and returns its events.
func post(t *testing.T, base string, body map[string]any) []event {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+"/api/chat", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Run-Id", body["runId"].(string))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(res.Body)
		t.Fatalf("POST /api/chat: %s %s", res.Status, msg)
	}
	var evs []event
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e event
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("bad event %q: %v", data, err)
			}
			evs = append(evs, e)
		}
	}
	return evs
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func runBody(thread, run string, msgs any) map[string]any {
	return map[string]any{"threadId": thread, "runId": run, "messages": msgs, "tools": []any{}, "context": []any{}, "state": map[string]any{}, "forwardedProps": map[string]any{}}
}

// summary lists tool calls, custom events and the outcome of a stream.
type summary struct {
	tools    []string
	customs  map[string][]string // name -> JSON values
	results  []string
	text     string
	outcome  map[string]any
	snapshot any
	runError event
}

func summarize(evs []event) summary {
	s := summary{customs: map[string][]string{}}
	for _, e := range evs {
		switch e.str("type") {
		case "TOOL_CALL_START":
			s.tools = append(s.tools, e.str("toolCallName"))
		case "TOOL_CALL_RESULT":
			s.results = append(s.results, e.str("content"))
		case "TEXT_MESSAGE_CONTENT":
			s.text += e.str("delta")
		case "CUSTOM":
			v, _ := json.Marshal(e["value"])
			s.customs[e.str("name")] = append(s.customs[e.str("name")], string(v))
		case "MESSAGES_SNAPSHOT":
			s.snapshot = e["messages"]
		case "RUN_FINISHED":
			s.outcome, _ = e["outcome"].(map[string]any)
		case "RUN_ERROR":
			s.runError = e
		}
	}
	return s
}

func anyContains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestServeDemoAgent: goai serve with the offline demo runs its coding task
// in the thread's workspace: the stream carries the workspace tool calls,
// sandbox.file and sandbox.file.diff, the approval interrupt; the resumed
// run executes the command; the files are in the thread's workspace.
func TestServeDemoAgent(t *testing.T) {
	for _, kind := range []string{"local", "bwrap", "docker"} {
		t.Run(kind, func(t *testing.T) {
			args := []string{"--model", "demo", "--sandbox", kind}
			switch {
			case kind == "bwrap" && !bwrapWorks(context.Background()):
				if os.Getenv("CI") != "" {
					t.Fatal("bubblewrap must work in CI (scripts/setup-sandbox.sh)")
				}
				t.Skip("bubblewrap does not work here")
			case kind == "docker":
				if os.Getenv("GOAI_TEST_DOCKER") == "" {
					t.Skip("GOAI_TEST_DOCKER is not set; `eval \"$(scripts/setup-docker.sh)\"` starts dockerd and builds the test image")
				}
				args = append(args, "--docker-image", envOr("GOAI_TEST_DOCKER_IMAGE", "goai-sandbox-test:1"))
			}
			base, data := startServe(t, args...)
			var info map[string]any
			getJSON(t, base+"/api/info", &info)
			if info["model"] != "offline demo" || info["wire"] != "agui" || info["store"] != "sqlite" || info["sandbox"] != kind || info["demo"] != true {
				t.Errorf("/api/info = %v", info)
			}
			thread := "thread/../with odd id"
			s := summarize(post(t, base, runBody(thread, "run-1", []any{map[string]any{"id": "u1", "role": "user", "content": "write me something"}})))
			if strings.Join(s.tools, ",") != "list_files,write_file,edit_file,run_command" {
				t.Errorf("tool calls %v", s.tools)
			}
			if !anyContains(s.customs["sandbox.file"], `"path":"/workspace/greet.sh"`) || !anyContains(s.customs["sandbox.file.diff"], `+[ $# -eq 0 ] \u0026\u0026 set -- world`) {
				t.Errorf("sandbox events %v", s.customs)
			}
			if s.outcome == nil || s.outcome["type"] != "interrupt" {
				t.Fatalf("outcome %v (error %v)", s.outcome, s.runError)
			}
			interrupt := s.outcome["interrupts"].([]any)[0].(map[string]any)
			var h struct {
				Interrupts struct {
					RunID   string           `json:"runId"`
					Pending []map[string]any `json:"pending"`
				} `json:"interrupts"`
			}
			getJSON(t, base+"/api/chat?threadId="+urlQuery(thread), &h)
			if h.Interrupts.RunID != "run-1" || len(h.Interrupts.Pending) != 1 || h.Interrupts.Pending[0]["id"] != interrupt["id"] {
				t.Errorf("hydration interrupts %+v", h.Interrupts)
			}

			body := runBody(thread, "run-2", s.snapshot)
			body["parentRunId"] = "run-1"
			body["resume"] = []any{map[string]any{"interruptId": interrupt["id"], "status": "resolved", "payload": true}}
			s2 := summarize(post(t, base, body))
			if !anyContains(s2.results, `Hello, goai!`) || !strings.Contains(s2.text, "Done.") || s2.runError != nil || (s2.outcome != nil && s2.outcome["type"] != "success") {
				t.Errorf("resumed run: results %v text %q outcome %v error %v", s2.results, s2.text, s2.outcome, s2.runError)
			}
			dir := filepath.Join(data, "workspaces", threadDirName(thread))
			if b, err := os.ReadFile(filepath.Join(dir, "greet.sh")); err != nil || string(b) != scripted.DemoProgramEdited {
				t.Errorf("greet.sh in the thread's workspace: %q %v", b, err)
			}
			var ws struct {
				Files []WorkspaceFile `json:"files"`
			}
			getJSON(t, base+"/api/workspace?threadId="+urlQuery(thread), &ws)
			if len(ws.Files) != 1 || ws.Files[0].Path != "/workspace/greet.sh" || ws.Files[0].Status != "create" || !strings.Contains(ws.Files[0].Diff, "+  echo \"Hello, $name!\"") {
				t.Errorf("/api/workspace %+v", ws.Files)
			}
		})
	}
}

func urlQuery(s string) string {
	r := strings.NewReplacer("/", "%2F", " ", "%20", ".", ".")
	return r.Replace(s)
}

// TestServeRealAdaptersUseWorkspaceTools: a real adapter (OpenAI Responses,
// Anthropic) against goai mock-provider, whose scripted model calls the
// workspace tools; the policy file allows the command, a denied one is a
// tool error the model sees.
func TestServeRealAdaptersUseWorkspaceTools(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policy, []byte(`{"commands":{"allow":["cat *"],"deny":["rm *"]},"default":"ask"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	call := func(id, name, args string) string {
		return fmt.Sprintf(`[{"type":"RUN_STARTED","threadId":"t","runId":"r"},
			{"type":"TOOL_CALL_START","toolCallId":%q,"toolCallName":%q,"index":0},
			{"type":"TOOL_CALL_ARGS","toolCallId":%q,"delta":%q},
			{"type":"TOOL_CALL_END","toolCallId":%q},
			{"type":"RUN_FINISHED","threadId":"t","runId":"r","finishReason":"tool_calls"}]`, id, name, id, args, id)
	}
	sc := `{"name":"workspace-tools","turns":[` +
		call("call_w", "write_file", `{"path":"notes/todo.txt","content":"- ship it\n"}`) + "," +
		call("call_c", "run_command", `{"command":"cat notes/todo.txt"}`) + "," +
		call("call_r", "run_command", `{"command":"rm -rf notes"}`) + "," +
		`[{"type":"RUN_STARTED","threadId":"t","runId":"r"},{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"},
		  {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"All done."},{"type":"TEXT_MESSAGE_END","messageId":"m"},
		  {"type":"RUN_FINISHED","threadId":"t","runId":"r","finishReason":"stop"}]]}`
	for _, tc := range []struct{ api, model, keyVar, urlVar string }{
		{"openai-responses", "openai:gpt-4.1-mini", "OPENAI_API_KEY", "OPENAI_BASE_URL"},
		{"anthropic", "anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"},
	} {
		t.Run(tc.api, func(t *testing.T) {
			scenario, err := scripted.Parse([]byte(sc))
			if err != nil {
				t.Fatal(err)
			}
			record := t.TempDir()
			mock := httptest.NewServer(mockprovider.NewHandler(tc.api, scenario, record))
			defer mock.Close()
			t.Setenv(tc.keyVar, "test-key-never-logged")
			t.Setenv(tc.urlVar, mock.URL+mockprovider.BasePath(tc.api))
			base, data := startServe(t, "--model", tc.model, "--sandbox", "local", "--policy", policy)
			s := summarize(post(t, base, runBody("t-"+tc.api, "run-1", []any{map[string]any{"id": "u1", "role": "user", "content": "note it"}})))
			if strings.Join(s.tools, ",") != "write_file,run_command,run_command" || !strings.Contains(s.text, "All done.") {
				t.Fatalf("tools %v text %q error %v", s.tools, s.text, s.runError)
			}
			if !anyContains(s.results, `"stdout":"- ship it\n"`) || !anyContains(s.results, `the command policy denies \"rm *\"`) {
				t.Errorf("results %v", s.results)
			}
			if !anyContains(s.customs["sandbox.file"], "notes/todo.txt") || !anyContains(s.customs["sandbox.file.diff"], "+- ship it") {
				t.Errorf("sandbox events %v", s.customs)
			}
			if b, err := os.ReadFile(filepath.Join(data, "workspaces", threadDirName("t-"+tc.api), "notes", "todo.txt")); err != nil || string(b) != "- ship it\n" {
				t.Errorf("notes/todo.txt: %q %v", b, err)
			}
			// The model was offered the workspace tools and the agent's
			// system prompt.
			req, err := os.ReadFile(filepath.Join(record, "001.json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"list_files", "read_file", "write_file", "edit_file", "search", "run_command", "You are a coding agent"} {
				if !bytes.Contains(req, []byte(w)) {
					t.Errorf("the provider request lacks %q", w)
				}
			}
		})
	}
}

// TestServeNoTools: --no-tools is plain chat: no workspace tools, no
// sandbox, and /api/info says so.
func TestServeNoTools(t *testing.T) {
	base, _ := startServe(t, "--model", "demo", "--no-tools")
	var info map[string]any
	getJSON(t, base+"/api/info", &info)
	if info["sandbox"] != "none" {
		t.Errorf("/api/info %v", info)
	}
	s := summarize(post(t, base, runBody("t", "run-1", []any{map[string]any{"id": "u1", "role": "user", "content": "hello"}})))
	if len(s.tools) != 0 || !strings.Contains(s.text, "You said: hello") {
		t.Errorf("plain chat: tools %v text %q", s.tools, s.text)
	}
}

func TestThreadDirName(t *testing.T) {
	seen := map[string]bool{}
	for _, id := range []string{"a", "a/b", "a_b", "..", "../../etc", "", strings.Repeat("x", 500), "t/../x"} {
		n := threadDirName(id)
		if strings.ContainsAny(n, "/\\") || strings.HasPrefix(n, ".") || len(n) > 70 || seen[n] {
			t.Errorf("threadDirName(%q) = %q", id, n)
		}
		seen[n] = true
	}
}

// TestServeWorkspaceAuthorized: GET /api/workspace answers only what a
// hydration of the same thread would: no token, no workspace.
func TestServeWorkspaceAuthorized(t *testing.T) {
	base, _ := startServe(t, "--model", "demo", "--sandbox", "local", "--token", "tok-123")
	get := func(auth string) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/workspace?threadId=t1", nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if c := get(""); c != http.StatusUnauthorized {
		t.Errorf("without a token: %d", c)
	}
	if c := get("wrong"); c != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d", c)
	}
	if c := get("tok-123"); c != http.StatusOK {
		t.Errorf("with the token: %d", c)
	}
}

// TestServePlainStreamWorkspaceIsTheOwners: a plain stream (no X-Run-Id)
// keeps no log, yet its thread, and so its workspace, is its principal's:
// another user who names the thread reads nothing of it and runs nothing
// in it.
func TestServePlainStreamWorkspaceIsTheOwners(t *testing.T) {
	const alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice "+alice+"\nbob "+bob+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOAI_TOKEN_FILE", tokens)
	base, data := startServe(t, "--model", "demo", "--sandbox", "local")
	do := func(method, token, path string, body map[string]any) (int, string) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	const thread = "t-plain"
	ask := runBody(thread, "run-1", []any{map[string]any{"id": "u1", "role": "user", "content": "write me something"}})
	if code, b := do(http.MethodPost, alice, "/api/chat", ask); code != http.StatusOK || !strings.Contains(b, "greet.sh") {
		t.Fatalf("alice's plain stream: %d %.300s", code, b)
	}
	if _, err := os.Stat(filepath.Join(data, "workspaces", threadDirName(thread), "greet.sh")); err != nil {
		t.Fatalf("the demo agent wrote nothing in the thread's workspace: %v", err)
	}
	if code, b := do(http.MethodGet, bob, "/api/workspace?threadId="+thread, nil); code != http.StatusForbidden || strings.Contains(b, "greet") {
		t.Errorf("bob reads alice's workspace: %d %.300s", code, b)
	}
	ask["runId"] = "run-2"
	if code, b := do(http.MethodPost, bob, "/api/chat", ask); code != http.StatusForbidden {
		t.Errorf("bob streams in alice's workspace: %d %.300s", code, b)
	}
	if code, b := do(http.MethodGet, alice, "/api/workspace?threadId="+thread, nil); code != http.StatusOK || !strings.Contains(b, "/workspace/greet.sh") {
		t.Errorf("alice's workspace: %d %.300s", code, b)
	}
}
