package mockprovider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/anthropic"
	"github.com/goai-sdk/goai/provider/gemini"
	"github.com/goai-sdk/goai/provider/internal/wire"
	"github.com/goai-sdk/goai/provider/internal/wiretest"
	"github.com/goai-sdk/goai/provider/mockprovider"
	"github.com/goai-sdk/goai/provider/ollama"
	"github.com/goai-sdk/goai/provider/openai"
	"github.com/goai-sdk/goai/provider/scripted"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type apiCase struct {
	api     string
	adapter func(o *wire.Options) chat.Adapter
	opts    map[string]any
}

var cases = []apiCase{
	{"openai-responses", func(o *wire.Options) chat.Adapter { return openai.NewResponses("gpt-5-mini", o) },
		map[string]any{"temperature": 0.2, "max_output_tokens": 256, "reasoning": map[string]any{"effort": "low", "summary": "auto"}, "store": false}},
	{"openai-chat", func(o *wire.Options) chat.Adapter { return openai.NewChat("gpt-4o-mini", o) },
		map[string]any{"temperature": 0.2, "max_completion_tokens": 256}},
	{"anthropic", func(o *wire.Options) chat.Adapter { return anthropic.New("claude-sonnet-4-5", o) },
		map[string]any{"max_tokens": 1024, "temperature": 0.2}},
	{"gemini", func(o *wire.Options) chat.Adapter { return gemini.New("gemini-2.5-flash", o) },
		map[string]any{"temperature": 0.2, "maxOutputTokens": 256, "thinkingConfig": map[string]any{"includeThoughts": true}}},
	{"ollama", func(o *wire.Options) chat.Adapter { return ollama.New("qwen3", o) },
		map[string]any{"options": map[string]any{"temperature": 0.2, "num_predict": 256}, "think": true}},
}

func load(t *testing.T, name string) *scripted.Scenario {
	sc, err := scripted.LoadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func serve(t *testing.T, api string, sc *scripted.Scenario, dir string) string {
	srv := httptest.NewServer(mockprovider.NewHandler(api, sc, dir))
	t.Cleanup(srv.Close)
	return srv.URL + mockprovider.BasePath(api)
}

func weatherTool() *chat.Tool {
	type in struct {
		City string `json:"city"`
	}
	type out struct {
		City string `json:"city"`
		Temp int    `json:"temp"`
	}
	return chat.NewTool("get_weather", "Current weather for a city", func(_ context.Context, a in) (out, error) {
		temps := map[string]int{"Paris": 21, "Tokyo": 25}
		return out{City: a.City, Temp: temps[a.City]}, nil
	})
}

// TestRoundTrip runs adapter → chat.Stream → tool → second turn against the
// mock server speaking each provider's wire format, and pins the exact
// request bodies the adapter sent.
func TestRoundTrip(t *testing.T) {
	for _, c := range cases {
		t.Run(c.api, func(t *testing.T) {
			wiretest.Deterministic(t)
			dir := t.TempDir()
			base := serve(t, c.api, load(t, "weather.json"), dir)
			o := wiretest.Options(t, base)
			// Sampling through middleware, under the provider's native keys.
			setOpts := &chat.Middleware{Name: "sampling", OnConfig: func(_ *chat.Context, cfg *chat.Config) error {
				m := map[string]any{}
				for k, v := range c.opts {
					m[k] = v
				}
				cfg.ModelOptions = m
				return nil
			}}
			var evs []agui.Event
			for ev, err := range chat.Stream(wiretest.Ctx(t), chat.Options{
				Adapter:       c.adapter(o),
				Messages:      []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("Weather in Paris and Tokyo?")}},
				SystemPrompts: []chat.SystemPrompt{{Content: "Be brief."}},
				Tools:         []*chat.Tool{weatherTool()},
				Middleware:    []*chat.Middleware{setOpts},
				ThreadID:      "thread-rt", RunID: "run-rt",
			}) {
				if err != nil {
					t.Fatalf("run failed: %v", err)
				}
				evs = append(evs, ev)
			}
			var results []string
			var text strings.Builder
			var finishes []string
			for _, ev := range evs {
				switch ev.Type {
				case agui.ToolCallResult:
					results = append(results, ev.Content)
				case agui.TextMessageContent:
					text.WriteString(ev.Delta)
				case agui.RunFinished:
					finishes = append(finishes, ev.FinishReasonValue())
				case agui.RunError:
					t.Fatalf("RUN_ERROR %+v", ev)
				}
			}
			if len(results) != 2 || !strings.Contains(results[0], `"temp":21`) || !strings.Contains(results[1], `"temp":25`) {
				t.Fatalf("tool results %q", results)
			}
			if got := text.String(); got != "Let me check.Paris is 21°C, Tokyo 25°C." {
				t.Fatalf("text %q", got)
			}
			if fmt.Sprint(finishes) != "[tool_calls stop]" {
				t.Fatalf("finish reasons %v", finishes)
			}
			for _, n := range []string{"001.json", "002.json"} {
				raw, err := os.ReadFile(filepath.Join(dir, n))
				if err != nil {
					t.Fatal(err)
				}
				var pretty bytes.Buffer
				if err := json.Indent(&pretty, raw, "", "  "); err != nil {
					t.Fatalf("%s is not JSON: %v", n, err)
				}
				pretty.WriteByte('\n')
				wiretest.Golden(t, filepath.Join("testdata", "roundtrip", c.api, n), pretty.Bytes())
			}
			if _, err := os.Stat(filepath.Join(dir, "003.json")); err == nil {
				t.Fatal("a third request was made")
			}
		})
	}
}

