package openai

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

// Chat streams turns from POST {base}/chat/completions.
type Chat struct {
	name  string
	model string
	opts  *Options
	// NoStreamOptions leaves out stream_options.include_usage, for servers
	// that reject the key.
	NoStreamOptions bool
}

// NewChat returns a Chat Completions adapter for model. opts may be nil.
func NewChat(model string, opts *Options) *Chat {
	return &Chat{name: "openai-chat", model: model, opts: opts}
}

// NewChatNamed is NewChat reporting another provider name (compatible servers).
func NewChatNamed(name, model string, opts *Options) *Chat {
	return &Chat{name: name, model: model, opts: opts}
}

// Name implements chat.Adapter.
func (a *Chat) Name() string { return a.name }

// Model implements chat.Adapter.
func (a *Chat) Model() string { return a.model }

// StructuredOutput implements chat.StructuredOutputAdapter with a strict
// json_schema response_format.
func (a *Chat) StructuredOutput(ctx context.Context, req *chat.Request, schema json.RawMessage) (*chat.StructuredResult, error) {
	return wire.Structured(ctx, a, req, schema)
}

// ChatBody builds the request body for req.
func (a *Chat) ChatBody(req *chat.Request) ([]byte, error) {
	b := wire.NewBody()
	b.Value("model", a.model)
	msgs, err := chatMessages(req)
	if err != nil {
		return nil, err
	}
	b.Value("messages", msgs)
	if len(req.Tools) > 0 {
		tools := make([]map[string]any, len(req.Tools))
		for i, t := range req.Tools {
			tools[i] = map[string]any{"type": "function", "function": map[string]any{"name": t.Name,
				"description": t.Description, "parameters": chat.StrictSchema(wire.SchemaOrEmpty(t.InputSchema)), "strict": true}}
		}
		b.Value("tools", tools)
	}
	if len(req.OutputSchema) > 0 {
		b.Value("response_format", map[string]any{"type": "json_schema", "json_schema": map[string]any{
			"name": "structured_output", "schema": req.OutputSchema, "strict": true}})
	}
	b.Options(req.ModelOptions, "stream", "messages")
	b.Value("stream", true)
	if !a.NoStreamOptions && !b.Has("stream_options") {
		b.Value("stream_options", map[string]any{"include_usage": true})
	}
	return b.Bytes()
}

func chatMessages(req *chat.Request) ([]any, error) {
	out := make([]any, 0, len(req.Messages)+len(req.SystemPrompts))
	for _, p := range req.SystemPrompts {
		if p.Content != "" {
			out = append(out, map[string]any{"role": "system", "content": p.Content})
		}
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case agui.RoleUser:
			c, err := chatUserContent(m.Content)
			if err != nil {
				return nil, err
			}
			out = append(out, map[string]any{"role": "user", "content": c})
		case agui.RoleSystem, agui.RoleDeveloper:
			out = append(out, map[string]any{"role": m.Role, "content": m.Content.String()})
		case agui.RoleAssistant:
			msg := map[string]any{"role": "assistant"}
			if t := m.Content.String(); t != "" {
				msg["content"] = t
			} else {
				msg["content"] = nil
			}
			if len(m.ToolCalls) > 0 {
				calls := make([]any, len(m.ToolCalls))
				for j, tc := range m.ToolCalls {
					args := tc.Function.Arguments
					if args == "" {
						args = "{}"
					}
					calls[j] = map[string]any{"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Function.Name, "arguments": args}}
				}
				msg["tool_calls"] = calls
			}
			out = append(out, msg)
		case agui.RoleTool:
			out = append(out, map[string]any{"role": "tool", "tool_call_id": m.ToolCallID, "content": wire.ToolResultText(m)})
		}
	}
	return out, nil
}

func chatUserContent(c agui.Content) (any, error) {
	if !c.IsParts() {
		return c.String(), nil
	}
	parts := make([]any, 0, len(c.PartList()))
	for _, p := range c.PartList() {
		switch p.Type {
		case "text":
			parts = append(parts, map[string]any{"type": "text", "text": p.Content})
		case "image":
			if p.Source != nil {
				parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": wire.MediaValue(p.Source, "image/png")}})
			}
		case "audio":
			a, err := audioPart(p)
			if err != nil {
				return nil, err
			}
			if a != nil {
				parts = append(parts, a)
			}
		case "document":
			if p.Source == nil {
				continue
			}
			if p.Source.Type == "url" {
				return nil, &wire.ErrUnsupported{Msg: "openai chat completions: documents must be inline base64 data"}
			}
			parts = append(parts, map[string]any{"type": "file", "file": map[string]any{"filename": fileName(p), "file_data": wire.DataURL(p.Source, "application/pdf")}})
		default:
			return nil, &wire.ErrUnsupported{Msg: "openai: unsupported content part " + p.Type}
		}
	}
	return parts, nil
}

