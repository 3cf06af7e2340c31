package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// ApproveCommandTool is the name of the tool through which a coding agent's
// command that the policy leaves to the user ("ask") becomes an approval
// interrupt of the run.
const ApproveCommandTool = "approve_command"

// ApprovalTool returns the approve_command tool. Offer it with a harness
// whose agent follows a command policy (Options.Tools of the run): when the
// agent was refused a command the policy says to ask about, the adapter
// ends its turn with a call to this tool for each such command, which needs
// approval, so the run pauses with an approval interrupt. Once the user
// answers, the engine calls the adapter again and the agent goes on: its
// session resumed where the agent supports it (Claude Code), told which
// commands were approved (now allowed) and which declined. The tool is
// never offered to the agent itself through the tool bridge.
func ApprovalTool() *chat.Tool {
	return &chat.Tool{
		Name:          ApproveCommandTool,
		Description:   "Asks the user to approve a shell command the coding agent wants to run.",
		InputSchema:   json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"sessionId":{"type":"string"},"agentCallId":{"type":"string"}},"required":["command"]}`),
		NeedsApproval: true,
		Execute: func(_ context.Context, args json.RawMessage) (any, error) {
			var a approvalArgs
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, fmt.Errorf("approve_command: %w", err)
			}
			return map[string]any{"approved": true, "command": a.Command}, nil
		},
	}
}

type approvalArgs struct {
	Command     string `json:"command"`
	SessionID   string `json:"sessionId"`
	AgentCallID string `json:"agentCallId"`
}

// askedCommand is a command the agent was refused because the policy asks.
type askedCommand struct {
	command   string
	agentCall string
}

// AskApproval records that the agent was refused command (in its call
// agentCallID) because the policy leaves it to the user. At the end of the
// turn the adapter turns it into an approve_command call when the run
// offers that tool.
func (e *Emitter) AskApproval(command, agentCallID string) {
	for _, a := range e.asks {
		if a.command == command {
			return
		}
	}
	e.asks = append(e.asks, askedCommand{command: command, agentCall: agentCallID})
}

// requestApprovals emits an approve_command call per command the agent was
// refused pending approval; false when there is none or the run does not
// offer the tool (the refusal then stands).
func (r *invocationRun) requestApprovals() bool {
	if len(r.em.asks) == 0 || !offers(r.req.Tools, ApproveCommandTool) {
		return false
	}
	for i, a := range r.em.asks {
		id := "approve-" + a.agentCall
		if a.agentCall == "" {
			id = fmt.Sprintf("approve-%d", i+1)
		}
		args, _ := json.Marshal(approvalArgs{Command: a.command, SessionID: r.em.SessionID, AgentCallID: a.agentCall})
		idx := i
		r.em.emit(agui.Event{Type: agui.ToolCallStart, ToolCallID: id, ToolCallName: ApproveCommandTool, Index: &idx})
		r.em.emit(agui.Event{Type: agui.ToolCallArgs, ToolCallID: id, Delta: string(args)})
		r.em.emit(agui.Event{Type: agui.ToolCallEnd, ToolCallID: id, ToolCallName: ApproveCommandTool, Input: args})
	}
	return true
}

func offers(tools []chat.ToolSpec, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// Continuation is what the user answered to the approvals an agent's last
// turn asked for: the conversation ends with approve_command results.
type Continuation struct {
	// SessionID is the agent's session to resume ("" if unknown).
	SessionID string
	// Approved and Declined are the commands the user answered.
	Approved, Declined []string
}

// continuation finds the approve_command answers that end msgs, if any.
func continuation(msgs []agui.ModelMessage) *Continuation {
	answered := map[string]bool{} // call id -> approved
	i := len(msgs) - 1
	for ; i >= 0 && msgs[i].Role == agui.RoleTool; i-- {
		// ApprovalTool answers {"approved":true}; a declined or cancelled
		// call carries the engine's {"error":...} instead.
		var res struct {
			Approved bool `json:"approved"`
		}
		_ = json.Unmarshal([]byte(msgs[i].Content.String()), &res)
		answered[msgs[i].ToolCallID] = res.Approved && msgs[i].Error == ""
	}
	if i < 0 || len(answered) == 0 || msgs[i].Role != agui.RoleAssistant {
		return nil
	}
	var c Continuation
	for _, tc := range msgs[i].ToolCalls {
		approved, ok := answered[tc.ID]
		if tc.Function.Name != ApproveCommandTool || !ok {
			continue
		}
		var a approvalArgs
		if json.Unmarshal([]byte(tc.Function.Arguments), &a) != nil || a.Command == "" {
			continue
		}
		if a.SessionID != "" {
			c.SessionID = a.SessionID
		}
		if approved {
			c.Approved = append(c.Approved, a.Command)
		} else {
			c.Declined = append(c.Declined, a.Command)
		}
	}
	if len(c.Approved)+len(c.Declined) == 0 {
		return nil
	}
	return &c
}

// Prompt is what the agent is told when it resumes after the user's
// answers.
func (c *Continuation) Prompt() string {
	var b strings.Builder
	for _, cmd := range c.Approved {
		fmt.Fprintf(&b, "The user approved this command; it is allowed now: %s\n", cmd)
	}
	for _, cmd := range c.Declined {
		fmt.Fprintf(&b, "The user declined this command; do not run it: %s\n", cmd)
	}
	b.WriteString("Continue the task.")
	return b.String()
}
