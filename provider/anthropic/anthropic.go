// Package anthropic adapts Anthropic's Messages API (streaming) to the goai
// engine.
//
// Why hand-written rather than anthropic-sdk-go/v2: the SDK brings 73
// modules, its Accumulate merged cache usage wrongly for a long time
// (docs/engine.md §11), and the adapter only needs one POST, an SSE reader
// and an accumulator of content blocks. Events are decoded with the
// repository's JSON scanner straight into AG-UI chunks.
//
// Thinking blocks become REASONING_* events bracketed by STEP_STARTED /
// STEP_FINISHED; the block's signature rides on STEP_FINISHED, so the engine
// records thinking:[{content, signature}] and the next request replays the
// signed blocks in order (unsigned ones are dropped). A redacted_thinking
// block is carried as a signature "redacted_thinking:<data>" and replayed as
// such. stop_reason max_tokens becomes RUN_ERROR code "max_tokens", as the
// reference adapter does. Model options are spread under Anthropic's keys
// (max_tokens, temperature, top_p, top_k, thinking, metadata, ...);
// max_tokens defaults to 4096 (raised above a thinking budget).
package anthropic

import (
	"context"
	"encoding/json"
	"iter"
	"strings"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/internal/jsonlex"
	"github.com/goai-sdk/goai/provider/internal/wire"
)

// Options configures the transport: base URL (default
// https://api.anthropic.com/v1), API key, HTTP client, headers, retries.
type Options = wire.Options

// DefaultBaseURL is Anthropic's API root.
const DefaultBaseURL = "https://api.anthropic.com/v1"

// Version is the anthropic-version header sent.
const Version = "2023-06-01"

// DefaultMaxTokens is max_tokens for a model MaxOutputTokens does not know.
const DefaultMaxTokens = 4096

// MaxOutputTokens is the max_tokens sent when model options do not set it:
// the model's documented output limit, so long answers and long code
// edits are not cut off (the reference does the same).
func MaxOutputTokens(model string) int64 {
	for _, m := range []struct {
		prefix string
		limit  int64
	}{
		{"claude-opus-4-5", 64000}, {"claude-opus-4", 32000}, {"claude-sonnet-4", 64000},
		{"claude-haiku-4", 64000}, {"claude-3-7-sonnet", 64000}, {"claude-3-5", 8192},
	} {
		if strings.HasPrefix(model, m.prefix) {
			return m.limit
		}
	}
	return DefaultMaxTokens
}

const redactedPrefix = "redacted_thinking:"

// maxBlocks bounds a content block index (hostile streams cannot make the
// parser allocate without limit).
const maxBlocks = 4096

// Adapter streams turns from POST {base}/messages.
type Adapter struct {
	model string
	opts  *Options
}

// New returns an adapter for model. opts may be nil.
func New(model string, opts *Options) *Adapter { return &Adapter{model: model, opts: opts} }

// Name implements chat.Adapter.
func (a *Adapter) Name() string { return "anthropic" }

// Model implements chat.Adapter.
func (a *Adapter) Model() string { return a.model }

// StructuredOutput implements chat.StructuredOutputAdapter through
// output_config.format.
func (a *Adapter) StructuredOutput(ctx context.Context, req *chat.Request, schema json.RawMessage) (*chat.StructuredResult, error) {
	return wire.Structured(ctx, a, req, schema)
}

// Body builds the request body for req.
func (a *Adapter) Body(req *chat.Request) ([]byte, error) {
	b := wire.NewBody()
	b.Value("model", a.model)
	maxTokens, ok := wire.OptionInt(req.ModelOptions, "max_tokens")
	if !ok {
		maxTokens = MaxOutputTokens(a.model)
		if th, ok := req.ModelOptions["thinking"].(map[string]any); ok {
			if budget, ok := wire.OptionInt(th, "budget_tokens"); ok && budget >= maxTokens {
				maxTokens = budget + DefaultMaxTokens
			}
		}
	}
	b.Value("max_tokens", maxTokens)
	if sys := systemBlocks(req.SystemPrompts); len(sys) > 0 {
		b.Value("system", sys)
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return nil, err
	}
	b.Value("messages", msgs)
	if len(req.Tools) > 0 {
		tools := make([]map[string]any, len(req.Tools))
		for i, t := range req.Tools {
			tool := map[string]any{"name": t.Name, "input_schema": wire.SchemaOrEmpty(t.InputSchema)}
			if t.Description != "" {
				tool["description"] = t.Description
			}
			if cc, ok := t.Metadata["cache_control"]; ok {
				tool["cache_control"] = cc
			}
			tools[i] = tool
		}
		b.Value("tools", tools)
	}
	if len(req.OutputSchema) > 0 {
		b.Value("output_config", map[string]any{"format": map[string]any{"type": "json_schema", "schema": req.OutputSchema}})
	}
	b.Options(req.ModelOptions, "stream", "messages")
	b.Value("stream", true)
	return b.Bytes()
}

