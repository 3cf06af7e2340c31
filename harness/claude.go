package harness

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/workspace"
)

// ClaudeCode runs Anthropic's Claude Code CLI (`claude -p --output-format
// stream-json`). Point it at a model endpoint with ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY in Options.Env.
type ClaudeCode struct {
	// Binary is the CLI inside the sandbox; default "claude".
	Binary string
	// PermissionMode is passed as --permission-mode; default
	// "bypassPermissions": the sandbox, not the CLI, is the boundary.
	PermissionMode string
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// Policy, when set, decides the agent's shell commands: its allow
	// patterns become allowed Bash rules, its deny and ask patterns
	// disallowed ones, and a command no rule allows is refused (the CLI
	// runs in "dontAsk" mode: nobody is there to answer). Patterns Claude
	// Code cannot express (a `*` anywhere but at the end) are skipped;
	// Skipped reports them.
	Policy *workspace.Policy
	// Home, when set, is the CLI's home directory relative to the working
	// directory (for example ".git/goai-home"): its sessions then persist
	// with the workspace, so a continuation after an approval resumes the
	// agent's session. Unset, the CLI uses the sandbox's HOME.
	Home string
}

// Skipped lists the policy patterns Claude Code cannot express.
func (c ClaudeCode) Skipped() []string {
	if c.Policy == nil {
		return nil
	}
	_, _, skipped := claudeRules(c.Policy)
	return skipped
}

// resumesSessions: a continuation resumes the session (--resume).
func (ClaudeCode) resumesSessions() bool { return true }

// Name is "claude-code".
func (ClaudeCode) Name() string { return "claude-code" }

// Launch builds the command. The bridge configuration (with its token) is
// written to a file in the working directory, never put in argv.
func (c ClaudeCode) Launch(inv *Invocation) (*Launch, error) {
	bin := c.Binary
	if bin == "" {
		bin = "claude"
	}
	mode := c.PermissionMode
	if mode == "" {
		mode = "bypassPermissions"
		if c.Policy != nil {
			mode = "dontAsk"
		}
	}
	args := []string{sandbox.Quote(bin), "-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
		"--permission-mode", sandbox.Quote(mode)}
	if inv.Model != "" {
		args = append(args, "--model", sandbox.Quote(inv.Model))
	}
	if inv.Continue != nil && inv.Continue.SessionID != "" {
		args = append(args, "--resume", sandbox.Quote(inv.Continue.SessionID))
	}
	l := &Launch{Stdin: inv.Prompt, Env: map[string]string{
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_AUTOUPDATER":                      "1",
		// Claude Code refuses bypassPermissions as root unless it is told
		// it runs in a sandbox, which it does.
		"IS_SANDBOX": "1",
	}}
	for k, v := range inv.Env {
		l.Env[k] = v
	}
	if inv.Bridge != nil {
		cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"tanstack": map[string]any{
			"type": "http", "url": inv.Bridge.URL,
			"headers": map[string]string{"Authorization": "Bearer " + inv.Bridge.Token},
		}}})
		if err != nil {
			return nil, err
		}
		name := ".goai-mcp-bridge-" + EncodeRunID(inv.RunID) + ".json"
		l.Files = map[string]string{name: string(cfg)}
		args = append(args, "--mcp-config", sandbox.Quote(name), "--strict-mcp-config")
	}
	if c.Policy != nil {
		allow, deny, _ := claudeRules(c.Policy)
		// File edits stay allowed: the sandbox and its file events watch them.
		allow = append(allow, "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "LS", "mcp__tanstack")
		if inv.Continue != nil {
			for _, cmd := range inv.Continue.Approved {
				allow = append(allow, "Bash("+cmd+")")
			}
		}
		args = append(args, "--allowedTools", sandbox.Quote(strings.Join(allow, ",")))
		if len(deny) > 0 {
			args = append(args, "--disallowedTools", sandbox.Quote(strings.Join(deny, ",")))
		}
	}
	for _, a := range c.ExtraArgs {
		args = append(args, sandbox.Quote(a))
	}
	l.Command = strings.Join(args, " ")
	if c.Home != "" {
		// $PWD, not a path of the sandbox's: it is the workspace in every
		// sandbox, also one whose commands run on the host.
		home := `"$PWD"/` + sandbox.Quote(c.Home)
		l.Command = "mkdir -p " + home + " && HOME=" + home + " " + l.Command
	}
	return l, nil
}

// NewDecoder reads Claude Code's stream-json output.
func (c ClaudeCode) NewDecoder() Decoder {
	return &claudeDecoder{streamed: map[string]bool{}, policy: c.Policy}
}

type claudeDecoder struct {
	policy   *workspace.Policy
	msgID    string
	streamed map[string]bool
	blocks   map[int]*claudeBlock
}

type claudeBlock struct {
	kind      string
	id        string
	signature string
}

