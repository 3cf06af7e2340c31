package chat_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
)

func TestCheck11ToolsRunSequentiallyBeforeNextModelCall(t *testing.T) {
	var order []string
	mk := func(name string) *chat.Tool {
		return chat.NewTool(name, name, func(ctx context.Context, in struct{}) (string, error) {
			order = append(order, name)
			return name, nil
		})
	}
	turn := []agui.Event{{Type: agui.RunStarted}}
	for _, c := range [][2]string{{"c1", "first"}, {"c2", "second"}} {
		turn = append(turn, agui.Event{Type: agui.ToolCallStart, ToolCallID: c[0], ToolCallName: c[1]},
			agui.Event{Type: agui.ToolCallArgs, ToolCallID: c[0], Delta: "{}"}, agui.Event{Type: agui.ToolCallEnd, ToolCallID: c[0]})
	}
	turn = append(turn, agui.Event{Type: agui.RunFinished, FinishReason: agui.FinishToolCalls})
	a := &chattest.Adapter{Turns: [][]agui.Event{turn, chattest.TextTurn("m", "x", "stop")}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{mk("second"), mk("first")}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, ",") != "first,second" {
		t.Fatalf("execution order %v, want emission order", order)
	}
	got := chattest.Types(evs)
	if !strings.Contains(got, "RUN_FINISHED TOOL_CALL_RESULT TOOL_CALL_RESULT TEXT_MESSAGE_START") {
		t.Fatalf("both results must precede the next turn: %s", got)
	}
	hist := a.Requests()[1].Messages
	if hist[2].ToolCallID != "c1" || hist[3].ToolCallID != "c2" {
		t.Fatalf("second call history order: %+v", hist)
	}
}

func TestCheck27OnChunkSeesExtrasTheConsumerDoesNot(t *testing.T) {
	var sawReason, sawModel string
	mw := &chat.Middleware{Name: "m", OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		if ev.Type == agui.RunFinished {
			sawReason, sawModel = ev.FinishReason, ev.Model
		}
		return chat.Pass, nil
	}}
	turn := chattest.TextTurn("m", "x", "stop")
	turn[4].Model = "gpt-x"
	a := &chattest.Adapter{Turns: [][]agui.Event{turn}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}})
	if err != nil {
		t.Fatal(err)
	}
	if sawReason != "stop" || sawModel != "gpt-x" {
		t.Fatalf("onChunk saw finishReason %q model %q", sawReason, sawModel)
	}
	rf := evs[len(evs)-1]
	ts := rf.TanstackMeta()
	if rf.FinishReason != "" || rf.Model != "" || ts["finishReason"] != "stop" || ts["model"] != "gpt-x" {
		t.Fatalf("yielded RUN_FINISHED: %s", agui.AppendJSON(nil, &rf))
	}
}

func TestCheck28EncryptedValueFollowsSignatureButSkipsOnChunk(t *testing.T) {
	var seen []agui.EventType
	mw := &chat.Middleware{Name: "m", OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		seen = append(seen, ev.Type)
		return chat.Pass, nil
	}}
	turn := []agui.Event{
		{Type: agui.RunStarted},
		{Type: agui.StepStarted, StepName: "thinking"},
		{Type: agui.StepFinished, StepName: "thinking", Signature: "sig-1", StepID: "s1"},
		{Type: agui.TextMessageStart, MessageID: "m", Role: "assistant"},
		{Type: agui.TextMessageContent, MessageID: "m", Delta: "x"},
		{Type: agui.TextMessageEnd, MessageID: "m"},
		{Type: agui.RunFinished, FinishReason: "stop"},
	}
	a := &chattest.Adapter{Turns: [][]agui.Event{turn}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(chattest.Types(evs), "STEP_FINISHED REASONING_ENCRYPTED_VALUE TEXT_MESSAGE_START") {
		t.Fatalf("stream: %s", chattest.Types(evs))
	}
	for _, ty := range seen {
		if ty == agui.ReasoningEncryptedValue {
			t.Fatal("the derived REASONING_ENCRYPTED_VALUE reached onChunk")
		}
	}
	for _, e := range evs {
		if e.Type == agui.ReasoningEncryptedValue && (e.EncryptedValue != "sig-1" || e.EntityID != "s1" || e.Subtype != "message") {
			t.Fatalf("encrypted value event: %s", agui.AppendJSON(nil, &e))
		}
	}
}

