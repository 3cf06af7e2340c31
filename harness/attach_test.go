package harness_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/harness"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
	"github.com/goai-sdk/goai/workspace"
)

// attach runs the adapter in attach mode (a takeover) on a local sandbox.
func attach(t *testing.T, dir string, adapter chat.Adapter) ([]agui.Event, error) {
	t.Helper()
	keep := false
	sb, err := sandbox.Define(sandbox.Definition{ID: "agent", Provider: local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep})})
	if err != nil {
		t.Fatal(err)
	}
	var evs []agui.Event
	for ev, err := range chat.Stream(context.Background(), chat.Options{
		Adapter: adapter, ThreadID: "thread-1", RunID: "run-attach", Attach: true,
		Messages:   []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("go")}},
		Middleware: []*chat.Middleware{sandbox.WithSandbox(sb, sandbox.Options{})},
	}) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// A takeover of a run whose agent never started finds no journal: it
// fails with ErrNoJournal and launches nothing.
func TestAttachWithoutJournal(t *testing.T) {
	dir := gitRepo(t)
	marker := filepath.Join(t.TempDir(), "launched")
	adapter := harness.New(harness.ClaudeCode{Binary: "touch " + marker + "; true"}, "m", harness.Options{Journal: true, JournalDir: ".git/goai-runs"})
	_, err := attach(t, dir, adapter)
	if !errors.Is(err, harness.ErrNoJournal) {
		t.Fatalf("attach without a journal: %v, want ErrNoJournal", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("attach launched the agent")
	}
}

// An agent that died without its exit sentinel (its sandbox ended with
// its host) is noticed: the journal is replayed, then the run fails with
// ErrAgentLost instead of waiting forever.
func TestAttachToDeadAgent(t *testing.T) {
	dir := gitRepo(t)
	j := harness.Journal{Dir: filepath.Join(dir, ".git", "goai-runs"), RunID: "run-attach"}
	if err := os.MkdirAll(j.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	line := `{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"half done"}]},"session_id":"s1"}` + "\n"
	base := strings.TrimSuffix(j.Path(), ".ndjson")
	for name, content := range map[string]string{".ndjson": line, ".pid": "999999\n", ".lock": ""} {
		if err := os.WriteFile(base+name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	adapter := harness.New(harness.ClaudeCode{}, "m", harness.Options{Journal: true, JournalDir: ".git/goai-runs"})
	evs, err := attach(t, dir, adapter)
	if !errors.Is(err, harness.ErrAgentLost) {
		t.Fatalf("attach to a dead agent: %v, want ErrAgentLost (events %s)", err, eventTypes(evs))
	}
	var text strings.Builder
	for _, ev := range evs {
		if ev.Type == agui.TextMessageContent {
			text.WriteString(ev.Delta)
		}
	}
	if text.String() != "half done" {
		t.Errorf("replayed text %q, want what the journal holds", text.String())
	}
	if _, err := os.Stat(j.Path()); err != nil {
		t.Errorf("the journal of a run that did not end was removed: %v", err)
	}
}

// An ACP agent's permission request for a command the policy asks about is
// refused, and the turn ends with an approve_command call: the run pauses
// with an approval interrupt for it.
func TestACPAskBecomesApprovalInterrupt(t *testing.T) {
	bin := agentBinary(t, "claude-code-acp")
	dir := gitRepo(t)
	bash := toolCall("toolu_b", "Bash", 0, map[string]any{"command": "touch approved.txt", "description": "create a file"})
	turns := `[
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + bash + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"I need your approval."},{"type":"TEXT_MESSAGE_END","messageId":"m2"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"stop"}]
]`
	base := mockModelWithHelper(t, turns)
	policy, err := workspace.ParsePolicy([]byte(`{"commands":{"deny":["rm *"]},"default":"ask"}`))
	if err != nil {
		t.Fatal(err)
	}
	adapter := harness.New(harness.ACP{Command: shellQuote(bin), Policy: policy}, "claude-sonnet-4-5", harness.Options{Env: map[string]string{
		"ANTHROPIC_BASE_URL": strings.TrimSuffix(base, "/v1"),
		"ANTHROPIC_API_KEY":  "dummy-key",
		"HOME":               t.TempDir(),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"IS_SANDBOX": "1",
	}})
	evs, err := runAgent(t, adapter, dir, harness.ApprovalTool())
	if err != nil {
		t.Fatalf("run failed: %v\n%s", err, eventTypes(evs))
	}
	var asked string
	var outcome *agui.Outcome
	for _, ev := range evs {
		if ev.Type == agui.ToolCallStart && ev.ToolCallName == harness.ApproveCommandTool {
			asked = ev.ToolCallID
		}
		if ev.Type == agui.RunFinished {
			outcome = ev.Outcome
		}
	}
	if asked == "" || outcome == nil || outcome.Type != "interrupt" {
		t.Fatalf("no approval interrupt for the asked command (outcome %+v): %s", outcome, eventTypes(evs))
	}
	if _, err := os.Stat(filepath.Join(dir, "approved.txt")); err == nil {
		t.Error("the command ran without approval")
	}
}
