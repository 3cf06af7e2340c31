// Package ollama adapts Ollama's native /api/chat (NDJSON stream) to the
// goai engine.
//
// Why hand-written rather than github.com/ollama/ollama/api: importing it
// pulls 105 modules and it preallocates an 8 MiB scan buffer per call
// (docs/engine.md §11). The stream is one JSON object per line; the adapter
// reads lines with a lazily grown buffer and decodes the few fields it
// needs.
//
// Model options are spread at the top level of the request under Ollama's
// own keys: sampling goes in the nested "options" object
// (options.temperature, options.num_predict, options.num_ctx, ...), and
// "think", "keep_alive" sit beside it. Tool calls arrive whole (arguments
// as an object); ids are generated when Ollama sends none. Ollama says
// done_reason "stop" after tool calls, which is reported as tool_calls.
package ollama

import (
	"context"
	"encoding/json"
	"iter"
	"strconv"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/internal/jsonlex"
	"github.com/goai-sdk/goai/provider/internal/wire"
)

// Options configures the transport: base URL (default
// http://localhost:11434), API key (sent as a bearer token, for proxies
// and Ollama's hosted API), HTTP client, headers, retries.
type Options = wire.Options

// DefaultBaseURL is a local Ollama.
const DefaultBaseURL = "http://localhost:11434"

// Adapter streams turns from POST {base}/api/chat.
type Adapter struct {
	model string
	opts  *Options
}

// New returns an adapter for model. opts may be nil.
func New(model string, opts *Options) *Adapter { return &Adapter{model: model, opts: opts} }

// Name implements chat.Adapter.
func (a *Adapter) Name() string { return "ollama" }

// Model implements chat.Adapter.
func (a *Adapter) Model() string { return a.model }

// StructuredOutput implements chat.StructuredOutputAdapter with format:<schema>.
func (a *Adapter) StructuredOutput(ctx context.Context, req *chat.Request, schema json.RawMessage) (*chat.StructuredResult, error) {
	return wire.Structured(ctx, a, req, schema)
}

// Body builds the request body for req.
func (a *Adapter) Body(req *chat.Request) ([]byte, error) {
	b := wire.NewBody()
	b.Value("model", a.model)
	msgs, err := messages(req)
	if err != nil {
		return nil, err
	}
	b.Value("messages", msgs)
	if len(req.Tools) > 0 {
		b.Value("tools", wire.FunctionTools(req.Tools))
	}
	if len(req.OutputSchema) > 0 {
		b.Raw("format", req.OutputSchema)
	}
	b.Options(req.ModelOptions, "stream", "messages")
	b.Value("stream", true)
	return b.Bytes()
}

