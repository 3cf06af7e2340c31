package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/goai-sdk/goai/workspace"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// ACP runs any agent that speaks the Agent Client Protocol over stdio: the
// host initializes it, opens a session in the working directory (with the
// tool bridge as an MCP server), sends the prompt, and reports the agent's
// session updates as they stream. The agent's file reads and writes through
// the protocol go to the sandbox's filesystem; its permission requests are
// answered by Permit.
type ACP struct {
	// Command starts the agent (a shell command run in the sandbox).
	Command string
	// Harness names the harness in events; default "acp".
	Harness string
	// Permit answers a permission request: true picks the agent's "allow"
	// option, false its "reject" option. Nil allows: the sandbox is the
	// boundary.
	Permit func(ctx context.Context, title string, rawInput any) bool
	// Policy, when set (and Permit is nil), answers permission requests
	// for commands: allowed ones are allowed; ones it leaves to the user
	// are refused and become approval interrupts when the run offers
	// ApproveCommandTool (a command the user approved is allowed when the
	// agent continues); denied ones are refused. Requests without a
	// command (file edits) are allowed.
	Policy *workspace.Policy
}

var _ Conversing = ACP{}

// Name is Harness, or "acp".
func (a ACP) Name() string {
	if a.Harness != "" {
		return a.Harness
	}
	return "acp"
}

// Launch returns the agent command; the conversation happens in Converse.
func (a ACP) Launch(inv *Invocation) (*Launch, error) {
	if strings.TrimSpace(a.Command) == "" {
		return nil, errors.New("harness: ACP needs the command that starts the agent")
	}
	env := map[string]string{}
	for k, v := range inv.Env {
		env[k] = v
	}
	return &Launch{Command: a.Command, Env: env}, nil
}

// NewDecoder is unused: ACP converses.
func (ACP) NewDecoder() Decoder { return nil }

// Converse runs one prompt turn.
func (a ACP) Converse(ctx context.Context, s *Session) error {
	permit := a.Permit
	if permit == nil && a.Policy != nil {
		permit = policyAsker(a.Policy, s)
	}
	cl := &acpClient{s: s, permit: permit}
	conn := acp.NewClientSideConnection(cl, s.Process.Stdin(), s.Process.Stdout())
	if s.Logger != nil {
		conn.SetLogger(s.Logger)
	}
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{
			Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
		},
		ClientInfo: &acp.Implementation{Name: "goai", Version: "1"},
	}); err != nil {
		return fmt.Errorf("harness: ACP initialize: %w", err)
	}
	servers := []acp.McpServer{}
	if b := s.Invocation.Bridge; b != nil {
		servers = append(servers, acp.McpServer{Http: &acp.McpServerHttpInline{
			Name: "tanstack", Url: b.URL, Type: "http",
			Headers: []acp.HttpHeader{{Name: "Authorization", Value: "Bearer " + b.Token}},
		}})
	}
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: s.RealDir, McpServers: servers})
	if err != nil {
		return fmt.Errorf("harness: ACP new session: %w", err)
	}
	s.Report(func(e *Emitter) { e.SessionID = string(sess.SessionId) })
	resp, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(s.Invocation.Prompt)}})
	if err != nil {
		if ctx.Err() != nil {
			_ = conn.Cancel(context.WithoutCancel(ctx), acp.CancelNotification{SessionId: sess.SessionId})
		}
		return fmt.Errorf("harness: ACP prompt: %w", err)
	}
	switch resp.StopReason {
	case acp.StopReasonEndTurn, acp.StopReasonMaxTurnRequests, "":
	case acp.StopReasonCancelled:
		return context.Canceled
	default:
		s.Report(func(e *Emitter) {
			e.Failure = &Failure{Code: string(resp.StopReason), Message: "the agent stopped: " + string(resp.StopReason)}
		})
	}
	if u := resp.Usage; u != nil {
		s.Report(func(e *Emitter) { e.AddUsage(int64(u.InputTokens), int64(u.OutputTokens)) })
	}
	return nil
}

type acpClient struct {
	s      *Session
	permit func(ctx context.Context, title string, rawInput any) bool
}

func (c *acpClient) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	u := n.Update
	c.s.Report(func(e *Emitter) {
		switch {
		case u.AgentMessageChunk != nil:
			id := ""
			if u.AgentMessageChunk.MessageId != nil {
				id = *u.AgentMessageChunk.MessageId
			}
			e.Text(id, blockText(u.AgentMessageChunk.Content))
		case u.AgentThoughtChunk != nil:
			e.Reasoning("", blockText(u.AgentThoughtChunk.Content))
		case u.ToolCall != nil:
			tc := u.ToolCall
			id := string(tc.ToolCallId)
			e.ToolStart(id, toolName(string(tc.Kind), tc.Title), "")
			e.ToolEnd(id, rawJSON(tc.RawInput, tc.Title))
			c.toolStatus(e, id, tc.Status, tc.Content, tc.RawOutput)
		case u.ToolCallUpdate != nil:
			tc := u.ToolCallUpdate
			id := string(tc.ToolCallId)
			if tc.RawInput != nil {
				e.ToolEnd(id, rawJSON(tc.RawInput, ""))
			}
			if tc.Status != nil {
				c.toolStatus(e, id, *tc.Status, tc.Content, tc.RawOutput)
			}
		case u.Plan != nil:
			e.Custom("acp.plan", u.Plan.Entries)
		}
	})
	return nil
}