// TestRetryThroughMock: a 503 and a 429 turn are retried before the first
// byte; the third request streams.
func TestRetryThroughMock(t *testing.T) {
	for _, c := range cases {
		t.Run(c.api, func(t *testing.T) {
			dir := t.TempDir()
			base := serve(t, c.api, load(t, "retry.json"), dir)
			evs := wiretest.Collect(t, c.adapter(wiretest.Options(t, base)).ChatStream(wiretest.Ctx(t), wiretest.Req()))
			wiretest.CheckGrammar(t, evs)
			if e := evs[len(evs)-1]; e.Type != agui.RunFinished || e.FinishReason != agui.FinishStop {
				t.Fatalf("last %+v", e)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
			if len(files) != 3 {
				t.Fatalf("%d requests recorded, want 3", len(files))
			}
		})
	}
}

// TestFailureModes: HTTP 400 (no retry), an in-stream error, a length
// finish, and a stream that stops without its terminal event.
func TestFailureModes(t *testing.T) {
	for _, c := range cases {
		t.Run(c.api, func(t *testing.T) {
			base := serve(t, c.api, load(t, "errors.json"), "")
			a := c.adapter(wiretest.Options(t, base))
			want := []struct{ typ, code, reason string }{
				{"RUN_ERROR", "400", ""},
				{"RUN_ERROR", "", ""},
				{"RUN_FINISHED", "", "length"},
				{"RUN_ERROR", "incomplete_stream", ""},
			}
			if c.api == "anthropic" { // stop_reason max_tokens is a RUN_ERROR, as the reference does
				want[2] = struct{ typ, code, reason string }{"RUN_ERROR", "max_tokens", ""}
			}
			for i, w := range want {
				evs := wiretest.Collect(t, a.ChatStream(wiretest.Ctx(t), wiretest.Req()))
				wiretest.CheckGrammar(t, evs)
				wiretest.NoKey(t, evs)
				e := evs[len(evs)-1]
				if string(e.Type) != w.typ || (w.code != "" && e.Code != w.code) || e.FinishReason != w.reason {
					t.Fatalf("turn %d: last %+v, want %+v", i, e, w)
				}
			}
		})
	}
}

func TestMain_PrintsURLAndServes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	pr, pw, _ := os.Pipe()
	done := make(chan int, 1)
	dir := t.TempDir()
	go func() {
		done <- mockprovider.Main(ctx, []string{"--api", "openai-chat", "--scenario", "testdata/retry.json", "--record", dir}, pw, &errb)
		pw.Close()
	}()
	buf := make([]byte, 256)
	n, _ := pr.Read(buf)
	url := strings.TrimSpace(string(buf[:n]))
	out.WriteString(url)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1") {
		t.Fatalf("url %q", url)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	a := openai.NewChat("m", &wire.Options{BaseURL: url, HTTPClient: &http.Client{Transport: tr}, RetryBaseDelay: time.Millisecond})
	evs := wiretest.Collect(t, a.ChatStream(ctx, wiretest.Req()))
	if e := evs[len(evs)-1]; e.Type != agui.RunFinished {
		t.Fatalf("last %+v", e)
	}
	tr.CloseIdleConnections()
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	pr.Close()
	if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) != 3 {
		t.Fatalf("recorded %d", len(files))
	}
	if code := mockprovider.Main(context.Background(), []string{"--api", "nope"}, &out, &errb); code != 2 {
		t.Fatalf("bad api exit %d", code)
	}
}

// TestStructuredOutput: every adapter implements chat.StructuredOutputAdapter
// by sending the schema in its provider's native form.
func TestStructuredOutput(t *testing.T) {
	marks := map[string]string{
		"openai-responses": `"format":{"name":"structured_output","schema":`,
		"openai-chat":      `"response_format":{"json_schema":{"name":"structured_output","schema":`,
		"anthropic":        `"output_config":{"format":{"schema":`,
		"gemini":           `"responseJsonSchema":`,
		"ollama":           `"format":{"additionalProperties":false`,
	}
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`)
	for _, c := range cases {
		t.Run(c.api, func(t *testing.T) {
			dir := t.TempDir()
			base := serve(t, c.api, load(t, "structured.json"), dir)
			so, ok := c.adapter(wiretest.Options(t, base)).(chat.StructuredOutputAdapter)
			if !ok {
				t.Fatal("not a StructuredOutputAdapter")
			}
			res, err := so.StructuredOutput(wiretest.Ctx(t), wiretest.Req(), schema)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(res.Data) != "map[answer:42]" || res.Usage == nil || res.Usage.TotalTokens != 14 {
				t.Fatalf("%+v", res)
			}
			raw, _ := os.ReadFile(filepath.Join(dir, "001.json"))
			var v any
			_ = json.Unmarshal(raw, &v)
			norm, _ := json.Marshal(v)
			if !strings.Contains(string(norm), marks[c.api]) {
				t.Fatalf("schema not sent natively: %s", norm)
			}
		})
	}
}
