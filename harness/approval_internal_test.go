package harness

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/workspace"
)

func TestContinuationReadsTheAnswers(t *testing.T) {
	args := func(cmd string) string {
		b, _ := json.Marshal(approvalArgs{Command: cmd, SessionID: "sess-1", AgentCallID: "toolu_x"})
		return string(b)
	}
	msgs := []agui.ModelMessage{
		{Role: agui.RoleUser, Content: agui.Text("do it")},
		{Role: agui.RoleAssistant, ToolCalls: []agui.ToolCall{
			{ID: "a1", Type: "function", Function: agui.FunctionCall{Name: ApproveCommandTool, Arguments: args("make build")}},
			{ID: "a2", Type: "function", Function: agui.FunctionCall{Name: ApproveCommandTool, Arguments: args("rm -rf dist")}},
			{ID: "x", Type: "function", Function: agui.FunctionCall{Name: "Bash", Arguments: `{"command":"ls"}`}},
		}},
		{Role: agui.RoleTool, ToolCallID: "a1", Content: agui.Text(`{"approved":true,"command":"make build"}`)},
		{Role: agui.RoleTool, ToolCallID: "a2", Content: agui.Text(`{"error":"User declined tool execution"}`)},
	}
	c := continuation(msgs)
	if c == nil || c.SessionID != "sess-1" || !slices.Equal(c.Approved, []string{"make build"}) || !slices.Equal(c.Declined, []string{"rm -rf dist"}) {
		t.Fatalf("continuation = %+v", c)
	}
	if c := continuation(msgs[:2]); c != nil {
		t.Errorf("a conversation not ending with answers is no continuation: %+v", c)
	}
	if c := continuation(msgs[:1]); c != nil {
		t.Errorf("a user turn is no continuation: %+v", c)
	}
}

func TestPolicyAskerRecordsAsks(t *testing.T) {
	p, err := workspace.ParsePolicy([]byte(`{"commands":{"allow":["ls *"],"deny":["rm *"]},"default":"ask"}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{Invocation: &Invocation{Continue: &Continuation{Approved: []string{"make build"}}}, em: &Emitter{}, changed: make(chan struct{}, 1)}
	permit := policyAsker(p, s)
	cmd := func(c string) any { return map[string]any{"command": c} }
	for _, tc := range []struct {
		input any
		want  bool
	}{
		{cmd("ls -la"), true},               // allowed
		{cmd("rm -rf /"), false},            // denied
		{cmd("make build"), true},           // asked before, approved by the user
		{cmd("curl example.com"), false},    // asked: refused for now
		{map[string]any{"path": "a"}, true}, // no command: a file edit
	} {
		if got := permit(context.Background(), "t", tc.input); got != tc.want {
			t.Errorf("permit(%v) = %v, want %v", tc.input, got, tc.want)
		}
	}
	if len(s.em.asks) != 1 || s.em.asks[0].command != "curl example.com" {
		t.Errorf("asks %+v, want the one command the policy leaves to the user", s.em.asks)
	}
}
