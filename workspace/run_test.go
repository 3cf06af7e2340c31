package workspace_test

import (
	"context"
	"encoding/json"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
	"github.com/goai-sdk/goai/workspace"
)

// callingModel answers each model call with the next turn's tool calls, or
// text when the turns are used up.
type callingModel struct {
	mu    sync.Mutex
	turns [][][2]string // per turn: tool name, JSON arguments
	reqs  []*chat.Request
}

func (m *callingModel) Name() string  { return "test" }
func (m *callingModel) Model() string { return "test-1" }

func (m *callingModel) ChatStream(_ context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	m.mu.Lock()
	n := len(m.reqs)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return func(yield func(agui.Event, error) bool) {
		if n >= len(m.turns) {
			for _, ev := range []agui.Event{
				{Type: agui.TextMessageStart, MessageID: "m-end", Role: "assistant"},
				{Type: agui.TextMessageContent, MessageID: "m-end", Delta: "done"},
				{Type: agui.TextMessageEnd, MessageID: "m-end"},
				{Type: agui.RunFinished, FinishReason: agui.FinishStop},
			} {
				if !yield(ev, nil) {
					return
				}
			}
			return
		}
		for i, c := range m.turns[n] {
			id := "call_" + string(rune('a'+n)) + string(rune('0'+i))
			for _, ev := range []agui.Event{
				{Type: agui.ToolCallStart, ToolCallID: id, ToolCallName: c[0], Index: agui.Int(i)},
				{Type: agui.ToolCallArgs, ToolCallID: id, Delta: c[1]},
				{Type: agui.ToolCallEnd, ToolCallID: id, Input: json.RawMessage(c[1])},
			} {
				if !yield(ev, nil) {
					return
				}
			}
		}
		yield(agui.Event{Type: agui.RunFinished, FinishReason: agui.FinishToolCalls}, nil)
	}
}

// TestRunToolsInASandboxedRun drives a run with WithSandbox: the model
// writes a file (a sandbox.file event and its diff stream), asks to run a
// command the policy asks about (the run pauses on an approval), and the
// resumed, approved run executes it in the same workspace.
func TestRunToolsInASandboxedRun(t *testing.T) {
	dir := t.TempDir()
	keep := false
	def, err := sandbox.Define(sandbox.Definition{ID: "ws", Provider: local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep}), FileEvents: sandbox.FileEventsWithDiff})
	if err != nil {
		t.Fatal(err)
	}
	policy := &workspace.Policy{Allow: []string{"cat *"}}
	model := &callingModel{turns: [][][2]string{
		{{"write_file", `{"path":"hello.sh","content":"echo hello from the workspace\n"}`}},
		{{"run_command", `{"command":"cat hello.sh"}`}, {"run_command", `{"command":"sh hello.sh"}`}},
	}}
	opts := chat.Options{
		ThreadID: "t1", RunID: "run-1", Adapter: model,
		Messages:   []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("go")}},
		Tools:      workspace.RunTools(workspace.Options{Policy: policy}),
		Middleware: []*chat.Middleware{sandbox.WithSandbox(def, sandbox.Options{})},
		Debug:      chat.DebugNone(),
	}
	var evs []agui.Event
	var conv []agui.ModelMessage
	capture := &chat.Middleware{Name: "capture", OnChunk: func(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		if ev.Type == agui.RunFinished && ev.Outcome != nil {
			conv = c.Conversation()
		}
		return chat.Pass, nil
	}}
	opts.Middleware = append(opts.Middleware, capture)
	for ev, err := range chat.Stream(context.Background(), opts) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	var file, diff bool
	var outcome *agui.Outcome
	for _, ev := range evs {
		if ev.Type == agui.Custom && ev.Name == "sandbox.file" && strings.Contains(string(mustJSON(ev.Value)), "hello.sh") {
			file = true
		}
		if ev.Type == agui.Custom && ev.Name == "sandbox.file.diff" && strings.Contains(string(mustJSON(ev.Value)), "+echo hello from the workspace") {
			diff = true
		}
		if ev.Type == agui.RunFinished && ev.Outcome != nil {
			outcome = ev.Outcome
		}
	}
	if !file || !diff {
		t.Errorf("sandbox.file %v, sandbox.file.diff %v in %s", file, diff, kinds(evs))
	}
	if outcome == nil || outcome.Type != "interrupt" || len(outcome.Interrupts) != 1 || !strings.Contains(string(mustJSON(outcome.Interrupts[0])), "sh hello.sh") {
		t.Fatalf("want one approval interrupt for `sh hello.sh`, got %s", mustJSON(outcome))
	}
	// Nothing of the batch runs before the approval (the engine holds the
	// whole batch).
	for _, ev := range evs {
		if ev.Type == agui.ToolCallResult && strings.Contains(ev.Content, `"stdout"`) {
			t.Fatalf("a command ran before the approval: %s", ev.Content)
		}
	}

	id := outcome.Interrupts[0].ID
	opts.RunID, opts.ParentRunID, opts.Messages = "run-2", "run-1", conv
	opts.Resume = []chat.ResumeItem{{InterruptID: id, Status: agui.ResumeResolved, Payload: json.RawMessage("true")}}
	var ran, catRan bool
	for ev, err := range chat.Stream(context.Background(), opts) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agui.ToolCallResult && strings.Contains(ev.Content, `"stdout":"hello from the workspace\n"`) {
			ran = true
		}
		if ev.Type == agui.ToolCallResult && strings.Contains(ev.Content, `"stdout":"echo hello from the workspace\n"`) {
			catRan = true
		}
	}
	if !ran || !catRan {
		t.Errorf("after the approval: approved command ran %v, allowed command ran %v", ran, catRan)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "hello.sh")); err != nil || string(b) != "echo hello from the workspace\n" {
		t.Errorf("hello.sh in the workspace: %q %v", b, err)
	}
}

// TestRunToolsWithoutSandbox: a run without WithSandbox gets a tool error,
// not a crash.
func TestRunToolsWithoutSandbox(t *testing.T) {
	model := &callingModel{turns: [][][2]string{{{"list_files", `{}`}}}}
	var sawErr bool
	for ev, err := range chat.Stream(context.Background(), chat.Options{Adapter: model, Debug: chat.DebugNone(),
		Messages: []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("go")}}, Tools: workspace.RunTools(workspace.Options{})}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agui.ToolCallResult && strings.Contains(ev.Content, "has no sandbox") {
			sawErr = true
		}
	}
	if !sawErr {
		t.Error("no tool error for a run without a sandbox")
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func kinds(evs []agui.Event) string {
	var s []string
	for _, e := range evs {
		k := string(e.Type)
		if e.Name != "" {
			k += ":" + e.Name
		}
		s = append(s, k)
	}
	return strings.Join(s, " ")
}
