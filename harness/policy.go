package harness

import (
	"context"
	"slices"
	"strings"

	"github.com/goai-sdk/goai/workspace"
)

// The workspace command policy (allow / ask / deny patterns) applies to a
// coding agent's own shell commands as well as to the run_command tool.
// Each CLI takes it in its own way:
//   - ACP agents ask permission through the protocol: PolicyPermit answers.
//   - Claude Code takes Bash rules on its command line: ClaudeCode.Policy.
//   - Codex has no per-command rules: its commands run unchecked inside
//     the sandbox, which stays the boundary.
//
// No agent can pause the run for a person's answer in the middle of its
// turn, so "ask" is answered no, like "deny": the agent sees the refusal
// and can say what it wanted to run. When the run offers
// ApproveCommandTool, the refused commands then become an approval
// interrupt at the end of the agent's turn, and the agent continues with
// the user's answers (see ApprovalTool).

// PolicyPermit answers an ACP agent's permission requests from p: a request
// that carries a command (rawInput.command) is allowed only when the
// policy allows it; one without a command (a file edit) is allowed.
func PolicyPermit(p *workspace.Policy) func(ctx context.Context, title string, rawInput any) bool {
	return func(_ context.Context, title string, rawInput any) bool {
		cmd := commandOf(rawInput)
		if cmd == "" {
			return true
		}
		return p.Evaluate(cmd) == workspace.Allow
	}
}

// policyAsker is PolicyPermit for a session that records the commands the
// policy leaves to the user (for approve_command) and allows the ones the
// user approved before this turn.
func policyAsker(p *workspace.Policy, s *Session) func(ctx context.Context, title string, rawInput any) bool {
	var approved []string
	if c := s.Invocation.Continue; c != nil {
		approved = c.Approved
	}
	return func(_ context.Context, title string, rawInput any) bool {
		cmd := commandOf(rawInput)
		switch {
		case cmd == "" || slices.Contains(approved, cmd):
			return true
		case p.Evaluate(cmd) == workspace.Ask:
			s.Report(func(e *Emitter) { e.AskApproval(cmd, "") })
			return false
		}
		return p.Evaluate(cmd) == workspace.Allow
	}
}

func commandOf(rawInput any) string {
	m, ok := rawInput.(map[string]any)
	if !ok {
		return ""
	}
	switch c := m["command"].(type) {
	case string:
		return c
	case []any:
		parts := make([]string, 0, len(c))
		for _, p := range c {
			if s, ok := p.(string); ok {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// claudeRules maps a policy onto Claude Code's Bash permission rules. A
// pattern is expressible when its only `*` is a trailing " *" or "*" (Claude
// matches command prefixes with ":*"); others are returned as skipped.
func claudeRules(p *workspace.Policy) (allow, deny, skipped []string) {
	rule := func(pat string) (string, bool) {
		pat = strings.TrimSpace(pat)
		body, star := strings.CutSuffix(pat, "*")
		body = strings.TrimSpace(body)
		if strings.Contains(body, "*") || body == "" {
			return "", false
		}
		if star {
			return "Bash(" + body + ":*)", true
		}
		return "Bash(" + body + ")", true
	}
	for _, pat := range p.Allow {
		if r, ok := rule(pat); ok {
			allow = append(allow, r)
		} else {
			skipped = append(skipped, pat)
		}
	}
	for _, pat := range append(append([]string{}, p.Deny...), p.Ask...) {
		if r, ok := rule(pat); ok {
			deny = append(deny, r)
		} else {
			skipped = append(skipped, pat)
		}
	}
	return allow, deny, skipped
}