// clientTool is a client-executed tool with a JSON Schema input.
func clientTool(name string) *chat.Tool {
	return &chat.Tool{Name: name, Description: name, InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
}

func approvalTool(calls *int) *chat.Tool {
	t := chat.NewTool("deploy", "deploy", func(ctx context.Context, in struct {
		Env string `json:"env"`
	}) (string, error) {
		*calls++
		return "deployed " + in.Env, nil
	})
	t.NeedsApproval = true
	return t
}

func TestCheck12To14ClientToolPausesWithSnapshotStateAndNoTerminalHook(t *testing.T) {
	var terminal int
	mw := &chat.Middleware{Name: "m",
		OnFinish: func(*chat.Context, chat.FinishInfo) error { terminal++; return nil },
		OnAbort:  func(*chat.Context, chat.AbortInfo) error { terminal++; return nil },
		OnError:  func(*chat.Context, chat.ErrorInfo) error { terminal++; return nil }}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.ToolTurn("c1", "pick", `{"q":"x"}`), chattest.TextTurn("m", "never", "stop")}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{clientTool("pick")},
		Middleware: []*chat.Middleware{mw}, State: json.RawMessage(`{"step":1}`), RunID: "run-9"})
	if err != nil {
		t.Fatal(err)
	}
	got := chattest.Types(evs)
	if !strings.HasSuffix(got, "TOOL_CALL_END MESSAGES_SNAPSHOT STATE_SNAPSHOT RUN_FINISHED") || strings.Count(got, "RUN_FINISHED") != 1 {
		t.Fatalf("pause sequence: %s", got)
	}
	fin := evs[len(evs)-1]
	if fin.Outcome == nil || fin.Outcome.Type != "interrupt" || fin.Outcome.Interrupts[0].ID != "client_tool_c1" ||
		fin.Outcome.Interrupts[0].Reason != "tanstack:client_tool_execution" {
		t.Fatalf("outcome: %s", agui.AppendJSON(nil, &fin))
	}
	if len(a.Requests()) != 1 || terminal != 0 {
		t.Fatalf("model calls %d, terminal hooks %d", len(a.Requests()), terminal)
	}
}

func TestCheck15And16ApprovalInterruptGatesTheBatch(t *testing.T) {
	var deploys int
	var adds []addIn
	turn := []agui.Event{{Type: agui.RunStarted}}
	for _, c := range [][3]string{{"c1", "deploy", `{"env":"prod"}`}, {"c2", "add", `{"a":1,"b":2}`}} {
		turn = append(turn, agui.Event{Type: agui.ToolCallStart, ToolCallID: c[0], ToolCallName: c[1]},
			agui.Event{Type: agui.ToolCallArgs, ToolCallID: c[0], Delta: c[2]}, agui.Event{Type: agui.ToolCallEnd, ToolCallID: c[0]})
	}
	turn = append(turn, agui.Event{Type: agui.RunFinished, FinishReason: agui.FinishToolCalls})
	a := &chattest.Adapter{Turns: [][]agui.Event{turn}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), RunID: "run-1",
		Tools: []*chat.Tool{approvalTool(&deploys), addTool(&adds)}})
	if err != nil {
		t.Fatal(err)
	}
	if deploys != 0 || len(adds) != 0 {
		t.Fatalf("nothing may run while an approval is pending: deploy %d add %d", deploys, len(adds))
	}
	fin := evs[len(evs)-1]
	it := fin.Outcome.Interrupts[0]
	if it.ID != "approval_c1" || it.Reason != "tool_call" || it.Message != "Approval required to run deploy" {
		t.Fatalf("interrupt: %+v", it)
	}
	b, _ := json.Marshal(it.Metadata["tanstack:interruptBinding"])
	var binding map[string]any
	_ = json.Unmarshal(b, &binding)
	if binding["v"] != 1.0 || binding["interruptedRunId"] != "run-1" || binding["generation"] != 0.0 ||
		!strings.HasPrefix(binding["inputSchemaHash"].(string), "sha256:") || !strings.HasPrefix(binding["responseSchemaHash"].(string), "sha256:") {
		t.Fatalf("binding: %s", b)
	}
}

