package scripted_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
	"github.com/goai-sdk/goai/workspace"
)

// TestDemoEmptyConversation: no messages at all is a greeting, with or
// without the workspace tools, never a panic.
func TestDemoEmptyConversation(t *testing.T) {
	for _, tools := range [][]*chat.Tool{nil, workspace.RunTools(workspace.Options{})} {
		var text string
		for ev, err := range chat.Stream(context.Background(), chat.Options{Adapter: scripted.Demo{WordDelay: time.Microsecond}, Tools: tools, Debug: chat.DebugNone()}) {
			if err != nil {
				t.Fatal(err)
			}
			text += ev.Delta
		}
		if !strings.Contains(text, "Hello from the goai demo model") {
			t.Errorf("reply to an empty conversation: %q", text)
		}
	}
}

// TestDemoCodingTask runs the demo's task in a real local sandbox: list,
// write, edit, an approval for the command, the command, the explanation.
func TestDemoCodingTask(t *testing.T) {
	dir := t.TempDir()
	keep := false
	def, err := sandbox.Define(sandbox.Definition{ID: "demo", Provider: local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep}), FileEvents: sandbox.FileEventsWithDiff})
	if err != nil {
		t.Fatal(err)
	}
	var conv []agui.ModelMessage
	keepConv := &chat.Middleware{Name: "conv", OnChunk: func(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		if ev.Type == agui.RunFinished && ev.Outcome != nil {
			conv = c.Conversation()
		}
		return chat.Pass, nil
	}}
	opts := chat.Options{
		ThreadID: "t", RunID: "r1", Adapter: scripted.Demo{WordDelay: time.Microsecond}, Debug: chat.DebugNone(),
		Messages:   []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("anything")}},
		Tools:      workspace.RunTools(workspace.Options{}),
		Middleware: []*chat.Middleware{sandbox.WithSandbox(def, sandbox.Options{}), keepConv},
	}
	seen := map[string]bool{}
	var outcome *agui.Outcome
	for ev, err := range chat.Stream(context.Background(), opts) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Type == agui.ToolCallStart:
			seen[ev.ToolCallName] = true
		case ev.Type == agui.Custom:
			seen[ev.Name] = true
		case ev.Type == agui.RunFinished && ev.Outcome != nil:
			outcome = ev.Outcome
		}
	}
	for _, k := range []string{"list_files", "write_file", "edit_file", "run_command", "sandbox.file", "sandbox.file.diff"} {
		if !seen[k] {
			t.Errorf("first run lacks %s (saw %v)", k, seen)
		}
	}
	if outcome == nil || outcome.Type != "interrupt" || len(outcome.Interrupts) != 1 {
		t.Fatalf("want an approval interrupt, got %+v", outcome)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, scripted.DemoProgramPath)); string(b) != scripted.DemoProgramEdited {
		t.Fatalf("greet.sh: %q", b)
	}
	opts.RunID, opts.ParentRunID, opts.Messages = "r2", "r1", conv
	opts.Resume = []chat.ResumeItem{{InterruptID: outcome.Interrupts[0].ID, Status: agui.ResumeResolved, Payload: json.RawMessage("true")}}
	var text string
	for ev, err := range chat.Stream(context.Background(), opts) {
		if err != nil {
			t.Fatal(err)
		}
		text += ev.Delta
	}
	if !strings.Contains(text, "Hello, goai!") || !strings.Contains(text, "Done.") {
		t.Errorf("explanation: %q", text)
	}
}