type message struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	Images    []string   `json:"images,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
	ToolName  string     `json:"tool_name,omitempty"`
}

type toolCall struct {
	Function toolFunc `json:"function"`
}

type toolFunc struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func messages(req *chat.Request) ([]message, error) {
	out := make([]message, 0, len(req.Messages)+1)
	if s := wire.SystemText(req.SystemPrompts); s != "" {
		out = append(out, message{Role: "system", Content: s})
	}
	names := map[string]string{}
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case agui.RoleUser, agui.RoleSystem, agui.RoleDeveloper:
			role := m.Role
			if role == agui.RoleDeveloper {
				role = "system"
			}
			msg := message{Role: role, Content: m.Content.String()}
			for _, p := range m.Content.PartList() {
				switch p.Type {
				case "text":
				case "image":
					if p.Source == nil {
						continue
					}
					if p.Source.Type == "url" {
						return nil, &wire.ErrUnsupported{Msg: "ollama: images must be inline base64 data"}
					}
					msg.Images = append(msg.Images, p.Source.Value)
				default:
					return nil, &wire.ErrUnsupported{Msg: "ollama: unsupported content part " + p.Type}
				}
			}
			out = append(out, msg)
		case agui.RoleAssistant:
			msg := message{Role: "assistant", Content: m.Content.String()}
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Function.Name
				msg.ToolCalls = append(msg.ToolCalls, toolCall{Function: toolFunc{Name: tc.Function.Name, Arguments: wire.ObjectOrEmpty(tc.Function.Arguments)}})
			}
			out = append(out, msg)
		case agui.RoleTool:
			out = append(out, message{Role: "tool", Content: wire.ToolResultText(m), ToolName: names[m.ToolCallID]})
		}
	}
	return out, nil
}

// ChatStream implements chat.Adapter.
func (a *Adapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return wire.Stream(ctx, &wire.Provider{Name: "ollama", Model: a.model, Options: a.opts, Framing: wire.NDJSON,
		Build: func(req *chat.Request) (*wire.Request, error) {
			body, err := a.Body(req)
			if err != nil {
				return nil, err
			}
			h := map[string][]string{}
			if k := a.opts.Key(); k != "" {
				h["Authorization"] = []string{"Bearer " + k}
			}
			return &wire.Request{URL: a.opts.Base(DefaultBaseURL) + "/api/chat", Headers: h, Body: body}, nil
		},
		Parser: func(em *wire.Emitter) wire.Parser { return newParser(em) },
	}, req)
}

// parser translates /api/chat NDJSON lines into adapter chunks.
type parser struct {
	em    *wire.Emitter
	s     jsonlex.Scanner
	calls int
	think string
}

// newParser returns a parser feeding em.
func newParser(em *wire.Emitter) *parser { return &parser{em: em} }

type call struct {
	id, name string
	args     []byte
}

// Feed handles one line.
func (p *parser) Feed(line []byte) error {
	if len(line) == 0 {
		return nil
	}
	if p.em.MessageID == "" {
		p.em.MessageID = wire.NewID("msg")
	}
	s := &p.s
	s.Reset(line)
	var content, thinking, reason, errMsg string
	var done, hasErr bool
	var prompt, eval int64
	var hasUsage bool
	var calls []call
	err := wire.Object(s, func(k []byte) error {
		var err error
		switch string(k) {
		case "message":
			err = wire.Object(s, func(k []byte) error {
				var err error
				switch string(k) {
				case "content":
					content, err = wire.Str(s)
				case "thinking":
					thinking, err = wire.Str(s)
				case "tool_calls":
					err = wire.Array(s, func(int) error {
						var c call
						err := wire.Object(s, func(k []byte) error {
							switch string(k) {
							case "id":
								var err error
								c.id, err = wire.Str(s)
								return err
							case "function":
								return wire.Object(s, func(k []byte) error {
									var err error
									switch string(k) {
									case "name":
										c.name, err = wire.Str(s)
									case "arguments":
										if s.Peek() == '"' {
											var a string
											a, err = wire.Str(s)
											c.args = []byte(a)
										} else {
											c.args, err = s.Raw()
										}
									default:
										err = wire.Skip(s)
									}
									return err
								})
							}
							return wire.Skip(s)
						})
						calls = append(calls, c)
						return err
					})
				default:
					err = wire.Skip(s)
				}
				return err
			})
		case "done":
			done, err = wire.Bool(s)
		case "done_reason":
			reason, err = wire.Str(s)
		case "prompt_eval_count":
			prompt, err = wire.Int(s)
			hasUsage = true
		case "eval_count":
			eval, err = wire.Int(s)
			hasUsage = true
		case "error":
			hasErr = true
			if s.Peek() == '"' {
				errMsg, err = wire.Str(s)
			} else {
				var raw []byte
				raw, err = s.Raw()
				errMsg = string(raw)
			}
		default:
			err = wire.Skip(s)
		}
		return err
	})
	if err != nil {
		return err
	}
	em := p.em
	if hasErr {
		em.Fail("ollama_error", errMsg, nil)
		return nil
	}
	if thinking != "" {
		if p.think == "" {
			p.think = wire.NewID("thinking")
		}
		em.Reasoning(p.think, thinking)
	}
	em.Text("", content)
	for _, c := range calls {
		id := c.id
		if id == "" || em.HasTool(id) {
			p.calls++
			id = "call_" + strconv.Itoa(p.calls) + "_" + wire.NewID("ollama")
		}
		em.ToolStart(id, c.name, em.ToolCount(), nil)
		args := "{}"
		if len(c.args) > 0 && string(c.args) != "null" {
			args = string(c.args)
		}
		em.ToolArgs(id, args)
		em.ToolEnd(id, "")
	}
	if done {
		var u *agui.TokenUsage
		if hasUsage {
			u = &agui.TokenUsage{PromptTokens: prompt, CompletionTokens: eval, TotalTokens: prompt + eval}
		}
		r := agui.FinishStop
		if reason == "length" {
			r = agui.FinishLength
		}
		em.Finish(r, u)
	}
	return nil
}

// End reports that a stream ending before its terminal event is incomplete.
func (p *parser) End() bool { return false }