// history is the conversation a paused run leaves for its resume.
func pausedHistory(calls ...[3]string) []agui.ModelMessage {
	msg := agui.ModelMessage{Role: agui.RoleAssistant, ID: "a1"}
	for _, c := range calls {
		msg.ToolCalls = append(msg.ToolCalls, agui.ToolCall{ID: c[0], Type: "function", Function: agui.FunctionCall{Name: c[1], Arguments: c[2]}})
	}
	return append(chattest.User("deploy please"), msg)
}

func resumeRun(t *testing.T, hist []agui.ModelMessage, parent string, items []chat.ResumeItem, tools ...*chat.Tool) ([]agui.Event, *chattest.Adapter, error) {
	t.Helper()
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m2", "done", "stop")}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: hist, RunID: "run-2", ParentRunID: parent, Resume: items, Tools: tools})
	return evs, a, err
}

func TestCheck17ApproveRunsToolThenModel(t *testing.T) {
	var deploys int
	evs, a, err := resumeRun(t, pausedHistory([3]string{"c1", "deploy", `{"env":"prod"}`}), "run-1",
		[]chat.ResumeItem{{InterruptID: "approval_c1", Status: "resolved", Payload: json.RawMessage("true")}}, approvalTool(&deploys))
	if err != nil {
		t.Fatal(err)
	}
	if deploys != 1 || len(a.Requests()) != 1 || !strings.HasPrefix(chattest.Types(evs), "TOOL_CALL_RESULT RUN_STARTED") {
		t.Fatalf("deploys %d calls %d stream %s", deploys, len(a.Requests()), chattest.Types(evs))
	}
}

func TestCheck18DenyAndCancelNeverRun(t *testing.T) {
	for _, tc := range []struct {
		item chat.ResumeItem
		want string
	}{
		{chat.ResumeItem{InterruptID: "approval_c1", Status: "resolved", Payload: json.RawMessage("false")}, `{"error":"User declined tool execution"}`},
		{chat.ResumeItem{InterruptID: "approval_c1", Status: "cancelled"}, `{"error":"Tool execution cancelled"}`},
	} {
		var deploys int
		evs, _, err := resumeRun(t, pausedHistory([3]string{"c1", "deploy", `{"env":"prod"}`}), "run-1", []chat.ResumeItem{tc.item}, approvalTool(&deploys))
		if err != nil {
			t.Fatal(err)
		}
		if deploys != 0 || evs[0].Type != agui.ToolCallResult || evs[0].Content != tc.want {
			t.Fatalf("%s: deploys %d first %s %q", tc.item.Status, deploys, evs[0].Type, evs[0].Content)
		}
	}
}

func TestCheck19EditedArgs(t *testing.T) {
	var got []string
	tool := chat.NewTool("deploy", "deploy", func(ctx context.Context, in struct {
		Env string `json:"env"`
	}) (string, error) {
		got = append(got, in.Env)
		return "ok", nil
	})
	tool.NeedsApproval = true
	payload := json.RawMessage(`{"approved":true,"editedArgs":{"env":"staging"}}`)
	if _, _, err := resumeRun(t, pausedHistory([3]string{"c1", "deploy", `{"env":"prod"}`}), "run-1",
		[]chat.ResumeItem{{InterruptID: "approval_c1", Status: "resolved", Payload: payload}}, tool); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "staging" {
		t.Fatalf("executed with %v", got)
	}
	// No input schema: invalid-edited-args, nothing runs.
	bare := &chat.Tool{Name: "deploy", NeedsApproval: true, Execute: func(context.Context, json.RawMessage) (any, error) {
		t.Fatal("ran")
		return nil, nil
	}}
	evs, _, err := resumeRun(t, pausedHistory([3]string{"c1", "deploy", `{}`}), "run-1",
		[]chat.ResumeItem{{InterruptID: "approval_c1", Status: "resolved", Payload: payload}}, bare)
	if err != nil || len(evs) != 1 || evs[0].Type != agui.RunError || !strings.Contains(string(agui.AppendWire(nil, &evs[0])), "invalid-edited-args") {
		t.Fatalf("err %v stream %s", err, chattest.Types(evs))
	}
}

