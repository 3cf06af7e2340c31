// Package mcpserver serves chat tools over MCP, on Streamable HTTP or
// stdio, and runs the tool bridge: a run's tools offered to a coding agent
// in a sandbox as the MCP server "tanstack", behind a bearer token.
package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CallFunc runs the tool named name with the model's arguments.
type CallFunc func(ctx context.Context, name string, args json.RawMessage) (any, error)

// Options configure a server.
type Options struct {
	// Name and Version are the serverInfo; "goai" and "1.0.0" by default.
	Name    string
	Version string
	// Call runs a tool; nil runs the tool's own Execute. The bridge sets it
	// to the run's chat.ToolRunner so calls take the engine's tool path.
	Call   CallFunc
	Logger *slog.Logger
}

// New returns an MCP server offering tools, each call running the tool's
// own Execute. A tool whose input schema is not an object schema is offered
// with an empty object schema; a string result is sent as is, multimodal
// parts as MCP content blocks, anything else as JSON text; a failing tool
// answers isError with "Tool execution failed: <msg>"; an unknown tool is a
// JSON-RPC error "Unknown tool: <name>".
//
// A call that needs approval (NeedsApproval, NeedsApprovalFor) is put to
// the client's user through MCP elicitation and runs only if accepted; a
// client without elicitation gets an isError answer saying so.
func New(tools []*chat.Tool, opts Options) (*mcp.Server, error) {
	specs := make([]chat.ToolSpec, 0, len(tools))
	byName := make(map[string]*chat.Tool, len(tools))
	for _, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("mcpserver: nil tool")
		}
		if _, dup := byName[t.Name]; dup {
			return nil, fmt.Errorf("mcpserver: two tools are named %q", t.Name)
		}
		byName[t.Name] = t
		specs = append(specs, chat.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	if opts.Call == nil {
		opts.Call = func(ctx context.Context, name string, args json.RawMessage) (any, error) {
			t := byName[name]
			if t.Execute == nil {
				return nil, fmt.Errorf("%s is a client tool: only the chat client can run it", name)
			}
			return t.Execute(ctx, args)
		}
	}
	needs := func(name string, args json.RawMessage) bool {
		t := byName[name]
		return t != nil && (t.NeedsApproval || (t.NeedsApprovalFor != nil && t.NeedsApprovalFor(args)))
	}
	return newServer(specs, opts, needs)
}

// NewFromSpecs is New for tools known by their specs (what an adapter sees
// in chat.Request.Tools), run by opts.Call, which is required.
func NewFromSpecs(specs []chat.ToolSpec, opts Options) (*mcp.Server, error) {
	return newServer(specs, opts, nil)
}

// approvalRequest is the id of the input request that asks for approval.
const approvalRequest = "approval"

func newServer(specs []chat.ToolSpec, opts Options, needsApproval func(name string, args json.RawMessage) bool) (*mcp.Server, error) {
	if opts.Call == nil {
		return nil, fmt.Errorf("mcpserver: Options.Call is required with tool specs")
	}
	if opts.Name == "" {
		opts.Name = "goai"
	}
	if opts.Version == "" {
		opts.Version = "1.0.0"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{Logger: log})
	known := make(map[string]bool, len(specs))
	for _, s := range specs {
		if known[s.Name] {
			return nil, fmt.Errorf("mcpserver: two tools are named %q", s.Name)
		}
		known[s.Name] = true
		name, call := s.Name, opts.Call
		srv.AddTool(&mcp.Tool{Name: s.Name, Description: s.Description, InputSchema: objectSchema(s.InputSchema)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				args := req.Params.Arguments
				if needsApproval != nil && needsApproval(name, args) {
					if res := approve(req, name); res != nil {
						return res, nil
					}
				}
				return callTool(ctx, call, name, args), nil
			})
	}
	srv.AddReceivingMiddleware(unknownTool(known))
	return srv, nil
}

