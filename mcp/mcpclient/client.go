// Package mcpclient connects to MCP servers (a command over stdio, or a
// Streamable HTTP endpoint) and offers their tools as chat.Tools.
//
// A Client keeps one session per server. A call that fails because the
// server died, hung past the call timeout or broke the protocol ends that
// call with an error (the engine turns it into a tool error, the run goes
// on), drops the session and kills the server's process group; the next
// call reconnects.
package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults for the zero values of Server.
const (
	DefaultCallTimeout    = 60 * time.Second
	DefaultConnectTimeout = 30 * time.Second
	// DefaultMaxMessageBytes bounds one JSON-RPC message from a server.
	DefaultMaxMessageBytes = 16 << 20
)

// Server describes one MCP server. Exactly one of Command and URL is set.
type Server struct {
	// Name identifies the server in errors and, with Prefix, in tool names.
	Name string
	// Command is the argv of a server speaking MCP on stdin/stdout. It runs
	// in its own process group, which is killed when the session ends.
	Command []string
	// Env is added to goai's environment for Command; Dir is its working
	// directory.
	Env []string
	Dir string
	// URL is a Streamable HTTP endpoint; Header is sent with every request
	// (for example Authorization: Bearer ...).
	URL    string
	Header http.Header
	// HTTPClient is used for URL; nil means a fresh client.
	HTTPClient *http.Client
	// Prefix names the tools "<Name>__<tool>" so several servers may offer
	// tools of one name.
	Prefix bool
	// CallTimeout bounds one tool call, ConnectTimeout the handshake and
	// the tool listing. MaxMessageBytes bounds one message from the server
	// (a larger result fails the call).
	CallTimeout     time.Duration
	ConnectTimeout  time.Duration
	MaxMessageBytes int
	// Logger receives the server's stderr lines and connection events
	// (never header values).
	Logger *slog.Logger
}

func (s Server) validate() error {
	if strings.TrimSpace(s.Name) == "" {
		return errors.New("mcpclient: a server needs a name")
	}
	switch {
	case len(s.Command) == 0 && s.URL == "":
		return fmt.Errorf("mcpclient: server %q: set Command or URL", s.Name)
	case len(s.Command) > 0 && s.URL != "":
		return fmt.Errorf("mcpclient: server %q: set Command or URL, not both", s.Name)
	case len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "":
		return fmt.Errorf("mcpclient: server %q: empty command", s.Name)
	}
	return nil
}

// Client is a connection to one MCP server, re-established on demand.
type Client struct {
	srv    Server
	log    *slog.Logger
	client *mcp.Client
	// transport is the client's own connection pool when Server.HTTPClient
	// is nil.
	transport *http.Transport

	// ctx ends background work (tool list refreshes) when the client closes.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	connMu sync.Mutex // serializes connecting
	mu     sync.Mutex
	sess   *session
	tools  []*chat.Tool
	// changed is closed and replaced whenever the tool list changes.
	changed chan struct{}
	closed  bool
}

// session is one live connection.
type session struct {
	cs   *mcp.ClientSession
	proc *process // nil for HTTP
}

// close ends the session; a stdio server gets grace to exit on its own
// before its process group is killed.
func (s *session) close(grace time.Duration) error {
	if s.proc != nil {
		// Reap the server first when it gets no grace: closing the session
		// would otherwise wait for it.
		if grace == 0 {
			s.proc.kill(0)
		}
		defer s.proc.kill(grace)
	}
	return s.cs.Close()
}

// Connect starts or dials the server, completes the MCP handshake and
// reads its tool list. A server that is not MCP, breaks the protocol,
// lists two tools with one name or does not answer within ConnectTimeout
// is an error here, and nothing it started is left running.
func Connect(ctx context.Context, srv Server) (*Client, error) {
	if err := srv.validate(); err != nil {
		return nil, err
	}
	if srv.CallTimeout <= 0 {
		srv.CallTimeout = DefaultCallTimeout
	}
	if srv.ConnectTimeout <= 0 {
		srv.ConnectTimeout = DefaultConnectTimeout
	}
	if srv.MaxMessageBytes <= 0 {
		srv.MaxMessageBytes = DefaultMaxMessageBytes
	}
	log := srv.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{srv: srv, log: log.With("mcp_server", srv.Name), changed: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if srv.URL != "" && srv.HTTPClient == nil {
		// Our own pool, so Close leaves no idle connection behind.
		c.transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	c.client = mcp.NewClient(&mcp.Implementation{Name: "goai", Version: "1.0.0"}, &mcp.ClientOptions{
		Logger:                 c.log,
		ToolListChangedHandler: c.onToolListChanged,
	})
	if _, err := c.connect(ctx); err != nil {
		c.cancel()
		c.closeIdle()
		return nil, err
	}
	return c, nil
}

// Name is the server's name.
func (c *Client) Name() string { return c.srv.Name }

// Tools returns the server's tools as of the last listing.
func (c *Client) Tools() []*chat.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*chat.Tool(nil), c.tools...)
}

// Changed returns a channel closed when the tool list next changes.
func (c *Client) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Close ends the session and kills the server's process group.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	s := c.sess
	c.sess = nil
	c.mu.Unlock()
	c.cancel()
	var err error
	if s != nil {
		err = s.close(gracePeriod)
	}
	c.wg.Wait()
	c.closeIdle()
	return err
}