func TestCheck20And21StaleAndIncompleteBatches(t *testing.T) {
	var deploys int
	item := chat.ResumeItem{InterruptID: "approval_c1", Status: "resolved", Payload: json.RawMessage("true")}
	evs, a, err := resumeRun(t, pausedHistory([3]string{"c1", "deploy", `{}`}), "", []chat.ResumeItem{item}, approvalTool(&deploys))
	if err != nil || len(evs) != 1 || evs[0].Code != "stale" || len(a.Requests()) != 0 {
		t.Fatalf("missing parentRunId: err %v stream %s code %q calls %d", err, chattest.Types(evs), evs[0].Code, len(a.Requests()))
	}
	if _, ok := evs[0].TanstackMeta()["interruptErrors"]; !ok {
		t.Fatal("no interruptErrors")
	}
	evs, a, err = resumeRun(t, pausedHistory([3]string{"c1", "deploy", `{}`}, [3]string{"c2", "deploy", `{}`}), "run-1", []chat.ResumeItem{item}, approvalTool(&deploys))
	wire := string(agui.AppendWire(nil, &evs[0]))
	if err != nil || len(evs) != 1 || !strings.Contains(wire, "incomplete-batch") || deploys != 0 || len(a.Requests()) != 0 {
		t.Fatalf("incomplete batch: %v %s deploys %d", err, wire, deploys)
	}
}

func TestCheck22And23ClientResultsAndPlaceholders(t *testing.T) {
	hist := pausedHistory([3]string{"c1", "pick", `{"q":"x"}`})
	evs, a, err := resumeRun(t, hist, "run-1", []chat.ResumeItem{{InterruptID: "client_tool_c1", Status: "resolved", Payload: json.RawMessage(`{"picked":"red"}`)}}, clientTool("pick"))
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Type != agui.ToolCallResult || evs[0].Content != `{"picked":"red"}` {
		t.Fatalf("client result: %s", chattest.Types(evs))
	}
	if m := a.Requests()[0].Messages[2]; m.Role != "tool" || m.Content.String() != `{"picked":"red"}` {
		t.Fatalf("history: %+v", a.Requests()[0].Messages)
	}
	// An answered call is not re-run; a pendingExecution placeholder is, in place.
	var adds []addIn
	answered := append(pausedHistory([3]string{"c1", "add", `{"a":1,"b":1}`}), agui.ModelMessage{Role: "tool", ToolCallID: "c1", Content: agui.Text(`{"sum":2}`)})
	if _, _, err := resumeRun(t, answered, "", nil, addTool(&adds)); err != nil || len(adds) != 0 {
		t.Fatalf("answered call re-ran: %v %d", err, len(adds))
	}
	placeholder := append(pausedHistory([3]string{"c1", "add", `{"a":1,"b":1}`}), agui.ModelMessage{Role: "tool", ToolCallID: "c1", Content: agui.Text(`{"approved":true,"pendingExecution":true}`)})
	_, a, err = resumeRun(t, placeholder, "", nil, addTool(&adds))
	if err != nil || len(adds) != 1 || len(a.Requests()[0].Messages) != 3 || a.Requests()[0].Messages[2].Content.String() != `{"sum":2}` {
		t.Fatalf("placeholder: %v adds %d history %+v", err, len(adds), a.Requests()[0].Messages)
	}
}

