// Package providers is the provider differential suite: every case's
// recorded provider stream is replayed on loopback to TanStack AI's own
// adapters (runner.mjs, the pinned npm packages) and to goai's adapters
// driven by the same run input through chat.Stream with the tanstack wire
// profile; the provider requests and the event streams are compared after
// normalization (timestamps dropped, generated ids numbered by first
// appearance).
//
// A case either matches the reference or is listed in
// expected-differences.json with the reason (DIFFERENCES.md has the
// details); a listed case that matches fails the suite, so the list stays
// true.
package providers

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
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/anthropic"
	"github.com/goai-sdk/goai/provider/gemini"
	"github.com/goai-sdk/goai/provider/openai"
	"github.com/goai-sdk/goai/server"
)

// caseFile is cases/<api>/<name>.json.
type caseFile struct {
	// Source cites where the replayed stream comes from.
	Source string   `json:"source"`
	Input  runInput `json:"input"`
	Reply  []reply  `json:"replies"`
}

type runInput struct {
	API           string              `json:"api"`
	Model         string              `json:"model"`
	Messages      []agui.ModelMessage `json:"messages"`
	Tools         []toolSpec          `json:"tools,omitempty"`
	ModelOptions  map[string]any      `json:"modelOptions,omitempty"`
	SystemPrompts []string            `json:"systemPrompts,omitempty"`
	ThreadID      string              `json:"threadId"`
	RunID         string              `json:"runId"`
}

type toolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// reply is one scripted HTTP answer; requests beyond the list get the last.
type reply struct {
	Status int               `json:"status"`
	Header map[string]string `json:"headers,omitempty"`
	// Stream names the .sse file (next to the case) sent as the body.
	Stream string `json:"stream,omitempty"`
	Body   string `json:"body,omitempty"`
	// Drop cuts the connection after the body without ending the response.
	Drop bool `json:"drop,omitempty"`
}

type recorded struct {
	Path string
	Body map[string]any
}

// replay serves c's replies in order and records each request.
type replay struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newReplay(t *testing.T, dir string, c *caseFile) *replay {
	r := &replay{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		r.mu.Lock()
		n := len(r.reqs)
		r.reqs = append(r.reqs, recorded{Path: req.URL.Path, Body: body})
		r.mu.Unlock()
		rp := c.Reply[min(n, len(c.Reply)-1)]
		payload := []byte(rp.Body)
		if rp.Stream != "" {
			b, err := os.ReadFile(filepath.Join(dir, rp.Stream))
			if err != nil {
				t.Errorf("fixture: %v", err)
			}
			payload = b
		}
		ct := "text/event-stream"
		if rp.Status >= 400 {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		for k, v := range rp.Header {
			w.Header().Set(k, v)
		}
		status := rp.Status
		if status == 0 {
			status = 200
		}
		w.WriteHeader(status)
		_, _ = w.Write(payload)
		w.(http.Flusher).Flush()
		if rp.Drop {
			panic(http.ErrAbortHandler) // closes the connection mid-response
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *replay) take() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

func requireNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is required (scripts/test.sh installs it): %v", err)
	}
	if _, err := os.Stat("node_modules/@tanstack/ai-openai/package.json"); err != nil {
		t.Fatalf("reference adapters missing: run `npm ci` in conformance/providers (scripts/test.sh does): %v", err)
	}
}

func runReference(t *testing.T, casePath, base string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "runner.mjs", casePath, base)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("reference runner: %v\n%s", err, stderr.String())
	}
	return stdout.Bytes()
}

const dummyKey = "sk-dummy-replay-key"

func goaiAdapter(t *testing.T, in *runInput, base string) chat.Adapter {
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	opts := &openai.Options{APIKey: dummyKey, HTTPClient: client, RetryBaseDelay: time.Millisecond, RetryMaxDelay: 5 * time.Millisecond}
	switch in.API {
	case "openai-responses":
		opts.BaseURL = base + "/v1"
		return openai.NewResponses(in.Model, opts)
	case "openai-chat":
		opts.BaseURL = base + "/v1"
		return openai.NewChat(in.Model, opts)
	case "anthropic":
		opts.BaseURL = base + "/v1"
		return anthropic.New(in.Model, opts)
	case "gemini":
		opts.BaseURL = base + "/v1beta"
		return gemini.New(in.Model, opts)
	}
	t.Fatalf("unknown api %q", in.API)
	return nil
}

