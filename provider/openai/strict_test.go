package openai_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/internal/wire"
	"github.com/goai-sdk/goai/provider/internal/wiretest"
	"github.com/goai-sdk/goai/provider/openai"
)

// weatherIn has a required, an optional and a nullable property. Strict
// mode makes the model send the optional one as null when it leaves it out.
type weatherIn struct {
	City  string  `json:"city"`
	Units string  `json:"units,omitempty"`
	Note  *string `json:"note,omitempty"`
}

// strictToolRun runs one model turn that calls weather with args, through
// the engine and a real tool, and returns the arguments the tool received
// and the tool result the client saw.
func strictToolRun(t *testing.T, mk func(o *wire.Options) chat.Adapter, body string) (json.RawMessage, agui.Event) {
	t.Helper()
	url, n := wiretest.Serve(t, "text/event-stream", []byte(body))
	var got json.RawMessage
	tool := chat.NewTool("weather", "Weather in a city.", func(ctx context.Context, in weatherIn) (string, error) {
		if in.Units != "" || in.Note != nil {
			t.Errorf("decoded %+v", in)
		}
		return "sunny in " + in.City, nil
	})
	run := tool.Execute
	tool.Execute = func(ctx context.Context, args json.RawMessage) (any, error) {
		got = args
		return run(ctx, args)
	}
	var result agui.Event
	for ev, err := range chat.Stream(wiretest.Ctx(t), chat.Options{Adapter: mk(wiretest.Options(t, url)), Tools: []*chat.Tool{tool},
		Strategy: chat.MaxIterations(1), Messages: []agui.ModelMessage{{Role: "user", Content: agui.Text("weather in Oslo?")}}}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agui.ToolCallResult {
			result = ev
		}
	}
	if n.Load() != 1 {
		t.Fatalf("%d model requests, want 1", n.Load())
	}
	return got, result
}

func TestStrictToolNullsStripped(t *testing.T) {
	const args = `{\"city\":\"Oslo\",\"units\":null,\"note\":null}`
	for name, tc := range map[string]struct {
		mk   func(o *wire.Options) chat.Adapter
		body string
	}{
		"chat": {func(o *wire.Options) chat.Adapter { return openai.NewChat("gpt-4o", o) },
			`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":""}}]}}]}` + "\n\n" +
				`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + args + `"}}]}}]}` + "\n\n" +
				`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"},
		"responses": {func(o *wire.Options) chat.Adapter { return openai.NewResponses("gpt-4.1", o) },
			`data: {"type":"response.created","response":{"id":"resp_1","model":"gpt-4.1"}}` + "\n\n" +
				`data: {"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"weather","arguments":""}}` + "\n\n" +
				`data: {"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"` + args + `"}` + "\n\n" +
				`data: {"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":0,"arguments":"` + args + `"}` + "\n\n" +
				`data: {"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"weather","arguments":"` + args + `"}}` + "\n\n" +
				`data: {"type":"response.completed","response":{"id":"resp_1","model":"gpt-4.1","status":"completed","usage":{"input_tokens":5,"output_tokens":7,"total_tokens":12}}}` + "\n\n"},
	} {
		t.Run(name, func(t *testing.T) {
			got, result := strictToolRun(t, tc.mk, tc.body)
			// The optional property's null is gone; the nullable one's stays.
			if string(got) != `{"city":"Oslo","note":null}` {
				t.Fatalf("tool got %s", got)
			}
			if result.Content != "sunny in Oslo" {
				t.Fatalf("tool result %+v", result)
			}
		})
	}
}
