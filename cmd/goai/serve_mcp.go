package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/mcp/mcpclient"
	"github.com/goai-sdk/goai/server"
)

// mcpFlag collects repeatable --mcp NAME=COMMAND... / NAME=URL values.
type mcpFlag []string

func (f *mcpFlag) String() string     { return strings.Join(*f, ", ") }
func (f *mcpFlag) Set(v string) error { *f = append(*f, v); return nil }

// addMCPFlag registers --mcp on fs.
func addMCPFlag(fs *flag.FlagSet) *mcpFlag {
	f := &mcpFlag{}
	fs.Var(f, "mcp", "MCP server whose tools the model may call, NAME=COMMAND ARGS... (stdio) or NAME=URL (Streamable HTTP); repeatable; tools are named NAME__TOOL (also GOAI_MCP: a JSON list or one NAME=... per line)")
	return f
}

// mcpConfig is one server in GOAI_MCP's JSON form. Header values and env
// values may name environment variables as ${VAR}, so secrets stay out of
// the configuration text.
type mcpConfig struct {
	Name    string            `json:"name"`
	Command json.RawMessage   `json:"command,omitempty"` // "cmd args" or ["cmd","args"]
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Prefix  *bool             `json:"prefix,omitempty"`
	Timeout string            `json:"timeout,omitempty"` // per call, a Go duration
}

// parseMCPServers reads the --mcp values and GOAI_MCP into servers.
func parseMCPServers(flags []string, env string, getenv func(string) string, logger *slog.Logger) ([]mcpclient.Server, error) {
	var cfgs []mcpConfig
	env = strings.TrimSpace(env)
	if strings.HasPrefix(env, "[") {
		if err := json.Unmarshal([]byte(env), &cfgs); err != nil {
			return nil, fmt.Errorf("GOAI_MCP: not a JSON list of servers: %w", err)
		}
	} else {
		for _, line := range strings.Split(env, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				flags = append(flags, line)
			}
		}
	}
	for _, v := range flags {
		c, err := parseMCPSpec(v)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, c)
	}
	var out []mcpclient.Server
	names := map[string]bool{}
	for _, c := range cfgs {
		s, err := c.server(getenv)
		if err != nil {
			return nil, err
		}
		if names[s.Name] {
			return nil, fmt.Errorf("MCP server name %q is used twice", s.Name)
		}
		names[s.Name] = true
		s.Logger = logger
		out = append(out, s)
	}
	return out, nil
}

// parseMCPSpec reads NAME=URL or NAME=COMMAND ARGS...
func parseMCPSpec(v string) (mcpConfig, error) {
	name, rest, ok := strings.Cut(v, "=")
	name, rest = strings.TrimSpace(name), strings.TrimSpace(rest)
	if !ok || name == "" || rest == "" {
		return mcpConfig{}, fmt.Errorf("--mcp %q: want NAME=COMMAND ARGS... or NAME=URL", v)
	}
	if strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://") {
		return mcpConfig{Name: name, URL: rest}, nil
	}
	argv, err := splitArgs(rest)
	if err != nil {
		return mcpConfig{}, fmt.Errorf("--mcp %s: %w", name, err)
	}
	cmd, _ := json.Marshal(argv)
	return mcpConfig{Name: name, Command: cmd}, nil
}

func (c mcpConfig) server(getenv func(string) string) (mcpclient.Server, error) {
	if !validMCPName(c.Name) {
		return mcpclient.Server{}, fmt.Errorf("MCP server name %q: use letters, digits, '-' and '_'", c.Name)
	}
	s := mcpclient.Server{Name: c.Name, URL: c.URL, Prefix: c.Prefix == nil || *c.Prefix}
	if len(c.Command) > 0 {
		var one string
		if json.Unmarshal(c.Command, &one) == nil {
			argv, err := splitArgs(one)
			if err != nil {
				return s, fmt.Errorf("MCP server %s: %w", c.Name, err)
			}
			s.Command = argv
		} else if err := json.Unmarshal(c.Command, &s.Command); err != nil {
			return s, fmt.Errorf("MCP server %s: command is neither a string nor a list of strings", c.Name)
		}
		s.Command = append(s.Command, c.Args...)
	}
	expand := func(v string) string { return os.Expand(v, getenv) }
	for k, v := range c.Env {
		s.Env = append(s.Env, k+"="+expand(v))
	}
	if len(c.Headers) > 0 {
		s.Header = http.Header{}
		for k, v := range c.Headers {
			s.Header.Set(k, expand(v))
		}
	}
	if c.Timeout != "" {
		d, err := time.ParseDuration(c.Timeout)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("MCP server %s: timeout %q is not a positive duration", c.Name, c.Timeout)
		}
		s.CallTimeout = d
	}
	if len(s.Command) == 0 && s.URL == "" {
		return s, fmt.Errorf("MCP server %s: set a command or a url", c.Name)
	}
	return s, nil
}

func validMCPName(n string) bool {
	if n == "" {
		return false
	}
	for _, r := range n {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// splitArgs splits a command line on spaces, honouring '...' and "..."
// quoting and backslash escapes (no expansion of any kind).
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inArg := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inArg = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == ' ' || r == '\t':
			if inArg {
				out = append(out, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if quote != 0 || escaped {
		return nil, errors.New("unterminated quote or escape in command")
	}
	if inArg {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("empty command")
	}
	return out, nil
}

// mcpTools are the connected MCP servers of one goai process.
type mcpTools struct{ clients []*mcpclient.Client }

// openMCP connects every server named by --mcp and GOAI_MCP; a server that
// cannot be reached, or two tools with one name, is a startup error.
func openMCP(ctx context.Context, flags []string, logger *slog.Logger) (*mcpTools, error) {
	servers, err := parseMCPServers(flags, os.Getenv("GOAI_MCP"), os.Getenv, logger)
	if err != nil {
		return nil, err
	}
	m := &mcpTools{}
	for _, s := range servers {
		c, err := mcpclient.Connect(ctx, s)
		if err != nil {
			m.close()
			return nil, err
		}
		m.clients = append(m.clients, c)
		logger.Info("MCP server connected", "name", s.Name, "tools", len(c.Tools()))
	}
	seen := map[string]string{}
	for _, c := range m.clients {
		for _, t := range c.Tools() {
			if other, dup := seen[t.Name]; dup {
				m.close()
				return nil, fmt.Errorf("MCP servers %s and %s both offer a tool named %q", other, c.Name(), t.Name)
			}
			seen[t.Name] = c.Name()
		}
	}
	return m, nil
}

// tools returns every server's current tools (lists re-read on change).
func (m *mcpTools) tools() []*chat.Tool {
	if m == nil {
		return nil
	}
	var out []*chat.Tool
	for _, c := range m.clients {
		out = append(out, c.Tools()...)
	}
	return out
}

func (m *mcpTools) close() {
	if m == nil {
		return
	}
	for _, c := range m.clients {
		_ = c.Close()
	}
}

// wrap offers the MCP tools alongside whatever build offers.
func (m *mcpTools) wrap(build func(*server.Request) (chat.Options, error)) func(*server.Request) (chat.Options, error) {
	if m == nil || len(m.clients) == 0 {
		return build
	}
	return func(req *server.Request) (chat.Options, error) {
		opts, err := build(req)
		if err != nil {
			return opts, err
		}
		opts.Tools = append(append([]*chat.Tool(nil), opts.Tools...), m.tools()...)
		return opts, nil
	}
}
