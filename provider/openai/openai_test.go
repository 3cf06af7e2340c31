package openai_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/internal/wire"
	"github.com/goai-sdk/goai/provider/internal/wiretest"
	"github.com/goai-sdk/goai/provider/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func golden(t *testing.T, dir string, mk func(o *wire.Options) chat.Adapter) {
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.sse"))
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".sse")
		t.Run(name, func(t *testing.T) {
			wiretest.Deterministic(t)
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			url, n := wiretest.Serve(t, "text/event-stream", body)
			evs := wiretest.Collect(t, mk(wiretest.Options(t, url)).ChatStream(wiretest.Ctx(t), wiretest.Req()))
			wiretest.CheckGrammar(t, evs)
			wiretest.NoKey(t, evs)
			if n.Load() != 1 {
				t.Fatalf("%d requests", n.Load())
			}
			wiretest.Golden(t, strings.TrimSuffix(f, ".sse")+".golden.jsonl", wiretest.Encode(evs))
		})
	}
}

func TestResponsesGolden(t *testing.T) {
	golden(t, "responses", func(o *wire.Options) chat.Adapter { return openai.NewResponses("gpt-4.1", o) })
}

func TestChatGolden(t *testing.T) {
	golden(t, "chat", func(o *wire.Options) chat.Adapter { return openai.NewChat("gpt-4o", o) })
}

func openaiError(status int, msg string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}})
	return string(b)
}

func TestResponsesTransport(t *testing.T) {
	ok, _ := os.ReadFile("testdata/responses/text.sse")
	prefix, _ := os.ReadFile("testdata/responses/truncated.sse")
	wiretest.Suite{
		New:         func(o *wire.Options) chat.Adapter { return openai.NewResponses("gpt-4.1", o) },
		BasePath:    "/v1",
		Path:        "/v1/responses",
		ContentType: "text/event-stream",
		OK:          ok, Prefix: prefix,
		ErrorBody:  openaiError,
		AuthHeader: "Authorization",
	}.Run(t)
}

func TestChatTransport(t *testing.T) {
	ok, _ := os.ReadFile("testdata/chat/text.sse")
	full, _ := os.ReadFile("testdata/chat/error.sse")
	prefix := full[:bytes.Index(full, []byte(`data: {"error"`))]
	wiretest.Suite{
		New:         func(o *wire.Options) chat.Adapter { return openai.NewChat("gpt-4o", o) },
		BasePath:    "/v1",
		Path:        "/v1/chat/completions",
		ContentType: "text/event-stream",
		OK:          ok, Prefix: prefix,
		ErrorBody:  openaiError,
		AuthHeader: "Authorization",
	}.Run(t)
}

func historyRequest() *chat.Request {
	return &chat.Request{
		SystemPrompts: []chat.SystemPrompt{{Content: "You are terse."}},
		Messages: []agui.ModelMessage{
			{Role: agui.RoleUser, Content: agui.Parts(
				agui.ContentPart{Type: "text", Content: "Describe these"},
				agui.ContentPart{Type: "image", Source: &agui.Source{Type: "url", Value: "https://example.com/cat.png"}},
				agui.ContentPart{Type: "image", Source: &agui.Source{Type: "data", Value: "iVBORw0KGgo=", MimeType: "image/png"}},
				agui.ContentPart{Type: "audio", Source: &agui.Source{Type: "data", Value: "UklGRg==", MimeType: "audio/wav"}},
				agui.ContentPart{Type: "document", Source: &agui.Source{Type: "data", Value: "JVBERi0=", MimeType: "application/pdf"}},
			)},
			{Role: agui.RoleAssistant, Content: agui.Text("Checking."),
				Thinking:  []agui.Thinking{{Content: "need weather", Signature: "gAAAAenc"}, {Content: "unsigned"}},
				ToolCalls: []agui.ToolCall{{ID: "call_1", Type: "function", Function: agui.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
			{Role: agui.RoleTool, ToolCallID: "call_1", Content: agui.Text(`{"temp":21}`)},
		},
		Tools:        []chat.ToolSpec{{Name: "get_weather", Description: "Weather by city", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
		ModelOptions: map[string]any{"temperature": 0.2, "max_output_tokens": 300, "reasoning": map[string]any{"effort": "low", "summary": "auto"}},
	}
}

func TestResponsesBody(t *testing.T) {
	req := historyRequest()
	req.OutputSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`)
	b, err := openai.NewResponses("o4-mini", nil).ResponsesBody(req)
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, b, "", "  ")
	wiretest.Golden(t, "testdata/responses_body.golden.json", pretty.Bytes())
}

func TestChatBody(t *testing.T) {
	req := historyRequest()
	req.ModelOptions = map[string]any{"temperature": 0.2, "max_completion_tokens": 300}
	req.OutputSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`)
	b, err := openai.NewChat("gpt-4o", nil).ChatBody(req)
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, b, "", "  ")
	wiretest.Golden(t, "testdata/chat_body.golden.json", pretty.Bytes())
}

func TestStructuredOutput(t *testing.T) {
	body := []byte("data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"{\\\"answer\\\":\"}}]}\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\\"42\\\"}\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	url, _ := wiretest.Serve(t, "text/event-stream", body)
	a := openai.NewChat("gpt-4o", wiretest.Options(t, url))
	res, err := a.StructuredOutput(wiretest.Ctx(t), wiretest.Req(), json.RawMessage(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Data) != "map[answer:42]" || res.RawText != `{"answer":"42"}` {
		t.Fatalf("%+v", res)
	}
}

// Structured output through the engine on the native combined path: the
// schema rides the streaming request and the final text is the answer.
func TestStructuredThroughEngineCombined(t *testing.T) {
	body := []byte("data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"{\\\"answer\\\":\"}}]}\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\\"42\\\"}\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	url, _ := wiretest.Serve(t, "text/event-stream", body)
	a := openai.NewChat("gpt-4o", wiretest.Options(t, url))
	var _ chat.CombinedStructuredOutput = a
	type out struct {
		Answer string `json:"answer"`
	}
	got, err := chat.Structured[out](wiretest.Ctx(t), chat.Options{Adapter: a, Messages: []agui.ModelMessage{{Role: "user", Content: agui.Text("?")}}})
	if err != nil || got.Answer != "42" {
		t.Fatalf("got %+v, %v", got, err)
	}
}
