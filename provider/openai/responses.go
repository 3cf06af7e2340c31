package openai

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

// Responses streams turns from POST {base}/responses.
type Responses struct {
	model string
	opts  *Options
}

// NewResponses returns a Responses API adapter for model. opts may be nil.
func NewResponses(model string, opts *Options) *Responses {
	return &Responses{model: model, opts: opts}
}

// Name implements chat.Adapter.
func (a *Responses) Name() string { return "openai" }

// Model implements chat.Adapter.
func (a *Responses) Model() string { return a.model }

// StructuredOutput implements chat.StructuredOutputAdapter with a strict
// json_schema text format.
func (a *Responses) StructuredOutput(ctx context.Context, req *chat.Request, schema json.RawMessage) (*chat.StructuredResult, error) {
	return wire.Structured(ctx, a, req, schema)
}

// ResponsesBody builds the request body for req (exported for tests and the
// mock server's documentation).
func (a *Responses) ResponsesBody(req *chat.Request) ([]byte, error) {
	b := wire.NewBody()
	b.Value("model", a.model)
	if s := wire.SystemText(req.SystemPrompts); s != "" {
		b.Value("instructions", s)
	}
	input, err := responsesInput(req.Messages)
	if err != nil {
		return nil, err
	}
	b.Value("input", input)
	if len(req.Tools) > 0 {
		tools := make([]map[string]any, len(req.Tools))
		for i, t := range req.Tools {
			tools[i] = map[string]any{"type": "function", "name": t.Name, "description": t.Description,
				"parameters": chat.StrictSchema(wire.SchemaOrEmpty(t.InputSchema)), "strict": true}
		}
		b.Value("tools", tools)
	}
	if len(req.OutputSchema) > 0 {
		b.Value("text", map[string]any{"format": map[string]any{"type": "json_schema", "name": "structured_output",
			"schema": req.OutputSchema, "strict": true}})
	}
	b.Options(req.ModelOptions, "stream", "input")
	if _, ok := req.ModelOptions["reasoning"]; (ok || reasoningModel(a.model)) && !b.Has("include") {
		b.Value("include", []string{"reasoning.encrypted_content"})
	}
	b.Value("stream", true)
	return b.Bytes()
}

func responsesInput(msgs []agui.ModelMessage) ([]any, error) {
	out := make([]any, 0, len(msgs)+4)
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case agui.RoleUser:
			c, err := responsesUserContent(m.Content)
			if err != nil {
				return nil, err
			}
			if text, ok := c.(string); ok {
				c = []any{map[string]any{"type": "input_text", "text": text}}
			}
			out = append(out, map[string]any{"type": "message", "role": "user", "content": c})
		case agui.RoleSystem, agui.RoleDeveloper:
			out = append(out, map[string]any{"role": m.Role, "content": m.Content.String()})
		case agui.RoleAssistant:
			for _, th := range m.Thinking {
				if th.Signature == "" {
					continue // unsigned reasoning is not sent back
				}
				summary := []any{}
				if th.Content != "" {
					summary = append(summary, map[string]any{"type": "summary_text", "text": th.Content})
				}
				item := map[string]any{"type": "reasoning", "summary": summary}
				if id, enc, ok := unpackReasoning(th.Signature); ok {
					item["id"], item["encrypted_content"] = id, enc
				} else {
					item["encrypted_content"] = th.Signature
				}
				out = append(out, item)
			}
			for _, tc := range m.ToolCalls {
				args := tc.Function.Arguments
				if args == "" {
					args = "{}"
				}
				out = append(out, map[string]any{"type": "function_call", "call_id": tc.ID, "name": tc.Function.Name, "arguments": args})
			}
			// The reference sends the assistant's text after its calls.
			if t := m.Content.String(); t != "" {
				out = append(out, map[string]any{"type": "message", "role": "assistant", "content": t})
			}
		case agui.RoleTool:
			out = append(out, map[string]any{"type": "function_call_output", "call_id": m.ToolCallID, "output": wire.ToolResultText(m)})
		}
	}
	return out, nil
}

func responsesUserContent(c agui.Content) (any, error) {
	if !c.IsParts() {
		return c.String(), nil
	}
	parts := make([]any, 0, len(c.PartList()))
	for _, p := range c.PartList() {
		switch p.Type {
		case "text":
			parts = append(parts, map[string]any{"type": "input_text", "text": p.Content})
		case "image":
			if p.Source == nil {
				continue
			}
			parts = append(parts, map[string]any{"type": "input_image", "image_url": wire.MediaValue(p.Source, "image/png"), "detail": "auto"})
		case "document":
			if p.Source == nil {
				continue
			}
			if p.Source.Type == "url" {
				parts = append(parts, map[string]any{"type": "input_file", "file_url": p.Source.Value})
			} else {
				parts = append(parts, map[string]any{"type": "input_file", "filename": fileName(p), "file_data": wire.DataURL(p.Source, "application/pdf")})
			}
		case "audio":
			a, err := audioPart(p)
			if err != nil {
				return nil, err
			}
			if a != nil {
				parts = append(parts, a)
			}
		default:
			return nil, &wire.ErrUnsupported{Msg: "openai: unsupported content part " + p.Type}
		}
	}
	return parts, nil
}