// approve puts a call to the client's user through elicitation (a
// multi-round-trip input request, which the SDK turns into a plain
// elicitation request for clients of older protocol versions). It returns
// nil once the user accepted, else the result to answer with.
func approve(req *mcp.CallToolRequest, name string) *mcp.CallToolResult {
	if p := req.Session.InitializeParams(); p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return failed(fmt.Errorf("%s needs approval, and this MCP client cannot be asked (it does not support elicitation); allow the call in the server's policy", name))
	}
	resp, ok := req.Params.InputResponses[approvalRequest]
	if !ok {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{approvalRequest: &mcp.ElicitParams{
			Message:         fmt.Sprintf("Allow %s with %s?", name, req.Params.Arguments),
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
		}}}
	}
	if er, _ := resp.(*mcp.ElicitResult); er == nil || er.Action != "accept" {
		return failed(errors.New("User declined tool execution"))
	}
	return nil
}

// unknownTool answers a call to a tool that is not offered with the error
// text clients of the bridge expect.
func unknownTool(known map[string]bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil && !known[r.Params.Name] {
				return nil, fmt.Errorf("Unknown tool: %s", r.Params.Name)
			}
			return next(ctx, method, req)
		}
	}
}

// callTool runs one call and renders its result; a panic is a failed call.
func callTool(ctx context.Context, call CallFunc, name string, args json.RawMessage) (res *mcp.CallToolResult) {
	defer func() {
		if p := recover(); p != nil {
			res = failed(fmt.Errorf("tool %s panicked: %v", name, p))
		}
	}()
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	v, err := call(ctx, name, args)
	if err != nil {
		return failed(err)
	}
	return &mcp.CallToolResult{Content: content(v)}
}

func failed(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "Tool execution failed: " + err.Error()}}}
}

// content renders a tool's result as MCP content blocks.
func content(v any) []mcp.Content {
	switch x := v.(type) {
	case string:
		return []mcp.Content{&mcp.TextContent{Text: x}}
	case []agui.ContentPart:
		if cs, ok := partsContent(x); ok {
			return cs
		}
	}
	b, err := agui.Marshal(v)
	if err != nil {
		return []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(v)}}
	}
	return []mcp.Content{&mcp.TextContent{Text: string(b)}}
}

// partsContent maps text parts and inline media; a part it cannot map
// (a URL source, a video) makes the whole result JSON text instead.
func partsContent(parts []agui.ContentPart) ([]mcp.Content, bool) {
	out := make([]mcp.Content, 0, len(parts))
	for _, p := range parts {
		if p.Type == "text" {
			out = append(out, &mcp.TextContent{Text: p.Content})
			continue
		}
		if p.Source == nil || p.Source.Type != "data" {
			return nil, false
		}
		data, err := base64.StdEncoding.DecodeString(p.Source.Value)
		if err != nil {
			return nil, false
		}
		switch p.Type {
		case "image":
			out = append(out, &mcp.ImageContent{Data: data, MIMEType: p.Source.MimeType})
		case "audio":
			out = append(out, &mcp.AudioContent{Data: data, MIMEType: p.Source.MimeType})
		default:
			return nil, false
		}
	}
	return out, true
}

// objectSchema passes an object schema through and replaces anything else
// (absent, malformed, another type) with an empty object schema.
func objectSchema(raw json.RawMessage) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil && m["type"] == "object" {
		return raw
	}
	return json.RawMessage(`{"type":"object","properties":{}}`)
}

// HTTPHandler serves srv over Streamable HTTP.
func HTTPHandler(srv *mcp.Server, log *slog.Logger) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Logger: log})
}

// ServeStdio serves srv on the process's stdin and stdout until ctx ends or
// the client closes stdin.
func ServeStdio(ctx context.Context, srv *mcp.Server) error {
	return srv.Run(ctx, &mcp.StdioTransport{})
}