func TestCheck46SignedThinkingCarriedBack(t *testing.T) {
	turn := []agui.Event{
		{Type: agui.RunStarted},
		{Type: agui.ReasoningStart, MessageID: "r"},
		{Type: agui.ReasoningMessageStart, MessageID: "r", Role: "reasoning"},
		{Type: agui.ReasoningMessageContent, MessageID: "r", Delta: "let me think"},
		{Type: agui.ReasoningMessageEnd, MessageID: "r"},
		{Type: agui.ReasoningEncryptedValue, Subtype: "message", EntityID: "r", EncryptedValue: "sig"},
		{Type: agui.ReasoningEnd, MessageID: "r"},
	}
	turn = append(turn, chattest.ToolTurn("c1", "add", `{"a":1,"b":1}`)[1:]...)
	a := &chattest.Adapter{Turns: [][]agui.Event{turn, chattest.TextTurn("m", "x", "stop")}}
	if _, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil)}}); err != nil {
		t.Fatal(err)
	}
	th := a.Requests()[1].Messages[1].Thinking
	if len(th) != 1 || th[0].Content != "let me think" || th[0].Signature != "sig" {
		t.Fatalf("thinking carried back: %+v", th)
	}
}

type answer struct {
	Answer     string   `json:"answer"`
	Confidence *float64 `json:"confidence,omitempty"`
}

// structuredAdapter adds a one-shot structured-output call to a scripted adapter.
type structuredAdapter struct {
	*chattest.Adapter
	raw    string
	schema json.RawMessage
	calls  int
}

func (s *structuredAdapter) StructuredOutput(ctx context.Context, req *chat.Request, schema json.RawMessage) (*chat.StructuredResult, error) {
	s.calls++
	s.schema = schema
	var v any
	if err := json.Unmarshal([]byte(s.raw), &v); err != nil {
		return nil, err
	}
	return &chat.StructuredResult{Data: v, RawText: s.raw, Usage: &agui.TokenUsage{TotalTokens: 7}}, nil
}

func TestCheck48And51StructuredWithoutToolsAndNullWidening(t *testing.T) {
	var phases []chat.Phase
	var usage []int64
	var finish *chat.FinishInfo
	mw := &chat.Middleware{Name: "m",
		OnStructuredOutputConfig: func(c *chat.Context, cfg *chat.StructuredOutputConfig) error {
			phases = append(phases, c.Phase)
			return nil
		},
		OnIteration: func(*chat.Context, chat.IterationInfo) error {
			t.Error("onIteration fired for finalization")
			return nil
		},
		OnUsage:  func(_ *chat.Context, u agui.TokenUsage) error { usage = append(usage, u.TotalTokens); return nil },
		OnFinish: func(_ *chat.Context, i chat.FinishInfo) error { finish = &i; return nil },
	}
	a := &structuredAdapter{Adapter: &chattest.Adapter{}, raw: `{"answer":"4","confidence":null}`}
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"},"confidence":{"type":"number"}},"required":["answer"]}`)
	got, err := chat.Structured[answer](context.Background(), chat.Options{Adapter: a, Messages: chattest.User("2+2?"), Middleware: []*chat.Middleware{mw}, OutputSchema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if got.Answer != "4" || got.Confidence != nil || len(a.Requests()) != 0 || a.calls != 1 {
		t.Fatalf("got %+v, chatStream calls %d, structured calls %d", got, len(a.Requests()), a.calls)
	}
	if len(phases) != 1 || phases[0] != chat.PhaseStructuredOutput || len(usage) != 1 || usage[0] != 7 {
		t.Fatalf("phases %v usage %v", phases, usage)
	}
	if finish == nil || finish.FinishReason != "" || finish.Usage != nil {
		t.Fatalf("terminal info must reflect the (empty) loop: %+v", finish)
	}
	var sent map[string]any
	_ = json.Unmarshal(a.schema, &sent)
	props := sent["properties"].(map[string]any)
	if sent["additionalProperties"] != false || len(sent["required"].([]any)) != 2 {
		t.Fatalf("schema not strict: %s", a.schema)
	}
	if ty, _ := json.Marshal(props["confidence"].(map[string]any)["type"]); string(ty) != `["number","null"]` {
		t.Fatalf("optional not widened: %s", ty)
	}
}

func TestCheck49StructuredStreamShape(t *testing.T) {
	a := &structuredAdapter{Adapter: &chattest.Adapter{}, raw: `{"answer":"4"}`}
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), OutputSchema: schema})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range evs {
		n := string(e.Type)
		if e.Type == agui.Custom {
			n = e.Name
		}
		names = append(names, n)
	}
	want := "RUN_STARTED structured-output.start TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END structured-output.complete RUN_FINISHED"
	if strings.Join(names, " ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(names, " "), want)
	}
}