// audioPart is an audio part as both APIs take it (inline data only); nil
// for a part without a source.
func audioPart(p agui.ContentPart) (map[string]any, error) {
	if p.Source == nil {
		return nil, nil
	}
	if p.Source.Type == "url" {
		return nil, &wire.ErrUnsupported{Msg: "openai: audio parts must be inline base64 data"}
	}
	return map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": p.Source.Value, "format": audioFormat(p.Source.MimeType)}}, nil
}

func fileName(p agui.ContentPart) string {
	if n, ok := p.Metadata["filename"].(string); ok && n != "" {
		return n
	}
	return "document.pdf"
}

func audioFormat(mime string) string {
	switch mime {
	case "audio/mpeg", "audio/mp3":
		return "mp3"
	}
	return "wav"
}

// ChatStream implements chat.Adapter.
func (a *Responses) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return withoutStrictNulls(req, wire.Stream(ctx, &wire.Provider{Name: "openai", Model: a.model, Options: a.opts, EagerStart: true,
		Build: func(req *chat.Request) (*wire.Request, error) {
			body, err := a.ResponsesBody(req)
			if err != nil {
				return nil, err
			}
			return &wire.Request{URL: a.opts.Base(DefaultBaseURL) + "/responses", Headers: authHeaders(a.opts), Body: body}, nil
		},
		Parser: func(em *wire.Emitter) wire.Parser { return newResponsesParser(em) },
	}, req))
}

// responsesParser translates Responses stream events (the SSE data
// payloads) into adapter chunks.
type responsesParser struct {
	lastItem   string
	reasonItem string // the reasoning item being streamed and its message id
	reasonMsg  string
	em         *wire.Emitter
	ev         respEvent
	calls      []respCall
	summary    []summaryIdx
	refusal    bool
	s          jsonlex.Scanner
}

type respCall struct{ itemID, callID, name string }

type summaryIdx struct {
	itemID string
	idx    int64
}

// newResponsesParser returns a parser feeding em.
func newResponsesParser(em *wire.Emitter) *responsesParser {
	em.ErrorWithoutRun = true
	return &responsesParser{em: em}
}

type respItem struct {
	typ, id, callID, name, arguments, encrypted string
}

type respEvent struct {
	typ          []byte
	itemID       []byte
	delta        string
	outputIndex  int64
	summaryIndex int64
	arguments    string
	item         respItem
	hasItem      bool
	code, msg    string
	// response object
	status, incomplete string
	errCode, errMsg    string
	usage              *agui.TokenUsage
	typBuf             []byte
	idBuf              []byte
}

// item returns itemID as a string, reusing the last one: every delta of
// an item repeats its id.
func (p *responsesParser) item(itemID []byte) string {
	if string(itemID) != p.lastItem {
		p.lastItem = string(itemID)
	}
	return p.lastItem
}

func (p *responsesParser) callFor(itemID []byte) string {
	for i := range p.calls {
		if p.calls[i].itemID == string(itemID) {
			return p.calls[i].callID
		}
	}
	return ""
}

// Feed handles one event payload.
func (p *responsesParser) Feed(data []byte) error {
	if len(data) == 0 || string(data) == "[DONE]" {
		return nil
	}
	ev := &p.ev
	*ev = respEvent{typBuf: ev.typBuf[:0], idBuf: ev.idBuf[:0]}
	s := &p.s
	s.Reset(data)
	err := wire.Object(s, func(k []byte) error {
		var err error
		switch string(k) {
		case "type":
			var b []byte
			b, err = s.String(ev.typBuf)
			ev.typ = b
		case "item_id":
			var b []byte
			b, err = s.String(ev.idBuf)
			ev.itemID = b
		case "delta":
			ev.delta, err = wire.Str(s)
		case "output_index":
			ev.outputIndex, err = wire.Int(s)
		case "summary_index":
			ev.summaryIndex, err = wire.Int(s)
		case "arguments":
			ev.arguments, err = wire.Str(s)
		case "item":
			ev.hasItem = true
			err = p.parseItem(s, &ev.item)
		case "response":
			err = parseRespObject(s, ev, p.em)
		case "code":
			if s.Peek() == '"' {
				ev.code, err = wire.Str(s)
			} else {
				err = wire.Skip(s)
			}
		case "message":
			ev.msg, err = wire.Str(s)
		default:
			err = wire.Skip(s)
		}
		return err
	})
	if err != nil {
		return err
	}
	return p.dispatch(ev)
}

