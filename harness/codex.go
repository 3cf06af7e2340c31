package harness

import (
	"encoding/json"
	"strings"

	"github.com/goai-sdk/goai/sandbox"
)

// Codex runs OpenAI's Codex CLI (`codex exec --json`). With OPENAI_BASE_URL
// in Options.Env it is configured to use that OpenAI Responses endpoint
// (with OPENAI_API_KEY) instead of its default provider.
type Codex struct {
	// Binary is the CLI inside the sandbox; default "codex".
	Binary string
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
}

// Name is "codex".
func (Codex) Name() string { return "codex" }

// codexBridgeTokenEnv carries the bridge token to the CLI, so it never
// appears in argv.
const codexBridgeTokenEnv = "GOAI_BRIDGE_TOKEN"

// Launch builds the command. The prompt goes to stdin ("-").
func (c Codex) Launch(inv *Invocation) (*Launch, error) {
	bin := c.Binary
	if bin == "" {
		bin = "codex"
	}
	// The sandbox is the boundary: Codex's own sandbox and approvals would
	// only stop the work the agent was asked to do.
	args := []string{sandbox.Quote(bin), "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
	if inv.Model != "" {
		args = append(args, "-m", sandbox.Quote(inv.Model))
	}
	l := &Launch{Stdin: inv.Prompt, Env: map[string]string{}}
	for k, v := range inv.Env {
		l.Env[k] = v
	}
	if base := inv.Env["OPENAI_BASE_URL"]; base != "" {
		args = append(args,
			"-c", "model_provider=goai",
			"-c", sandbox.Quote(`model_providers.goai.name="goai"`),
			"-c", sandbox.Quote(`model_providers.goai.base_url=`+tomlString(base)),
			"-c", sandbox.Quote(`model_providers.goai.wire_api="responses"`),
			"-c", sandbox.Quote(`model_providers.goai.env_key="OPENAI_API_KEY"`))
	}
	if inv.Bridge != nil {
		l.Env[codexBridgeTokenEnv] = inv.Bridge.Token
		args = append(args,
			"-c", sandbox.Quote(`mcp_servers.tanstack.url=`+tomlString(inv.Bridge.URL)),
			"-c", sandbox.Quote(`mcp_servers.tanstack.bearer_token_env_var="`+codexBridgeTokenEnv+`"`))
	}
	for _, a := range c.ExtraArgs {
		args = append(args, sandbox.Quote(a))
	}
	args = append(args, "-")
	l.Command = strings.Join(args, " ")
	return l, nil
}

func tomlString(s string) string {
	b, _ := json.Marshal(s) // a JSON string is a valid TOML basic string
	return string(b)
}

// NewDecoder reads `codex exec --json` output.
func (Codex) NewDecoder() Decoder { return &codexDecoder{} }

type codexDecoder struct{}

type codexLine struct {
	Type     string     `json:"type"`
	ThreadID string     `json:"thread_id"`
	Item     *codexItem `json:"item"`
	Usage    *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"`
}

type codexItem struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregated_output"`
	ExitCode         *int            `json:"exit_code"`
	Status           string          `json:"status"`
	Changes          json.RawMessage `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           json.RawMessage `json:"result"`
	Error            json.RawMessage `json:"error"`
	Query            string          `json:"query"`
	Items            json.RawMessage `json:"items"`
	Message          string          `json:"message"`
}

func (d *codexDecoder) Line(line []byte, e *Emitter) error {
	var l codexLine
	if err := json.Unmarshal(line, &l); err != nil {
		return err
	}
	switch l.Type {
	case "thread.started":
		if e.SessionID == "" {
			e.SessionID = l.ThreadID
		}
	case "turn.completed":
		if u := l.Usage; u != nil {
			e.AddUsage(u.InputTokens, u.OutputTokens)
		}
	case "turn.failed":
		msg := "the agent's turn failed"
		if l.Error != nil && l.Error.Message != "" {
			msg = l.Error.Message
		}
		e.Failure = &Failure{Code: "turn_failed", Message: msg}
	case "item.started", "item.updated", "item.completed":
		if l.Item != nil {
			d.item(l.Type == "item.completed", l.Item, e)
		}
	}
	return nil
}

func (d *codexDecoder) item(done bool, it *codexItem, e *Emitter) {
	switch it.Type {
	case "agent_message":
		if done {
			e.Text(it.ID, it.Text)
			e.EndText()
		}
	case "reasoning":
		if done {
			e.Reasoning(it.ID, it.Text)
			e.EndReasoning("")
		}
	case "command_execution":
		args, _ := json.Marshal(map[string]string{"command": it.Command})
		e.ToolStart(it.ID, "shell", "")
		e.ToolEnd(it.ID, args)
		if done {
			failed := it.Status == "failed" || (it.ExitCode != nil && *it.ExitCode != 0)
			e.ToolResult(it.ID, it.AggregatedOutput, failed)
		}
	case "file_change":
		args, _ := json.Marshal(map[string]json.RawMessage{"changes": orNull(it.Changes)})
		e.ToolStart(it.ID, "apply_patch", "")
		e.ToolEnd(it.ID, args)
		if done {
			e.ToolResult(it.ID, it.Status, it.Status == "failed")
		}
	case "mcp_tool_call":
		name := "mcp__" + it.Server + "__" + it.Tool
		e.ToolStart(it.ID, name, "")
		e.ToolEnd(it.ID, orObject(it.Arguments))
		if done {
			failed := it.Status == "failed" || (len(it.Error) > 0 && string(it.Error) != "null")
			out := string(it.Result)
			if failed && len(it.Error) > 0 {
				out = string(it.Error)
			}
			e.ToolResult(it.ID, mcpResultText(out), failed)
		}
	case "web_search":
		args, _ := json.Marshal(map[string]string{"query": it.Query})
		e.ToolStart(it.ID, "web_search", "")
		e.ToolEnd(it.ID, args)
		if done {
			e.ToolResult(it.ID, "", false)
		}
	case "todo_list":
		e.ToolStart(it.ID, "todo_list", "")
		e.ToolEnd(it.ID, orObject(it.Items))
		if done {
			e.ToolResult(it.ID, "", false)
		}
	}
}

func orNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

func orObject(r json.RawMessage) json.RawMessage {
	if len(r) == 0 || r[0] != '{' {
		return json.RawMessage("{}")
	}
	return r
}

// mcpResultText takes the text of an MCP call result ({content:[{type:text,
// text}]}) when it has that shape, else the raw JSON.
func mcpResultText(raw string) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal([]byte(raw), &r) == nil && len(r.Content) > 0 {
		var b strings.Builder
		for _, c := range r.Content {
			b.WriteString(c.Text)
		}
		return b.String()
	}
	return raw
}