// combinedAdapter supports tools and schema in one call (text source).
type combinedAdapter struct{ *chattest.Adapter }

func (combinedAdapter) SupportsCombinedToolsAndSchema(map[string]any) bool   { return true }
func (combinedAdapter) CombinedStructuredOutputSource(map[string]any) string { return "text" }

func TestCheck50NativeCombined(t *testing.T) {
	var soConfig bool
	mw := &chat.Middleware{Name: "m", OnStructuredOutputConfig: func(*chat.Context, *chat.StructuredOutputConfig) error { soConfig = true; return nil }}
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)
	a := combinedAdapter{&chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", `{"answer":"4"}`, "stop")}}}
	got, err := chat.Structured[answer](context.Background(), chat.Options{Adapter: a, Messages: chattest.User("x"), OutputSchema: schema, Middleware: []*chat.Middleware{mw}})
	if err != nil || got.Answer != "4" || soConfig || len(a.Requests()) != 1 || a.Requests()[0].OutputSchema == nil {
		t.Fatalf("got %+v err %v soConfig %v", got, err, soConfig)
	}
	b := combinedAdapter{&chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", `{"answer":`, "stop")}}}
	_, err = chat.Structured[answer](context.Background(), chat.Options{Adapter: b, Messages: chattest.User("x"), OutputSchema: schema})
	var re *chat.RunError
	if !asRunError(err, &re) || re.Code != chat.CodeStructuredParse || !strings.HasPrefix(re.Message, "Failed to parse structured output as JSON. Content: {\"answer\":") {
		t.Fatalf("bad JSON: %v", err)
	}
}

func asRunError(err error, re **chat.RunError) bool {
	if err == nil {
		return false
	}
	r, ok := err.(*chat.RunError)
	*re = r
	return ok
}

func TestCheck47LazyToolsHiddenUntilDiscovered(t *testing.T) {
	var calls []addIn
	lazyAdd := addTool(&calls)
	lazyAdd.Lazy = true
	lazyAdd.Description = "Add two numbers. Exactly."
	a := &chattest.Adapter{Turns: [][]agui.Event{
		chattest.ToolTurn("c1", "add", `{"a":1,"b":2}`), // too early
		chattest.ToolTurn("c2", chat.DiscoveryToolName, `{"toolNames":["add","nope"]}`),
		chattest.ToolTurn("c3", "add", `{"a":1,"b":2}`),
		chattest.TextTurn("m", "3", "stop"),
	}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{lazyAdd}, LazyTools: chat.LazyTools{IncludeDescription: "first-sentence"}})
	if err != nil {
		t.Fatal(err)
	}
	names := func(i int) []string {
		var n []string
		for _, s := range a.Requests()[i].Tools {
			n = append(n, s.Name)
		}
		return n
	}
	if got := names(0); len(got) != 1 || got[0] != chat.DiscoveryToolName {
		t.Fatalf("first call advertised %v", got)
	}
	if d := a.Requests()[0].Tools[0].Description; !strings.Contains(d, "Available tools: [add — Add two numbers.]") {
		t.Fatalf("discovery description: %s", d)
	}
	if got := names(2); len(got) != 1 || got[0] != "add" {
		t.Fatalf("after discovery advertised %v", got)
	}
	results := map[string]string{}
	for _, e := range evs {
		if e.Type == agui.ToolCallResult {
			results[e.ToolCallID] = e.Content
		}
	}
	if !strings.Contains(results["c1"], "must be discovered first") || !strings.Contains(results["c2"], `"errors":["Unknown tool: 'nope'`) || results["c3"] != `{"sum":3}` {
		t.Fatalf("results %v", results)
	}
	if len(calls) != 1 {
		t.Fatalf("executions %d", len(calls))
	}
}