// ChatStream implements chat.Adapter.
func (a *Chat) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return withoutStrictNulls(req, wire.Stream(ctx, &wire.Provider{Name: "openai", Model: a.model, Options: a.opts,
		Build: func(req *chat.Request) (*wire.Request, error) {
			body, err := a.ChatBody(req)
			if err != nil {
				return nil, err
			}
			return &wire.Request{URL: a.opts.Base(DefaultBaseURL) + "/chat/completions", Headers: authHeaders(a.opts), Body: body}, nil
		},
		Parser: func(em *wire.Emitter) wire.Parser { return newChatParser(em) },
	}, req))
}

// chatParser translates Chat Completions chunks into adapter chunks. It
// tolerates what compatible servers do: no usage, tool-call ids missing
// or reused, arguments sent whole, several calls on one index, reasoning
// as reasoning_content or reasoning.
type chatParser struct {
	em      *wire.Emitter
	s       jsonlex.Scanner
	slots   []chatSlot
	finish  string
	usage   *agui.TokenUsage
	gotID   bool
	refusal bool
	nextKey int
	tds     []chatToolDelta
}

type chatSlot struct {
	pos     int // order of appearance: the index reported (unique per turn)
	index   int64
	id      string
	name    string
	pending []byte // arguments before the name arrived
	started bool
}

// newChatParser returns a parser feeding em.
func newChatParser(em *wire.Emitter) *chatParser { return &chatParser{em: em} }

type chatDelta struct {
	content, reasoning, refusal string
	finish                      string
	index                       int64
}

type chatToolDelta struct {
	index    int64
	hasIndex bool
	id       string
	name     string
	args     string
}

// Feed handles one SSE data payload; "[DONE]" finishes the turn.
func (p *chatParser) Feed(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if string(data) == "[DONE]" {
		p.finishTurn()
		return nil
	}
	s := &p.s
	s.Reset(data)
	var errCode, errMsg string
	hasErr := false
	err := wire.Object(s, func(k []byte) error {
		switch string(k) {
		case "id":
			if p.gotID {
				return wire.Skip(s)
			}
			id, err := wire.Str(s)
			if id != "" && p.em.MessageID == "" {
				p.em.MessageID = id
			}
			p.gotID = true
			return err
		case "model":
			if p.em.WantsModel() {
				m, err := wire.Str(s)
				p.em.SetModel(m)
				return err
			}
		case "choices":
			return wire.Array(s, func(int) error { return p.choice(s) })
		case "usage":
			u, err := parseChatUsage(s)
			if u != nil {
				p.usage = u
			}
			return err
		case "error":
			hasErr = true
			if s.Peek() == '"' {
				var err error
				errMsg, err = wire.Str(s)
				return err
			}
			return wire.Object(s, func(k []byte) error {
				var err error
				switch string(k) {
				case "message":
					errMsg, err = wire.Str(s)
				case "code", "type":
					if s.Peek() == '"' {
						var c string
						c, err = wire.Str(s)
						if errCode == "" || string(k) == "code" {
							errCode = c
						}
					} else if c, e := s.Raw(); e == nil && string(c) != "null" {
						errCode = string(c)
					} else {
						err = e
					}
				default:
					err = wire.Skip(s)
				}
				return err
			})
		}
		return wire.Skip(s)
	})
	if err != nil {
		return err
	}
	if hasErr {
		if errCode == "" {
			errCode = "stream_error"
		}
		p.em.Fail(errCode, errMsg, p.usage)
	}
	return nil
}

func (p *chatParser) choice(s *jsonlex.Scanner) error {
	var d chatDelta
	p.tds = p.tds[:0]
	err := wire.Object(s, func(k []byte) error {
		var err error
		switch string(k) {
		case "index":
			d.index, err = wire.Int(s)
		case "delta", "message":
			err = wire.Object(s, func(k []byte) error {
				var err error
				switch string(k) {
				case "content":
					d.content, err = wire.Str(s)
				case "reasoning_content", "reasoning":
					if s.Peek() == '"' || s.Peek() == 'n' {
						var r string
						r, err = wire.Str(s)
						if d.reasoning == "" {
							d.reasoning = r
						}
					} else {
						err = wire.Skip(s)
					}
				case "refusal":
					d.refusal, err = wire.Str(s)
				case "tool_calls":
					err = wire.Array(s, func(int) error { return p.toolDelta(s, &d) })
				default:
					err = wire.Skip(s)
				}
				return err
			})
		case "finish_reason":
			d.finish, err = wire.Str(s)
		default:
			err = wire.Skip(s)
		}
		return err
	})
	if err != nil {
		return err
	}
	if d.index != 0 {
		return nil // only the first choice is followed (n > 1 is not supported)
	}
	for i := range p.tds {
		p.applyTool(&p.tds[i])
	}
	em := p.em
	if d.reasoning != "" {
		em.Reasoning("", d.reasoning)
	}
	if d.content != "" {
		em.Text("", d.content)
	}
	if d.refusal != "" {
		p.refusal = true
		em.Text("", d.refusal)
	}
	if d.finish != "" {
		p.finish = d.finish
		p.flushTools()
	}
	return nil
}