// parseItem decodes an output item. Its strings mostly repeat what the
// turn already holds (the done event repeats the added one), so known
// values are reused instead of allocated again.
func (p *responsesParser) parseItem(s *jsonlex.Scanner, it *respItem) error {
	return wire.Object(s, func(k []byte) error {
		var err error
		switch string(k) {
		case "type":
			var b []byte
			b, err = s.String(nil)
			switch string(b) {
			case "function_call":
				it.typ = "function_call"
			case "reasoning":
				it.typ = "reasoning"
			case "message":
				it.typ = "message"
			default:
				it.typ = string(b)
			}
		case "id":
			var b []byte
			b, err = s.String(nil)
			it.id = p.item(b)
		case "call_id", "name":
			var b []byte
			b, err = s.String(nil)
			v := p.known(b)
			if string(k) == "name" {
				it.name = v
			} else {
				it.callID = v
			}
		case "arguments":
			it.arguments, err = wire.Str(s)
		case "encrypted_content":
			it.encrypted, err = wire.Str(s)
		default:
			err = wire.Skip(s)
		}
		return err
	})
}

// known returns b as a string, reusing a call id or name the turn has.
func (p *responsesParser) known(b []byte) string {
	for i := range p.calls {
		if p.calls[i].callID == string(b) {
			return p.calls[i].callID
		}
		if p.calls[i].name == string(b) {
			return p.calls[i].name
		}
	}
	return string(b)
}

func parseRespObject(s *jsonlex.Scanner, ev *respEvent, em *wire.Emitter) error {
	return wire.Object(s, func(k []byte) error {
		var err error
		switch string(k) {
		case "id":
			// The response id parents the turn's tool calls.
			if em.MessageID != "" {
				return wire.Skip(s)
			}
			em.MessageID, err = wire.Str(s)
		case "model":
			if !em.WantsModel() {
				return wire.Skip(s)
			}
			var m string
			m, err = wire.Str(s)
			em.SetModel(m)
		case "status":
			ev.status, err = wire.Str(s)
		case "incomplete_details":
			err = wire.Object(s, func(k []byte) error {
				if string(k) == "reason" {
					var e error
					ev.incomplete, e = wire.Str(s)
					return e
				}
				return wire.Skip(s)
			})
		case "error":
			err = wire.Object(s, func(k []byte) error {
				var e error
				switch string(k) {
				case "code":
					if s.Peek() == '"' {
						ev.errCode, e = wire.Str(s)
					} else {
						e = wire.Skip(s)
					}
				case "message":
					ev.errMsg, e = wire.Str(s)
				default:
					e = wire.Skip(s)
				}
				return e
			})
		case "usage":
			ev.usage, err = parseRespUsage(s)
		default:
			err = wire.Skip(s)
		}
		return err
	})
}

// usageKeys names the usage fields of one OpenAI API.
type usageKeys struct{ in, out, inDetails, outDetails string }