type claudeLine struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype"`
	SessionID       string          `json:"session_id"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	Event           json.RawMessage `json:"event"`
	Message         json.RawMessage `json:"message"`
	IsError         bool            `json:"is_error"`
	Result          string          `json:"result"`
	// PermissionDenials are the tool calls the CLI refused (result line).
	PermissionDenials []struct {
		ToolName  string          `json:"tool_name"`
		ToolUseID string          `json:"tool_use_id"`
		ToolInput json.RawMessage `json:"tool_input"`
	} `json:"permission_denials"`
	Errors []string     `json:"errors"`
	Usage  *claudeUsage `json:"usage"`
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

type claudeContent struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type claudeMessage struct {
	ID      string          `json:"id"`
	Content json.RawMessage `json:"content"`
}

func (d *claudeDecoder) Line(line []byte, e *Emitter) error {
	var l claudeLine
	if err := json.Unmarshal(line, &l); err != nil {
		return err
	}
	if l.SessionID != "" && e.SessionID == "" {
		e.SessionID = l.SessionID
	}
	// A sub-agent's work (parent_tool_use_id set) is the outcome of the
	// parent's tool call, which reports it.
	if l.ParentToolUseID != nil && *l.ParentToolUseID != "" {
		return nil
	}
	switch l.Type {
	case "stream_event":
		return d.streamEvent(l.Event, e)
	case "assistant":
		return d.assistant(l.Message, e)
	case "user":
		return d.user(l.Message, e)
	case "result":
		d.askFor(&l, e)
		if u := l.Usage; u != nil {
			e.Usage = nil
			e.AddUsage(u.InputTokens+u.CacheCreationInputTokens+u.CacheReadInputTokens, u.OutputTokens)
		}
		if l.IsError || (l.Subtype != "" && l.Subtype != "success") {
			msg := l.Result
			if msg == "" {
				msg = strings.Join(l.Errors, "; ")
			}
			if msg == "" {
				msg = "the agent reported " + l.Subtype
			}
			code := l.Subtype
			if code == "" || code == "success" {
				code = "agent_error"
			}
			e.Failure = &Failure{Code: code, Message: msg}
		}
	}
	return nil
}

func (d *claudeDecoder) streamEvent(raw json.RawMessage, e *Emitter) error {
	var ev struct {
		Type    string        `json:"type"`
		Index   int           `json:"index"`
		Message claudeMessage `json:"message"`
		Block   claudeContent `json:"content_block"`
		Delta   struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Thinking    string `json:"thinking"`
			Signature   string `json:"signature"`
			PartialJSON string `json:"partial_json"`
		} `json:"delta"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		return err
	}
	switch ev.Type {
	case "message_start":
		d.msgID = ev.Message.ID
		d.streamed[d.msgID] = true
		d.blocks = map[int]*claudeBlock{}
	case "content_block_start":
		b := &claudeBlock{kind: ev.Block.Type, id: d.blockID(ev.Index)}
		if b.kind == "tool_use" {
			b.id = ev.Block.ID
			e.ToolStart(b.id, ev.Block.Name, d.msgID)
		}
		if d.blocks == nil {
			d.blocks = map[int]*claudeBlock{}
		}
		d.blocks[ev.Index] = b
	case "content_block_delta":
		b := d.blocks[ev.Index]
		if b == nil {
			return fmt.Errorf("delta for unknown block %d", ev.Index)
		}
		switch ev.Delta.Type {
		case "text_delta":
			e.Text(b.id, ev.Delta.Text)
		case "thinking_delta":
			e.Reasoning(b.id, ev.Delta.Thinking)
		case "signature_delta":
			b.signature += ev.Delta.Signature
		case "input_json_delta":
			e.ToolArgs(b.id, ev.Delta.PartialJSON)
		}
	case "content_block_stop":
		b := d.blocks[ev.Index]
		if b == nil {
			return nil
		}
		switch b.kind {
		case "text":
			e.EndText()
		case "thinking":
			e.EndReasoning(b.signature)
		case "tool_use":
			e.ToolEnd(b.id, nil)
		}
	}
	return nil
}

func (d *claudeDecoder) blockID(index int) string {
	if index == 0 {
		return d.msgID
	}
	return d.msgID + "-" + strconv.Itoa(index)
}

// assistant handles a complete assistant message. When its deltas were
// streamed it only closes tool calls (their whole input); otherwise (a CLI
// without partial messages) it reports the message in full.
func (d *claudeDecoder) assistant(raw json.RawMessage, e *Emitter) error {
	var m claudeMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	var blocks []claudeContent
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return err
	}
	streamed := d.streamed[m.ID]
	for i, b := range blocks {
		switch b.Type {
		case "text":
			if !streamed {
				e.Text(m.ID+"-"+strconv.Itoa(i), b.Text)
				e.EndText()
			}
		case "thinking":
			if !streamed {
				e.Reasoning(m.ID+"-"+strconv.Itoa(i), b.Thinking)
				e.EndReasoning(b.Signature)
			}
		case "tool_use":
			e.ToolStart(b.ID, b.Name, m.ID)
			e.ToolEnd(b.ID, b.Input)
		}
	}
	return nil
}

func (d *claudeDecoder) user(raw json.RawMessage, e *Emitter) error {
	var m claudeMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	var blocks []claudeContent
	if json.Unmarshal(m.Content, &blocks) != nil {
		return nil // a plain-text user message: the prompt echoed back
	}
	for _, b := range blocks {
		if b.Type == "tool_result" {
			e.ToolResult(b.ToolUseID, toolResultText(b.Content), b.IsError)
		}
	}
	return nil
}

// toolResultText renders a tool_result's content (a string or a list of
// blocks) as text.
func toolResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []claudeContent
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return string(raw)
}

// askFor records the shell commands the CLI refused that the policy leaves
// to the user (ask), for an approval interrupt.
func (d *claudeDecoder) askFor(l *claudeLine, e *Emitter) {
	if d.policy == nil {
		return
	}
	for _, den := range l.PermissionDenials {
		var in struct {
			Command string `json:"command"`
		}
		if den.ToolName != "Bash" || json.Unmarshal(den.ToolInput, &in) != nil || in.Command == "" {
			continue
		}
		if d.policy.Evaluate(in.Command) == workspace.Ask {
			e.AskApproval(in.Command, den.ToolUseID)
		}
	}
}