func (p *chatParser) toolDelta(s *jsonlex.Scanner, d *chatDelta) error {
	var t chatToolDelta
	err := wire.Object(s, func(k []byte) error {
		var err error
		switch string(k) {
		case "index":
			t.index, err = wire.Int(s)
			t.hasIndex = true
		case "id":
			t.id, err = wire.Str(s)
		case "function":
			err = wire.Object(s, func(k []byte) error {
				var err error
				switch string(k) {
				case "name":
					t.name, err = wire.Str(s)
				case "arguments":
					if s.Peek() == '{' || s.Peek() == '[' {
						var raw []byte
						raw, err = s.Raw() // arguments sent as an object
						t.args = string(raw)
					} else {
						t.args, err = wire.Str(s)
					}
				default:
					err = wire.Skip(s)
				}
				return err
			})
		default:
			err = wire.Skip(s)
		}
		return err
	})
	if err != nil {
		return err
	}
	p.tds = append(p.tds, t)
	return nil
}

func (p *chatParser) slotFor(t *chatToolDelta) *chatSlot {
	// Find the slot this delta continues.
	if t.hasIndex {
		for i := len(p.slots) - 1; i >= 0; i-- {
			sl := &p.slots[i]
			if sl.index != t.index {
				continue
			}
			// Same index but a different id and a new name: a server that
			// puts several calls on one index.
			if t.id != "" && sl.id != "" && t.id != sl.id && t.name != "" {
				break
			}
			return sl
		}
	} else if t.id != "" {
		for i := range p.slots {
			if p.slots[i].id == t.id {
				return &p.slots[i]
			}
		}
	} else if len(p.slots) > 0 && t.name == "" {
		return &p.slots[len(p.slots)-1]
	}
	idx := t.index
	if !t.hasIndex {
		idx = int64(len(p.slots))
	}
	p.slots = append(p.slots, chatSlot{pos: len(p.slots), index: idx})
	return &p.slots[len(p.slots)-1]
}

func (p *chatParser) applyTool(t *chatToolDelta) {
	sl := p.slotFor(t)
	if sl.id == "" && t.id != "" {
		sl.id = p.uniqueID(t.id, sl)
	}
	if sl.name == "" && t.name != "" {
		sl.name = t.name
	}
	if !sl.started {
		if sl.name == "" {
			sl.pending = append(sl.pending, t.args...)
			return
		}
		if sl.id == "" {
			p.nextKey++
			sl.id = "call_" + strconv.Itoa(p.nextKey) + "_" + wire.NewID("gen")
		}
		sl.started = true
		p.em.ToolStart(sl.id, sl.name, sl.pos, nil)
		if len(sl.pending) > 0 {
			p.em.ToolArgs(sl.id, string(sl.pending))
			sl.pending = nil
		}
	}
	p.em.ToolArgs(sl.id, t.args)
}

// uniqueID returns id, or a suffixed one when another call already uses it.
func (p *chatParser) uniqueID(id string, self *chatSlot) string {
	n := 0
	cand := id
	for {
		clash := false
		for i := range p.slots {
			if &p.slots[i] != self && p.slots[i].id == cand {
				clash = true
				break
			}
		}
		if !clash {
			return cand
		}
		n++
		cand = id + "_" + strconv.Itoa(n)
	}
}

func (p *chatParser) flushTools() {
	for i := range p.slots {
		sl := &p.slots[i]
		if !sl.started && sl.name == "" {
			continue // never named: nothing to call
		}
		if !sl.started {
			p.applyTool(&chatToolDelta{index: sl.index, hasIndex: true})
		}
		p.em.ToolEnd(sl.id, "")
	}
}

// End finishes a stream that ended without "[DONE]": compatible servers
// that stop after the finish reason.
func (p *chatParser) End() bool {
	if p.finish == "" {
		return false
	}
	p.finishTurn()
	return true
}

// finishTurn ends the turn ([DONE], or the end of a stream that gave a
// finish reason).
func (p *chatParser) finishTurn() {
	if p.em.Done() {
		return
	}
	p.flushTools()
	reason := agui.FinishStop
	switch p.finish {
	case "length":
		reason = agui.FinishLength
	case "content_filter":
		reason = agui.FinishContentFilter
	case "tool_calls", "function_call":
		reason = agui.FinishToolCalls
	default:
		if p.refusal && !p.em.ToolEnded() {
			reason = agui.FinishContentFilter
		}
	}
	p.em.Finish(reason, p.usage)
}

func parseChatUsage(s *jsonlex.Scanner) (*agui.TokenUsage, error) {
	return parseUsage(s, chatUsageKeys)
}

// SupportsCombinedToolsAndSchema reports that Chat Completions takes tools
// and a strict json_schema response format in one request.
func (a *Chat) SupportsCombinedToolsAndSchema(map[string]any) bool { return true }

// CombinedStructuredOutputSource is "text": the final turn's text is the
// JSON answer.
func (a *Chat) CombinedStructuredOutputSource(map[string]any) string { return "text" }