func runGoai(t *testing.T, in *runInput, base string) []byte {
	t.Helper()
	var tools []*chat.Tool
	for _, ts := range in.Tools {
		tools = append(tools, &chat.Tool{Name: ts.Name, Description: ts.Description, InputSchema: ts.InputSchema})
	}
	var sys []chat.SystemPrompt
	for _, s := range in.SystemPrompts {
		sys = append(sys, chat.SystemPrompt{Content: s})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var buf bytes.Buffer
	w := agui.NewWriter(&buf, agui.WriterOptions{Profile: agui.ProfileTanStack, ThreadID: in.ThreadID, RunID: in.RunID})
	events := chat.Stream(ctx, chat.Options{Adapter: goaiAdapter(t, in, base), Messages: in.Messages, Tools: tools,
		SystemPrompts: sys, ModelOptions: in.ModelOptions, ThreadID: in.ThreadID, RunID: in.RunID})
	if _, err := server.WriteRun(w, events); err != nil {
		t.Fatalf("goai: %v", err)
	}
	return buf.Bytes()
}

// sseEvents parses SSE bytes into JSON values.
func sseEvents(t *testing.T, b []byte) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			t.Fatalf("event %q: %v", d, err)
		}
		out = append(out, v)
	}
	return out
}

// idKeys hold generated identifiers: their values are numbered by first
// appearance, so two streams compare equal when they use ids the same way.
var idKeys = map[string]string{
	"runId": "run", "threadId": "thread", "messageId": "msg", "parentMessageId": "msg",
	"toolCallId": "call", "stepId": "step", "stepName": "step", "entityId": "msg", "id": "id",
}

type idMap map[string]string

func (m idMap) name(class, v string) string {
	if v == "" {
		return v
	}
	if n, ok := m[v]; ok {
		return n
	}
	n := fmt.Sprintf("<%s%d>", class, len(m)+1)
	m[v] = n
	return n
}

func normalize(v any, ids idMap) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // ids are numbered in a stable order
		for _, k := range keys {
			val := x[k]
			if k == "timestamp" || k == "createdAt" {
				continue
			}
			if class, ok := idKeys[k]; ok {
				if s, ok := val.(string); ok {
					out[k] = ids.name(class, s)
					continue
				}
			}
			out[k] = normalize(val, ids)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normalize(x[i], ids)
		}
		return out
	}
	return v
}

func normalizeEvents(evs []map[string]any) []any {
	ids := idMap{}
	out := make([]any, len(evs))
	for i, e := range evs {
		out[i] = normalize(e, ids)
	}
	// Generated ids also appear as map keys (toolCallMetadata) and inside
	// derived strings (interrupt ids, packed signatures): replace them there
	// too.
	for i := range out {
		out[i] = replaceIDs(out[i], ids)
	}
	return out
}

func replaceIDs(v any, ids idMap) any {
	// Longest ids first, in a fixed order, so a string holding several
	// ids (or an id holding another) is rewritten the same on both sides.
	keys := make([]string, 0, len(ids))
	for id := range ids {
		if len(id) >= 6 {
			keys = append(keys, id)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) > len(keys[j])
		}
		return keys[i] < keys[j]
	})
	return rewriteIDs(v, ids, keys)
}

func rewriteIDs(v any, ids idMap, keys []string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if n, ok := ids[k]; ok {
				k = n
			}
			out[k] = rewriteIDs(val, ids, keys)
		}
		return out
	case []any:
		for i := range x {
			x[i] = rewriteIDs(x[i], ids, keys)
		}
		return x
	case string:
		if n, ok := ids[x]; ok {
			return n
		}
		for _, id := range keys {
			if strings.Contains(x, id) {
				x = strings.ReplaceAll(x, id, ids[id])
			}
		}
		return x
	}
	return v
}

type expectation struct {
	Events   bool   `json:"events"`
	Requests bool   `json:"requests"`
	Reason   string `json:"reason"`
}

type outcome struct {
	name                string
	eventsOK, requestOK bool
}