// A middleware raises a generic interrupt at a boundary; the resume answers
// it (with the continuation metadata the client echoes), the answer is
// checked against the definition, and OnInterruptResolution decides.
func TestGenericInterruptRoundTrip(t *testing.T) {
	defs := []chat.InterruptDefinition{{ID: "confirm", ResponseSchema: json.RawMessage(`{"type":"boolean"}`)}}
	var gotRes []chat.InterruptResolution
	gate := &chat.Middleware{Name: "gate",
		OnInterruptBoundary: func(c *chat.Context) ([]chat.InterruptRequest, error) {
			if c.Phase == chat.PhaseBeforeModel && c.ParentRunID == "" {
				return []chat.InterruptRequest{{Definition: "confirm", Key: "deploy", Reason: "confirm", Message: "Proceed?"}}, nil
			}
			return nil, nil
		},
		OnInterruptResolution: func(_ *chat.Context, res []chat.InterruptResolution) (chat.ToolResume, error) {
			gotRes = res
			if string(res[0].Payload) == "false" {
				return "stop", nil
			}
			return "continue", nil
		},
	}
	run := func(a *chattest.Adapter, runID, parent string, resume []chat.ResumeItem) ([]agui.Event, error) {
		return chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), RunID: runID, ParentRunID: parent, Resume: resume,
			Interrupts: defs, Middleware: []*chat.Middleware{gate}})
	}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "never", "stop")}}
	evs, err := run(a, "run-1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	fin := evs[len(evs)-1]
	if fin.Outcome == nil || fin.Outcome.Type != "interrupt" || len(a.Requests()) != 0 {
		t.Fatalf("no generic interrupt: %s", chattest.Types(evs))
	}
	it := fin.Outcome.Interrupts[0]
	if !strings.HasPrefix(it.ID, "interrupt-") || it.Reason != "confirm" || string(it.ResponseSchema) != `{"type":"boolean"}` {
		t.Fatalf("interrupt %+v", it)
	}
	answer := func(payload string) []chat.ResumeItem {
		return []chat.ResumeItem{{InterruptID: it.ID, Status: "resolved", Payload: json.RawMessage(payload), Metadata: chat.Continuation(it)}}
	}
	// "false": the policy stops the run without a model call.
	b := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "never", "stop")}}
	evs, err = run(b, "run-2", "run-1", answer("false"))
	if err != nil || len(b.Requests()) != 0 || len(gotRes) != 1 || gotRes[0].Definition != "confirm" || gotRes[0].Key != "deploy" || evs[len(evs)-1].Type != agui.RunFinished {
		t.Fatalf("stop policy: err %v calls %d res %+v stream %s", err, len(b.Requests()), gotRes, chattest.Types(evs))
	}
	// "true": the run continues to the model.
	c := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "go", "stop")}}
	if _, err := run(c, "run-3", "run-1", answer("true")); err != nil || len(c.Requests()) != 1 {
		t.Fatalf("continue policy: %v calls %d", err, len(c.Requests()))
	}
	// An answer that fails the definition's schema: invalid-payload, nothing runs.
	d := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "never", "stop")}}
	evs, _ = run(d, "run-4", "run-1", answer(`"yes"`))
	if len(evs) != 1 || !strings.Contains(string(agui.AppendWire(nil, &evs[0])), "invalid-payload") || len(d.Requests()) != 0 {
		t.Fatalf("bad payload: %s", chattest.Types(evs))
	}
	// An id that was never issued (no continuation): unknown-interrupt.
	e := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "never", "stop")}}
	evs, _ = run(e, "run-5", "run-1", []chat.ResumeItem{{InterruptID: "interrupt-123-forged", Status: "resolved", Payload: json.RawMessage("true")}})
	if len(evs) != 1 || evs[0].Code != "unknown-interrupt" || len(e.Requests()) != 0 {
		t.Fatalf("forged id: %s %q", chattest.Types(evs), evs[0].Code)
	}
	// A continuation for a definition this server lacks: stale.
	f := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "never", "stop")}}
	evs, _ = chattest.Collect(t, chat.Options{Adapter: f, Messages: chattest.User("x"), RunID: "run-6", ParentRunID: "run-1", Resume: answer("true")})
	if len(evs) != 1 || evs[0].Code != "stale" {
		t.Fatalf("unknown definition: %s %q", chattest.Types(evs), evs[0].Code)
	}
}