func systemBlocks(ps []chat.SystemPrompt) []any {
	var out []any
	for _, p := range ps {
		if p.Content == "" {
			continue
		}
		blk := map[string]any{"type": "text", "text": p.Content}
		for _, k := range []string{"cache_control", "cacheControl"} {
			if cc, ok := p.Metadata[k]; ok {
				blk["cache_control"] = cc
			}
		}
		out = append(out, blk)
	}
	return out
}

type msg struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

func messages(in []agui.ModelMessage) ([]msg, error) {
	out := make([]msg, 0, len(in))
	add := func(role string, blocks ...any) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, msg{Role: role, Content: blocks})
	}
	for i := range in {
		m := &in[i]
		switch m.Role {
		case agui.RoleUser:
			blocks, err := userBlocks(m.Content)
			if err != nil {
				return nil, err
			}
			add("user", blocks...)
		case agui.RoleAssistant:
			var blocks []any
			for _, th := range m.Thinking {
				switch {
				case strings.HasPrefix(th.Signature, redactedPrefix):
					blocks = append(blocks, map[string]any{"type": "redacted_thinking", "data": th.Signature[len(redactedPrefix):]})
				case th.Signature != "":
					blocks = append(blocks, map[string]any{"type": "thinking", "thinking": th.Content, "signature": th.Signature})
				}
			}
			if t := m.Content.String(); t != "" {
				blocks = append(blocks, map[string]any{"type": "text", "text": t})
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name,
					"input": wire.ObjectOrEmpty(tc.Function.Arguments)})
			}
			add("assistant", blocks...)
		case agui.RoleTool:
			blk := map[string]any{"type": "tool_result", "tool_use_id": m.ToolCallID, "content": wire.ToolResultText(m)}
			if m.Error != "" {
				blk["is_error"] = true
			}
			add("user", blk)
		case agui.RoleSystem, agui.RoleDeveloper:
			add("user", map[string]any{"type": "text", "text": m.Content.String()})
		}
	}
	return out, nil
}

func userBlocks(c agui.Content) ([]any, error) {
	if !c.IsParts() {
		if s := c.String(); s != "" {
			return []any{map[string]any{"type": "text", "text": s}}, nil
		}
		return nil, nil
	}
	var out []any
	for _, p := range c.PartList() {
		switch p.Type {
		case "text":
			out = append(out, map[string]any{"type": "text", "text": p.Content})
		case "image", "document":
			if p.Source == nil {
				continue
			}
			def := "image/png"
			if p.Type == "document" {
				def = "application/pdf"
			}
			var src map[string]any
			if p.Source.Type == "url" {
				src = map[string]any{"type": "url", "url": p.Source.Value}
			} else {
				mt := p.Source.MimeType
				if mt == "" {
					mt = def
				}
				src = map[string]any{"type": "base64", "media_type": mt, "data": p.Source.Value}
			}
			out = append(out, map[string]any{"type": p.Type, "source": src})
		default:
			return nil, &wire.ErrUnsupported{Msg: "anthropic: unsupported content part " + p.Type}
		}
	}
	return out, nil
}

func errorMessage(body []byte) (string, string) { return wire.DefaultErrorMessage(body) }