func TestProviders(t *testing.T) {
	requireNode(t)
	var expected map[string]expectation
	if b, err := os.ReadFile("expected-differences.json"); err == nil {
		if err := json.Unmarshal(b, &expected); err != nil {
			t.Fatalf("expected-differences.json: %v", err)
		}
	}
	files, _ := filepath.Glob("cases/*/*.json")
	if len(files) == 0 {
		t.Fatal("no cases")
	}
	var (
		mu      sync.Mutex
		results []outcome
	)
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "cases/"), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var c caseFile
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if c.Source == "" || len(c.Reply) == 0 {
				t.Fatalf("%s: a case needs a source and replies", f)
			}
			// The runner reads the input from its own file.
			inPath := filepath.Join(t.TempDir(), "input.json")
			inRaw, _ := json.Marshal(c.Input)
			if err := os.WriteFile(inPath, inRaw, 0o644); err != nil {
				t.Fatal(err)
			}
			rp := newReplay(t, filepath.Dir(f), &c)
			refOut := runReference(t, inPath, referenceBase(c.Input.API, rp.srv.URL))
			refReqs := rp.take()
			goOut := runGoai(t, &c.Input, rp.srv.URL)
			goReqs := rp.take()

			refEv, goEv := normalizeEvents(sseEvents(t, refOut)), normalizeEvents(sseEvents(t, goOut))
			eventsOK := reflect.DeepEqual(refEv, goEv)
			requestOK := reflect.DeepEqual(refReqs, goReqs)
			mu.Lock()
			results = append(results, outcome{name, eventsOK, requestOK})
			mu.Unlock()

			exp, listed := expected[name]
			if !eventsOK && !(listed && exp.Events) {
				t.Errorf("events differ from the reference:\n%s", diffLines(refEv, goEv))
			}
			if !requestOK && !(listed && exp.Requests) {
				t.Errorf("provider requests differ from the reference:\n%s", diffLines(toAny(refReqs), toAny(goReqs)))
			}
			if listed && exp.Events && eventsOK {
				t.Errorf("listed as an event difference (%s) but the events match: update expected-differences.json", exp.Reason)
			}
			if listed && exp.Requests && requestOK {
				t.Errorf("listed as a request difference (%s) but the requests match: update expected-differences.json", exp.Reason)
			}
			if listed && (!eventsOK || !requestOK) {
				if !eventsOK {
					t.Logf("events (listed: %s):\n%s", exp.Reason, diffLines(refEv, goEv))
				}
				if !requestOK {
					t.Logf("requests (listed: %s):\n%s", exp.Reason, diffLines(toAny(refReqs), toAny(goReqs)))
				}
			}
		})
	}
	sort.Slice(results, func(i, j int) bool { return results[i].name < results[j].name })
	var table strings.Builder
	table.WriteString("| case | events | request |\n|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&table, "| %s | %s | %s |\n", r.name, mark(r.eventsOK), mark(r.requestOK))
	}
	t.Logf("match table:\n%s", table.String())
}

func mark(ok bool) string {
	if ok {
		return "equal"
	}
	return "differs"
}

// referenceBase is the base URL each SDK expects: the OpenAI SDK takes the
// /v1 root, the Anthropic and Google SDKs add their version themselves.
func referenceBase(api, url string) string {
	if strings.HasPrefix(api, "openai") {
		return url + "/v1"
	}
	return url
}

func toAny(rs []recorded) []any {
	out := make([]any, len(rs))
	for i, r := range rs {
		out[i] = map[string]any{"path": r.Path, "body": r.Body}
	}
	return out
}

// diffLines renders both sides one element per line and marks the lines
// that differ.
func diffLines(want, got []any) string {
	var b strings.Builder
	n := max(len(want), len(got))
	for i := range n {
		var w, g []byte
		if i < len(want) {
			w, _ = json.Marshal(want[i])
		}
		if i < len(got) {
			g, _ = json.Marshal(got[i])
		}
		if bytes.Equal(w, g) {
			fmt.Fprintf(&b, "  %s\n", w)
			continue
		}
		fmt.Fprintf(&b, "- ref  %s\n+ goai %s\n", w, g)
	}
	return b.String()
}