func (c *acpClient) toolStatus(e *Emitter, id string, status acp.ToolCallStatus, content []acp.ToolCallContent, raw any) {
	switch status {
	case acp.ToolCallStatusCompleted, acp.ToolCallStatusFailed:
		e.ToolResult(id, toolContentText(content, raw), status == acp.ToolCallStatusFailed)
	}
}

func (c *acpClient) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	title := ""
	if p.ToolCall.Title != nil {
		title = *p.ToolCall.Title
	}
	allow := c.permit == nil || c.permit(ctx, title, p.ToolCall.RawInput)
	want := []acp.PermissionOptionKind{acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways}
	if allow {
		want = []acp.PermissionOptionKind{acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways}
	}
	for _, k := range want {
		for _, o := range p.Options {
			if o.Kind == k {
				return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}, nil
			}
		}
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
}

func (c *acpClient) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	v, err := c.s.VirtualPath(p.Path)
	if err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	b, err := c.s.Handle.FS().ReadFile(ctx, v)
	if err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	content := string(b)
	if p.Line != nil || p.Limit != nil {
		lines := strings.Split(content, "\n")
		start := 0
		if p.Line != nil && *p.Line > 0 {
			start = min(*p.Line-1, len(lines))
		}
		end := len(lines)
		if p.Limit != nil && *p.Limit >= 0 {
			end = min(start+*p.Limit, end)
		}
		content = strings.Join(lines[start:end], "\n")
	}
	return acp.ReadTextFileResponse{Content: content}, nil
}

func (c *acpClient) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	v, err := c.s.VirtualPath(p.Path)
	if err != nil {
		return acp.WriteTextFileResponse{}, err
	}
	if i := strings.LastIndexByte(v, '/'); i > 0 {
		if err := c.s.Handle.FS().MkdirAll(ctx, v[:i]); err != nil {
			return acp.WriteTextFileResponse{}, err
		}
	}
	return acp.WriteTextFileResponse{}, c.s.Handle.FS().WriteFile(ctx, v, []byte(p.Content), 0o644)
}

// The host offers no terminals (not advertised in its capabilities): the
// agent runs its commands itself, inside the sandbox.
var errNoTerminal = errors.New("this client offers no terminals")

func (c *acpClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNoTerminal
}
func (c *acpClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNoTerminal
}
func (c *acpClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNoTerminal
}
func (c *acpClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNoTerminal
}
func (c *acpClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNoTerminal
}

func blockText(b acp.ContentBlock) string {
	if b.Text != nil {
		return b.Text.Text
	}
	return ""
}

// toolName names an ACP tool call: a bridged host tool keeps the name the
// agent gave it (decoders strip the bridge prefix); otherwise the call's
// kind ("edit", "execute", ...), else its title.
func toolName(kind, title string) string {
	if strings.HasPrefix(title, BridgePrefix) {
		return title
	}
	if kind != "" && kind != "other" {
		return kind
	}
	if title != "" {
		return title
	}
	return "tool"
}

func rawJSON(v any, title string) json.RawMessage {
	if v == nil {
		b, _ := json.Marshal(map[string]string{"title": title})
		return b
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) == 0 || b[0] != '{' {
		b, _ = json.Marshal(map[string]any{"input": v})
	}
	return b
}

func toolContentText(content []acp.ToolCallContent, raw any) string {
	var b strings.Builder
	for _, c := range content {
		switch {
		case c.Content != nil:
			b.WriteString(blockText(c.Content.Content))
		case c.Diff != nil:
			fmt.Fprintf(&b, "edited %s", c.Diff.Path)
		}
	}
	if b.Len() == 0 && raw != nil {
		if s, ok := raw.(string); ok {
			return s
		}
		// A list of content blocks: their text.
		if list, ok := raw.([]any); ok {
			for _, item := range list {
				if m, ok := item.(map[string]any); ok {
					if t, ok := m["text"].(string); ok {
						b.WriteString(t)
					}
				}
			}
			if b.Len() > 0 {
				return b.String()
			}
		}
		j, _ := json.Marshal(raw)
		return string(j)
	}
	return b.String()
}