// ChatStream implements chat.Adapter.
func (a *Adapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return wire.Stream(ctx, &wire.Provider{Name: "anthropic", Model: a.model, Options: a.opts,
		Build: func(req *chat.Request) (*wire.Request, error) {
			body, err := a.Body(req)
			if err != nil {
				return nil, err
			}
			h := map[string][]string{"Anthropic-Version": {Version}}
			if k := a.opts.Key(); k != "" {
				h["X-Api-Key"] = []string{k}
			}
			return &wire.Request{URL: a.opts.Base(DefaultBaseURL) + "/messages", Headers: h, Body: body, ErrorMessage: errorMessage}, nil
		},
		Parser: func(em *wire.Emitter) wire.Parser { return newParser(em) },
	}, req)
}

// parser translates Messages stream events into adapter chunks.
type parser struct {
	em     *wire.Emitter
	s      jsonlex.Scanner
	blocks []block
	usage  agui.TokenUsage
	cacheR *int64
	cacheW *int64
	stop   string
	ev     event
}

type block struct {
	typ, id, sig string
}

type event struct {
	typ       []byte
	index     int64
	cb        struct{ typ, id, name, text, data string }
	delta     struct{ typ, text, stop string }
	errType   string
	errMsg    string
	hasUsage  bool
	msgID     string
	inTok     int64
	outTok    int64
	cacheR    int64
	cacheW    int64
	hasIn     bool
	hasOut    bool
	hasCacheR bool
	hasCacheW bool
}

// newParser returns a parser feeding em.
func newParser(em *wire.Emitter) *parser {
	em.StepDeltas, em.FinalStep, em.ErrorWithoutRun = true, wire.StepBeforeEnd, true
	return &parser{em: em}
}

