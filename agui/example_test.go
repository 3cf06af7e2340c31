package agui_test

import (
	"errors"
	"fmt"

	"github.com/goai-sdk/goai/agui"
)

func ExampleParseRunInput() {
	body := []byte(`{"threadId":"t1","runId":"run-2","state":{},"tools":[],"context":[],"forwardedProps":{},
		"messages":[{"id":"u1","role":"user","content":"Weather in Paris?"},
		{"id":"a1-reasoning-2kl","role":"reasoning","content":"hm"},
		{"id":"a1","role":"assistant","toolCalls":[{"id":"c1","type":"function","function":{"name":"weather","arguments":"{}"}}]},
		{"id":"tool-c1","role":"tool","toolCallId":"c1","content":"20C"}]}`)
	in, err := agui.ParseRunInput(body)
	if err != nil {
		panic(err)
	}
	for _, m := range agui.ToModelMessages(in.InputMessages()) {
		fmt.Printf("%s %q thinking=%d calls=%d\n", m.Role, m.Content.String(), len(m.Thinking), len(m.ToolCalls))
	}

	_, err = agui.ParseRunInput([]byte(`{"threadId":"t1","messages":[{"role":"robot"}],"tools":[],"context":[]}`))
	var re *agui.RequestError
	if errors.As(err, &re) {
		for _, p := range re.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// user "Weather in Paris?" thinking=0 calls=0
	// assistant "" thinking=1 calls=1
	// tool "20C" thinking=0 calls=0
	// runId must be a string
	// messages[0].id must be a string
	// messages[0].role must be one of developer | system | assistant | user | tool | activity | reasoning
}

func ExampleSnapshotMessages() {
	msgs := []agui.ModelMessage{
		{Role: agui.RoleUser, Content: agui.Text("hi")},
		{Role: agui.RoleAssistant, ID: "m1", Thinking: []agui.Thinking{{Content: "hmm"}},
			ToolCalls: []agui.ToolCall{{ID: "c1", Type: "function", Function: agui.FunctionCall{Name: "f", Arguments: "{}"}}}},
	}
	e := agui.Event{Type: agui.MessagesSnapshot, Messages: agui.MarshalWireMessages(agui.SnapshotMessages(msgs, "run-1"))}
	fmt.Println(string(agui.AppendWire(nil, &e)))
	// Output:
	// {"type":"MESSAGES_SNAPSHOT","messages":[{"id":"snapshot_run-1_0","role":"user","content":"hi"},{"id":"m1-reasoning-27t4","role":"reasoning","content":"hmm"},{"id":"m1","role":"assistant","toolCalls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}
}

func ExampleRestore() {
	var e agui.Event
	wire := `{"type":"RUN_FINISHED","threadId":"t","runId":"r","usage":[{"inputTokens":10,"outputTokens":5,"totalTokens":15}],` +
		`"metadata":{"tanstack":{"finishReason":"stop","model":"m","usage":{"cost":0.01}}}}`
	if err := e.UnmarshalJSON([]byte(wire)); err != nil {
		panic(err)
	}
	agui.Restore(&e)
	fmt.Println(e.FinishReason, e.Model, e.Usage.PromptTokens, string(e.Usage.Extra["cost"]))
	// Output:
	// stop m 10 0.01
}
