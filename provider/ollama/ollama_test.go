package ollama_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/internal/wire"
	"github.com/goai-sdk/goai/provider/internal/wiretest"
	"github.com/goai-sdk/goai/provider/ollama"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mk(o *wire.Options) chat.Adapter { return ollama.New("llama3.2", o) }

func TestGolden(t *testing.T) {
	wiretest.GoldenDir(t, "stream", "ndjson", "application/x-ndjson", mk)
}

func TestTransport(t *testing.T) {
	ok, _ := os.ReadFile("testdata/stream/text.ndjson")
	prefix, _ := os.ReadFile("testdata/stream/truncated.ndjson")
	wiretest.Suite{
		New: mk, Path: "/api/chat", ContentType: "application/x-ndjson",
		OK: ok, Prefix: prefix, AuthHeader: "Authorization",
		ErrorBody: func(status int, msg string) string {
			b, _ := json.Marshal(map[string]any{"error": msg})
			return string(b)
		},
	}.Run(t)
}

func TestBody(t *testing.T) {
	req := &chat.Request{
		SystemPrompts: []chat.SystemPrompt{{Content: "You are terse."}},
		Messages: []agui.ModelMessage{
			{Role: agui.RoleUser, Content: agui.Parts(
				agui.ContentPart{Type: "text", Content: "What is in this?"},
				agui.ContentPart{Type: "image", Source: &agui.Source{Type: "data", Value: "iVBORw0KGgo=", MimeType: "image/png"}},
			)},
			{Role: agui.RoleAssistant, ToolCalls: []agui.ToolCall{{ID: "call_1", Type: "function", Function: agui.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
			{Role: agui.RoleTool, ToolCallID: "call_1", Content: agui.Text(`{"temp":21}`)},
		},
		Tools:        []chat.ToolSpec{{Name: "get_weather", Description: "Weather by city", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		ModelOptions: map[string]any{"options": map[string]any{"num_predict": 128, "temperature": 0.1}, "think": true, "keep_alive": "5m"},
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`),
	}
	b, err := ollama.New("llama3.2", nil).Body(req)
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, b, "", "  ")
	wiretest.Golden(t, "testdata/body.golden.json", pretty.Bytes())
}
