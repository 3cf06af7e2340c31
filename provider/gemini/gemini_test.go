package gemini_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/gemini"
	"github.com/goai-sdk/goai/provider/internal/wire"
	"github.com/goai-sdk/goai/provider/internal/wiretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mk(o *wire.Options) chat.Adapter { return gemini.New("gemini-2.5-flash", o) }

func TestGolden(t *testing.T) {
	wiretest.GoldenDir(t, "stream", "sse", "text/event-stream", mk)
}

func TestTransport(t *testing.T) {
	ok, _ := os.ReadFile("testdata/stream/text.sse")
	prefix, _ := os.ReadFile("testdata/stream/truncated.sse")
	wiretest.Suite{
		New: mk, BasePath: "/v1beta", Path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent", ContentType: "text/event-stream",
		OK: ok, Prefix: prefix, AuthHeader: "X-Goog-Api-Key",
		ErrorBody: func(status int, msg string) string {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": "INVALID_ARGUMENT"}})
			return string(b)
		},
	}.Run(t)
}

func TestBody(t *testing.T) {
	req := &chat.Request{
		SystemPrompts: []chat.SystemPrompt{{Content: "You are terse."}},
		Messages: []agui.ModelMessage{
			{Role: agui.RoleUser, Content: agui.Parts(
				agui.ContentPart{Type: "text", Content: "What is in these?"},
				agui.ContentPart{Type: "image", Source: &agui.Source{Type: "data", Value: "iVBORw0KGgo=", MimeType: "image/png"}},
				agui.ContentPart{Type: "audio", Source: &agui.Source{Type: "url", Value: "gs://bucket/a.wav", MimeType: "audio/wav"}},
			)},
			{Role: agui.RoleAssistant, Thinking: []agui.Thinking{{Content: "thinking", Signature: "textsig"}},
				Content: agui.Text("Checking."),
				ToolCalls: []agui.ToolCall{
					{ID: "call_1", Type: "function", Function: agui.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}, Metadata: map[string]any{"thoughtSignature": "callsig"}},
					{ID: "call_2", Type: "function", Function: agui.FunctionCall{Name: "get_weather", Arguments: `{"city":"Tokyo"}`}},
				}},
			{Role: agui.RoleTool, ToolCallID: "call_1", Content: agui.Text(`{"temp":21}`)},
			{Role: agui.RoleTool, ToolCallID: "call_2", Content: agui.Text(`sunny`)},
		},
		Tools:        []chat.ToolSpec{{Name: "get_weather", Description: "Weather by city", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		ModelOptions: map[string]any{"temperature": 0.3, "maxOutputTokens": 500, "thinkingConfig": map[string]any{"includeThoughts": true}, "safetySettings": []any{map[string]any{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}}},
	}
	b, err := gemini.New("gemini-2.5-flash", nil).Body(req)
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, b, "", "  ")
	wiretest.Golden(t, "testdata/body.golden.json", pretty.Bytes())
}