var (
	respUsageKeys = usageKeys{"input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details"}
	chatUsageKeys = usageKeys{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"}
)

func parseRespUsage(s *jsonlex.Scanner) (*agui.TokenUsage, error) {
	return parseUsage(s, respUsageKeys)
}

// parseUsage reads an OpenAI usage object (either API's field names).
func parseUsage(s *jsonlex.Scanner, keys usageKeys) (*agui.TokenUsage, error) {
	if s.IsNull() {
		return nil, nil
	}
	u := &agui.TokenUsage{}
	err := wire.Object(s, func(k []byte) error {
		var err error
		switch string(k) {
		case keys.in:
			u.PromptTokens, err = wire.Int(s)
		case keys.out:
			u.CompletionTokens, err = wire.Int(s)
		case "total_tokens":
			u.TotalTokens, err = wire.Int(s)
		case keys.inDetails:
			err = wire.Object(s, func(k []byte) error {
				if string(k) == "cached_tokens" {
					v, e := wire.Int(s)
					if v > 0 { // zero details are omitted, as the reference does
						u.PromptTokensDetails = &agui.PromptTokensDetails{CachedTokens: wire.I64(v)}
					}
					return e
				}
				return wire.Skip(s)
			})
		case keys.outDetails:
			err = wire.Object(s, func(k []byte) error {
				if string(k) == "reasoning_tokens" {
					v, e := wire.Int(s)
					if v > 0 {
						u.CompletionTokensDetails = &agui.CompletionTokensDetails{ReasoningTokens: wire.I64(v)}
					}
					return e
				}
				return wire.Skip(s)
			})
		default:
			err = wire.Skip(s)
		}
		return err
	})
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u, err
}

func (p *responsesParser) dispatch(ev *respEvent) error {
	em := p.em
	switch string(ev.typ) {
	case "response.output_text.delta":
		em.Text(p.item(ev.itemID), ev.delta)
	case "response.refusal.delta":
		p.refusal = true
		em.Text(p.item(ev.itemID), ev.delta)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		item := p.item(ev.itemID)
		if item != p.reasonItem {
			// The reasoning message gets its own id, as the reference's
			// does; the item id travels in the packed signature.
			p.reasonItem, p.reasonMsg = item, wire.NewID("reasoning")
		}
		if p.newSummaryPart(item, ev.summaryIndex) && em.ReasoningOpen() {
			em.Reasoning(p.reasonMsg, "\n\n")
		}
		em.Reasoning(p.reasonMsg, ev.delta)
	case "response.output_item.added":
		if ev.item.typ == "function_call" {
			callID := ev.item.callID
			if callID == "" {
				callID = ev.item.id
			}
			p.calls = append(p.calls, respCall{itemID: ev.item.id, callID: callID, name: ev.item.name})
			em.ToolStart(callID, ev.item.name, int(ev.outputIndex), map[string]any{"itemId": ev.item.id})
			if ev.item.arguments != "" {
				em.ToolArgs(callID, ev.item.arguments)
			}
		}
	case "response.function_call_arguments.delta":
		if id := p.callFor(ev.itemID); id != "" {
			em.ToolArgs(id, ev.delta)
		}
	case "response.function_call_arguments.done":
		if id := p.callFor(ev.itemID); id != "" {
			em.ToolEnd(id, ev.arguments)
		}
	case "response.output_item.done":
		switch ev.item.typ {
		case "function_call":
			callID := ev.item.callID
			if callID == "" {
				callID = ev.item.id
			}
			em.ToolEnd(callID, ev.item.arguments)
		case "reasoning":
			em.EndReasoningID(ev.item.id, packReasoning(ev.item.id, ev.item.encrypted))
		case "message":
			em.EndText()
		}
	case "response.completed":
		em.Finish(p.finishReason(agui.FinishStop), ev.usage)
	case "response.incomplete":
		reason := agui.FinishLength
		if ev.incomplete == "content_filter" {
			reason = agui.FinishContentFilter
		}
		em.Finish(reason, ev.usage)
	case "response.failed":
		code, msg := ev.errCode, ev.errMsg
		if code == "" {
			code = "response_failed"
		}
		em.Fail(code, msg, ev.usage)
	case "error":
		code := ev.code
		if code == "" {
			code = "stream_error"
		}
		em.Fail(code, ev.msg, nil)
	}
	return nil
}

func (p *responsesParser) finishReason(def string) string {
	if p.refusal && !p.em.ToolEnded() {
		return agui.FinishContentFilter
	}
	return def
}

func (p *responsesParser) newSummaryPart(id string, idx int64) bool {
	for i := range p.summary {
		if p.summary[i].itemID == id {
			if idx > p.summary[i].idx {
				p.summary[i].idx = idx
				return true
			}
			return false
		}
	}
	p.summary = append(p.summary, summaryIdx{itemID: id, idx: idx})
	return false
}

// SupportsCombinedToolsAndSchema reports that OpenAI takes tools and a
// strict json_schema text format in one request, so structured output rides
// the agent loop instead of a separate finalization call.
func (a *Responses) SupportsCombinedToolsAndSchema(map[string]any) bool { return true }

// CombinedStructuredOutputSource is "text": the final turn's text is the
// JSON answer.
func (a *Responses) CombinedStructuredOutputSource(map[string]any) string { return "text" }

// End reports that a stream ending before its terminal event is incomplete.
func (p *responsesParser) End() bool { return false }

// packReasoning is the signature carried for a reasoning item: its id and
// encrypted content as one JSON object, so the next turn can send the item
// back whole (the reference's form, which its clients store).
func packReasoning(id, encrypted string) string {
	if encrypted == "" {
		return ""
	}
	b, _ := json.Marshal(struct {
		ID               string `json:"id"`
		EncryptedContent string `json:"encrypted_content"`
	}{id, encrypted})
	return string(b)
}

// unpackReasoning reverses packReasoning; a bare encrypted value (an older
// signature) is not packed.
func unpackReasoning(sig string) (id, encrypted string, ok bool) {
	if !strings.HasPrefix(sig, "{") {
		return "", "", false
	}
	var v struct {
		ID               string `json:"id"`
		EncryptedContent string `json:"encrypted_content"`
	}
	if json.Unmarshal([]byte(sig), &v) != nil || v.EncryptedContent == "" {
		return "", "", false
	}
	return v.ID, v.EncryptedContent, true
}

// reasoningModel reports the OpenAI reasoning model families, whose
// encrypted reasoning is requested so it can be sent back next turn.
func reasoningModel(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "codex-"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}
