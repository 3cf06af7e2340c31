package anthropic_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/anthropic"
	"github.com/goai-sdk/goai/provider/internal/wire"
	"github.com/goai-sdk/goai/provider/internal/wiretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mk(o *wire.Options) chat.Adapter { return anthropic.New("claude-sonnet-4-5", o) }

func TestGolden(t *testing.T) {
	wiretest.GoldenDir(t, "stream", "sse", "text/event-stream", mk)
}

func TestTransport(t *testing.T) {
	ok, _ := os.ReadFile("testdata/stream/text.sse")
	full, _ := os.ReadFile("testdata/stream/error.sse")
	prefix := full[:bytes.Index(full, []byte("event: error"))]
	wiretest.Suite{
		New: mk, BasePath: "/v1", Path: "/v1/messages", ContentType: "text/event-stream",
		OK: ok, Prefix: prefix, AuthHeader: "X-Api-Key",
		ErrorBody: func(status int, msg string) string {
			b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}})
			return string(b)
		},
	}.Run(t)
}

func TestBody(t *testing.T) {
	req := &chat.Request{
		SystemPrompts: []chat.SystemPrompt{{Content: "You are terse.", Metadata: map[string]any{"cache_control": map[string]any{"type": "ephemeral"}}}},
		Messages: []agui.ModelMessage{
			{Role: agui.RoleUser, Content: agui.Parts(
				agui.ContentPart{Type: "text", Content: "What is in these?"},
				agui.ContentPart{Type: "image", Source: &agui.Source{Type: "data", Value: "iVBORw0KGgo=", MimeType: "image/png"}},
				agui.ContentPart{Type: "document", Source: &agui.Source{Type: "url", Value: "https://example.com/a.pdf"}},
			)},
			{Role: agui.RoleAssistant, Content: agui.Text("Checking."),
				Thinking: []agui.Thinking{{Content: "think 1", Signature: "sig1"}, {Content: "unsigned is dropped"}, {Signature: "redacted_thinking:REDACTED"}},
				ToolCalls: []agui.ToolCall{
					{ID: "toolu_1", Type: "function", Function: agui.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
					{ID: "toolu_2", Type: "function", Function: agui.FunctionCall{Name: "get_weather", Arguments: `{"city":"Tokyo"}`}},
				}},
			{Role: agui.RoleTool, ToolCallID: "toolu_1", Content: agui.Text(`{"temp":21}`)},
			{Role: agui.RoleTool, ToolCallID: "toolu_2", Content: agui.Text(`failed`), Error: "failed"},
		},
		Tools:        []chat.ToolSpec{{Name: "get_weather", Description: "Weather by city", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		ModelOptions: map[string]any{"temperature": 0.5, "thinking": map[string]any{"type": "enabled", "budget_tokens": 8000}},
	}
	b, err := anthropic.New("claude-sonnet-4-5", nil).Body(req)
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, b, "", "  ")
	wiretest.Golden(t, "testdata/body.golden.json", pretty.Bytes())
	// max_tokens from model options wins over the default
	req.ModelOptions = map[string]any{"max_tokens": 99}
	b, _ = anthropic.New("m", nil).Body(req)
	if !bytes.Contains(b, []byte(`"max_tokens":99`)) || bytes.Count(b, []byte(`"max_tokens"`)) != 1 {
		t.Fatalf("max_tokens: %s", b)
	}
}