func (c *Client) closeIdle() {
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

// connect returns the live session, dialing a new one if there is none.
func (c *Client) connect(ctx context.Context) (*session, error) {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	c.mu.Lock()
	s, closed := c.sess, c.closed
	c.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("mcp server %q: client closed", c.srv.Name)
	}
	if s != nil {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.srv.ConnectTimeout)
	defer cancel()
	s, err := c.dial(ctx)
	if err != nil {
		return nil, c.connectError(ctx, err)
	}
	tools, err := c.list(ctx, s)
	if err != nil {
		s.close(0)
		return nil, c.connectError(ctx, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		s.close(0)
		return nil, fmt.Errorf("mcp server %q: client closed", c.srv.Name)
	}
	c.sess = s
	c.setToolsLocked(tools)
	c.mu.Unlock()
	c.log.Debug("mcp connected", "tools", len(tools))
	return s, nil
}

func (c *Client) connectError(ctx context.Context, err error) error {
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("mcp server %q: no answer within %s: %w", c.srv.Name, c.srv.ConnectTimeout, err)
	}
	return fmt.Errorf("mcp server %q: %w", c.srv.Name, err)
}

func (c *Client) dial(ctx context.Context) (*session, error) {
	if len(c.srv.Command) > 0 {
		p, err := startProcess(c.srv, c.log)
		if err != nil {
			return nil, err
		}
		t := &mcp.IOTransport{Reader: p.stdout, Writer: p.stdin, MaxLineLength: c.srv.MaxMessageBytes}
		cs, err := c.client.Connect(ctx, t, nil)
		if err != nil {
			p.kill(0)
			return nil, fmt.Errorf("handshake with %q: %w", c.srv.Command[0], err)
		}
		return &session{cs: cs, proc: p}, nil
	}
	hc := c.srv.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: c.transport}
	}
	hc = &http.Client{
		Transport:     &limitTransport{base: hc.Transport, header: c.srv.Header, max: int64(c.srv.MaxMessageBytes)},
		CheckRedirect: hc.CheckRedirect,
		Jar:           hc.Jar,
		Timeout:       hc.Timeout,
	}
	t := &mcp.StreamableClientTransport{Endpoint: c.srv.URL, HTTPClient: hc, MaxRetries: 1, MaxEventSize: c.srv.MaxMessageBytes}
	cs, err := c.client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("handshake with %s: %w", redactURL(c.srv.URL), err)
	}
	return &session{cs: cs}, nil
}

// list reads every page of the server's tool list.
func (c *Client) list(ctx context.Context, s *session) ([]*chat.Tool, error) {
	var tools []*chat.Tool
	seen := map[string]bool{}
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing tools: %w", err)
		}
		if strings.TrimSpace(t.Name) == "" {
			return nil, errors.New("listing tools: a tool has no name")
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("listing tools: two tools are named %q", t.Name)
		}
		seen[t.Name] = true
		ct, err := c.tool(t)
		if err != nil {
			return nil, err
		}
		tools = append(tools, ct)
	}
	return tools, nil
}

func (c *Client) tool(t *mcp.Tool) (*chat.Tool, error) {
	name := t.Name
	if c.srv.Prefix {
		name = c.srv.Name + "__" + t.Name
	}
	ct := &chat.Tool{Name: name, Description: t.Description, Metadata: map[string]any{"mcpServer": c.srv.Name, "mcpTool": t.Name}}
	if ct.Description == "" {
		ct.Description = t.Title
	}
	var err error
	if t.InputSchema != nil {
		if ct.InputSchema, err = json.Marshal(t.InputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
		}
	}
	if t.OutputSchema != nil {
		if ct.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: output schema: %w", t.Name, err)
		}
	}
	remote := t.Name
	ct.Execute = func(ctx context.Context, args json.RawMessage) (any, error) {
		return c.Call(ctx, remote, args)
	}
	return ct, nil
}

func (c *Client) setToolsLocked(tools []*chat.Tool) {
	c.tools = tools
	close(c.changed)
	c.changed = make(chan struct{})
}

// onToolListChanged re-reads the list off the session's goroutine.
func (c *Client) onToolListChanged(_ context.Context, req *mcp.ToolListChangedRequest) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	cs := req.Session
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.srv.ConnectTimeout)
		defer cancel()
		c.mu.Lock()
		s := c.sess
		c.mu.Unlock()
		if s == nil || s.cs != cs {
			return
		}
		tools, err := c.list(ctx, s)
		if err != nil {
			c.log.Warn("mcp tool list refresh failed", "err", err)
			return
		}
		c.mu.Lock()
		if c.sess == s {
			c.setToolsLocked(tools)
		}
		c.mu.Unlock()
	}()
}

// Call calls the server's tool name (its own name, unprefixed) and maps the
// result: an isError result is an error with the server's text, structured
// content is returned as is, text alone as a string, and anything with
// media as []agui.ContentPart.
func (c *Client) Call(ctx context.Context, name string, args json.RawMessage) (any, error) {
	s, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	callCtx, cancel := context.WithTimeout(ctx, c.srv.CallTimeout)
	defer cancel()
	res, err := s.cs.CallTool(callCtx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		var rpcErr *jsonrpc.Error
		switch {
		case errors.As(err, &rpcErr):
			// The server answered with an error: the session is fine.
			return nil, fmt.Errorf("mcp server %q: tool %q: %s", c.srv.Name, name, rpcErr.Message)
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case callCtx.Err() != nil:
			c.drop(s)
			return nil, fmt.Errorf("mcp server %q: tool %q did not answer within %s (the server is restarted on the next call)", c.srv.Name, name, c.srv.CallTimeout)
		}
		c.drop(s)
		return nil, fmt.Errorf("mcp server %q: tool %q: %w (the server is restarted on the next call)", c.srv.Name, name, err)
	}
	return toolResult(res)
}

// drop ends a broken session so the next call reconnects.
func (c *Client) drop(s *session) {
	c.mu.Lock()
	if c.sess == s {
		c.sess = nil
	}
	c.mu.Unlock()
	// A broken server gets no grace.
	if err := s.close(0); err != nil {
		c.log.Debug("mcp session close", "err", err)
	}
}