// Feed handles one SSE data payload.
func (p *parser) Feed(data []byte) error {
	ev := &p.ev
	*ev = event{}
	s := &p.s
	s.Reset(data)
	err := wire.Object(s, func(k []byte) error {
		var err error
		switch string(k) {
		case "type":
			ev.typ, err = s.String(nil)
		case "index":
			ev.index, err = wire.Int(s)
		case "message":
			err = wire.Object(s, func(k []byte) error {
				var err error
				switch string(k) {
				case "id":
					ev.msgID, err = wire.Str(s)
				case "usage":
					err = p.parseUsage(s, ev)
				default:
					err = wire.Skip(s)
				}
				return err
			})
		case "content_block":
			err = wire.Object(s, func(k []byte) error {
				var err error
				switch string(k) {
				case "type":
					ev.cb.typ, err = wire.Str(s)
				case "id":
					ev.cb.id, err = wire.Str(s)
				case "name":
					ev.cb.name, err = wire.Str(s)
				case "text":
					ev.cb.text, err = wire.Str(s)
				case "thinking":
					ev.cb.text, err = wire.Str(s)
				case "data":
					ev.cb.data, err = wire.Str(s)
				default:
					err = wire.Skip(s)
				}
				return err
			})
		case "delta":
			err = wire.Object(s, func(k []byte) error {
				var err error
				switch string(k) {
				case "type":
					ev.delta.typ, err = wire.Str(s)
				case "text", "partial_json", "thinking", "signature":
					ev.delta.text, err = wire.Str(s)
				case "stop_reason":
					ev.delta.stop, err = wire.Str(s)
				default:
					err = wire.Skip(s)
				}
				return err
			})
		case "usage":
			err = p.parseUsage(s, ev)
		case "error":
			err = wire.Object(s, func(k []byte) error {
				var err error
				switch string(k) {
				case "type":
					ev.errType, err = wire.Str(s)
				case "message":
					ev.errMsg, err = wire.Str(s)
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
	p.dispatch(ev)
	return nil
}

func (p *parser) parseUsage(s *jsonlex.Scanner, ev *event) error {
	ev.hasUsage = true
	return wire.Object(s, func(k []byte) error {
		var err error
		switch string(k) {
		case "input_tokens":
			ev.inTok, err = wire.Int(s)
			ev.hasIn = true
		case "output_tokens":
			ev.outTok, err = wire.Int(s)
			ev.hasOut = true
		case "cache_read_input_tokens":
			ev.cacheR, err = wire.Int(s)
			ev.hasCacheR = true
		case "cache_creation_input_tokens":
			ev.cacheW, err = wire.Int(s)
			ev.hasCacheW = true
		default:
			err = wire.Skip(s)
		}
		return err
	})
}

func (p *parser) blockAt(i int64) *block {
	if i < 0 || i >= int64(len(p.blocks)) {
		return nil
	}
	return &p.blocks[i]
}

func (p *parser) reasonID(i int64) string {
	return p.em.MessageID + "_thinking_" + itoa(i)
}

func itoa(i int64) string {
	var b [20]byte
	n := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			break
		}
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}

func (p *parser) dispatch(ev *event) {
	em := p.em
	if ev.hasUsage {
		if ev.hasIn {
			p.usage.PromptTokens = ev.inTok
		}
		if ev.hasOut {
			p.usage.CompletionTokens = ev.outTok
		}
		if ev.hasCacheR {
			p.cacheR = wire.I64(ev.cacheR)
		}
		if ev.hasCacheW {
			p.cacheW = wire.I64(ev.cacheW)
		}
	}
	switch string(ev.typ) {
	case "message_start":
		if ev.msgID != "" {
			em.MessageID = ev.msgID
		}
	case "content_block_start":
		if ev.index < 0 || ev.index > maxBlocks {
			return
		}
		for int64(len(p.blocks)) <= ev.index {
			p.blocks = append(p.blocks, block{})
		}
		b := &p.blocks[ev.index]
		b.typ = ev.cb.typ
		switch ev.cb.typ {
		case "text":
			em.Text(em.MessageID, ev.cb.text)
		case "thinking":
			em.Reasoning(p.reasonID(ev.index), ev.cb.text)
		case "redacted_thinking":
			b.sig = redactedPrefix + ev.cb.data
		case "tool_use", "server_tool_use":
			b.id = ev.cb.id
			// index is the call's ordinal in the turn, not the content block's
			em.ToolStart(ev.cb.id, ev.cb.name, em.ToolCount(), nil)
		}
	case "content_block_delta":
		b := p.blockAt(ev.index)
		if b == nil {
			return
		}
		switch ev.delta.typ {
		case "text_delta":
			em.Text(em.MessageID, ev.delta.text)
		case "input_json_delta":
			em.ToolArgs(b.id, ev.delta.text)
		case "thinking_delta":
			em.Reasoning(p.reasonID(ev.index), ev.delta.text)
		case "signature_delta":
			b.sig += ev.delta.text
		}
	case "content_block_stop":
		b := p.blockAt(ev.index)
		if b == nil {
			return
		}
		switch b.typ {
		case "text":
			em.EndText()
		case "thinking", "redacted_thinking":
			em.EndReasoningID(p.reasonID(ev.index), b.sig)
		case "tool_use", "server_tool_use":
			em.ToolEnd(b.id, "")
		}
	case "message_delta":
		if ev.delta.stop != "" {
			p.stop = ev.delta.stop
		}
	case "message_stop":
		u := p.finalUsage()
		switch p.stop {
		case "max_tokens":
			em.Fail("max_tokens", "The response was cut off because the maximum token limit (max_tokens) was reached.", u)
		case "tool_use":
			em.Finish(agui.FinishToolCalls, u)
		case "refusal":
			em.Finish(agui.FinishContentFilter, u)
		case "model_context_window_exceeded":
			em.Finish(agui.FinishLength, u)
		default:
			em.Finish(agui.FinishStop, u)
		}
	case "error":
		code := ev.errType
		if code == "" {
			code = "stream_error"
		}
		em.Fail(code, ev.errMsg, nil)
	}
}

// finalUsage reports prompt tokens including cache reads and writes
// (Anthropic's input_tokens excludes them), with the cache split in
// promptTokensDetails.
func (p *parser) finalUsage() *agui.TokenUsage {
	u := p.usage
	if p.cacheR != nil {
		u.PromptTokens += *p.cacheR
	}
	if p.cacheW != nil {
		u.PromptTokens += *p.cacheW
	}
	// Zero cache counts are omitted, as the reference does.
	cr, cw := nonZero(p.cacheR), nonZero(p.cacheW)
	if cr != nil || cw != nil {
		u.PromptTokensDetails = &agui.PromptTokensDetails{CachedTokens: cr, CacheWriteTokens: cw}
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &u
}

// End reports that a stream ending before its terminal event is incomplete.
func (p *parser) End() bool { return false }

func nonZero(v *int64) *int64 {
	if v == nil || *v == 0 {
		return nil
	}
	return v
}