func TestResumeClientOutputCheckedAgainstOutputSchema(t *testing.T) {
	pick := clientTool("pick")
	pick.OutputSchema = json.RawMessage(`{"type":"object","properties":{"picked":{"type":"string"}},"required":["picked"]}`)
	evs, a, err := resumeRun(t, pausedHistory([3]string{"c1", "pick", `{}`}), "run-1",
		[]chat.ResumeItem{{InterruptID: "client_tool_c1", Status: "resolved", Payload: json.RawMessage(`{"colour":1}`)}}, pick)
	if err != nil || len(evs) != 1 || evs[0].Code != "invalid-tool-output" || len(a.Requests()) != 0 {
		t.Fatalf("err %v stream %s code %q", err, chattest.Types(evs), evs[0].Code)
	}
}

func TestCheck07ExactlyOneToolCallEndPerCall(t *testing.T) {
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.ToolTurn("c1", "add", `{"a":1,"b":2}`), chattest.TextTurn("m", "x", "stop")}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(chattest.Types(evs), "TOOL_CALL_END"); n != 1 {
		t.Fatalf("%d TOOL_CALL_END events for one call: %s", n, chattest.Types(evs))
	}
}

// The seed's structured-output lifecycle rules, in hook order:
// onStructuredOutputConfig before onConfig at the boundary (phase
// structuredOutput, outputSchema not in the onConfig view), onChunk and
// onUsage for finalization chunks, no onIteration for finalization, and
// onFinish once, after finalization, with the loop's terminal info.
func TestSeedStructuredOutputLifecycle(t *testing.T) {
	var log []string
	mw := &chat.Middleware{Name: "trace",
		OnStructuredOutputConfig: func(c *chat.Context, cfg *chat.StructuredOutputConfig) error {
			log = append(log, "soConfig:"+string(c.Phase))
			cfg.OutputSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"$defs":{"x":{}}}`)
			return nil
		},
		OnConfig:    func(c *chat.Context, _ *chat.Config) error { log = append(log, "config:"+string(c.Phase)); return nil },
		OnIteration: func(c *chat.Context, _ chat.IterationInfo) error { log = append(log, "iteration"); return nil },
		OnChunk: func(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
			if c.Phase == chat.PhaseStructuredOutput {
				log = append(log, "chunk:"+string(ev.Type))
			}
			return chat.Pass, nil
		},
		OnUsage: func(c *chat.Context, _ agui.TokenUsage) error {
			log = append(log, "usage:"+string(c.Phase))
			return nil
		},
		OnFinish: func(_ *chat.Context, i chat.FinishInfo) error {
			log = append(log, "finish:"+i.FinishReason)
			return nil
		},
	}
	a := &structuredAdapter{Adapter: &chattest.Adapter{Turns: [][]agui.Event{chattest.ToolTurn("c1", "add", `{"a":1,"b":2}`), chattest.TextTurn("m", "done", "stop")}}, raw: `{"answer":"3"}`}
	if _, err := chat.Structured[answer](context.Background(), chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil)}, Middleware: []*chat.Middleware{mw}}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(log, " ")
	want := "config:init iteration config:beforeModel iteration config:beforeModel usage:modelStream " +
		"soConfig:structuredOutput config:structuredOutput chunk:RUN_STARTED chunk:CUSTOM chunk:TEXT_MESSAGE_START chunk:TEXT_MESSAGE_CONTENT " +
		"chunk:TEXT_MESSAGE_END chunk:CUSTOM usage:structuredOutput chunk:RUN_FINISHED finish:stop"
	if got != want {
		t.Fatalf("hook order\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(string(a.schema), `"$defs"`) {
		t.Fatalf("onStructuredOutputConfig's schema was not the one sent: %s", a.schema)
	}
}
