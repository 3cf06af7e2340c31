// Package gemini adapts the Gemini API's streamGenerateContent (SSE) to the
// goai engine.
//
// Why hand-written rather than google.golang.org/genai: the SDK brings 72
// modules and decodes every chunk through map[string]any, which allocates
// heavily (docs/engine.md §11); the adapter needs one POST with alt=sse and
// its own decoding of a handful of fields.
//
// Function calls arrive whole; each becomes TOOL_CALL_START (with
// metadata.thoughtSignature when the part carries one, so the engine keeps
// it on the tool call and fans out a tool-call REASONING_ENCRYPTED_VALUE),
// one TOOL_CALL_ARGS with the JSON arguments, and TOOL_CALL_END. Thought
// parts (thought: true) become REASONING_* events; a thought signature on a
// non-call part is reported as the reasoning signature and replayed on the
// first part of the model turn. Model options are spread natively:
// generation keys (temperature, topP, topK, maxOutputTokens, thinkingConfig,
// stopSequences, seed, ...) go into generationConfig, request-level keys
// (safetySettings, toolConfig, cachedContent, labels) stay at the top. The
// API key is sent in the x-goog-api-key header, never in the URL.
package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"iter"
	"net/url"
	"slices"
	"strconv"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/internal/jsonlex"
	"github.com/goai-sdk/goai/provider/internal/wire"
)

// Options configures the transport: base URL (default
// https://generativelanguage.googleapis.com/v1beta), API key, HTTP client,
// headers, retries.
type Options = wire.Options

// DefaultBaseURL is the Gemini API root.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

var topLevel = []string{"safetySettings", "toolConfig", "cachedContent", "labels", "systemInstruction", "tools", "contents", "generationConfig"}

// Adapter streams turns from models/{model}:streamGenerateContent.
type Adapter struct {
	model string
	opts  *Options
}

// New returns an adapter for model. opts may be nil.
func New(model string, opts *Options) *Adapter { return &Adapter{model: model, opts: opts} }

// Name implements chat.Adapter.
func (a *Adapter) Name() string { return "gemini" }

// Model implements chat.Adapter.
func (a *Adapter) Model() string { return a.model }

// StructuredOutput implements chat.StructuredOutputAdapter with
// responseMimeType application/json and responseJsonSchema.
func (a *Adapter) StructuredOutput(ctx context.Context, req *chat.Request, schema json.RawMessage) (*chat.StructuredResult, error) {
	return wire.Structured(ctx, a, req, schema)
}

// Body builds the request body for req.
func (a *Adapter) Body(req *chat.Request) ([]byte, error) {
	b := wire.NewBody()
	contents, err := contents(req.Messages)
	if err != nil {
		return nil, err
	}
	b.Value("contents", contents)
	if s := wire.SystemText(req.SystemPrompts); s != "" {
		b.Value("systemInstruction", map[string]any{"parts": []any{map[string]any{"text": s}}})
	}
	if len(req.Tools) > 0 {
		decls := make([]map[string]any, len(req.Tools))
		for i, t := range req.Tools {
			d := map[string]any{"name": t.Name, "parametersJsonSchema": wire.SchemaOrEmpty(t.InputSchema)}
			if t.Description != "" {
				d["description"] = t.Description
			}
			decls[i] = d
		}
		b.Value("tools", []any{map[string]any{"functionDeclarations": decls}})
	}
	gen := map[string]any{}
	if g, ok := req.ModelOptions["generationConfig"].(map[string]any); ok {
		for k, v := range g {
			gen[k] = v
		}
	}
	for k, v := range req.ModelOptions {
		if !slices.Contains(topLevel, k) {
			gen[k] = v
		}
	}
	if len(req.OutputSchema) > 0 {
		gen["responseMimeType"] = "application/json"
		gen["responseJsonSchema"] = req.OutputSchema
	}
	if len(gen) > 0 {
		b.Value("generationConfig", gen)
	}
	for _, k := range topLevel[:4] {
		if v, ok := req.ModelOptions[k]; ok {
			b.Value(k, v)
		}
	}
	return b.Bytes()
}

type content struct {
	Role  string `json:"role"`
	Parts []any  `json:"parts"`
}

func contents(in []agui.ModelMessage) ([]content, error) {
	out := make([]content, 0, len(in))
	names := map[string]string{}
	add := func(role string, parts ...any) {
		if len(parts) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
			return
		}
		out = append(out, content{Role: role, Parts: parts})
	}
	for i := range in {
		m := &in[i]
		switch m.Role {
		case agui.RoleUser, agui.RoleSystem, agui.RoleDeveloper:
			parts, err := userParts(m.Content)
			if err != nil {
				return nil, err
			}
			add("user", parts...)
		case agui.RoleAssistant:
			var parts []any
			sig := ""
			for _, th := range m.Thinking {
				if th.Signature != "" {
					sig = th.Signature
					break
				}
			}
			if t := m.Content.String(); t != "" {
				p := map[string]any{"text": t}
				if sig != "" {
					p["thoughtSignature"] = sig
					sig = ""
				}
				parts = append(parts, p)
			}
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Function.Name
				// The call id goes back with the call and its response, so
				// parallel calls of one function pair up unambiguously.
				p := map[string]any{"functionCall": map[string]any{"id": tc.ID, "name": tc.Function.Name, "args": wire.ObjectOrEmpty(tc.Function.Arguments)}}
				if ts, ok := tc.Metadata["thoughtSignature"].(string); ok && ts != "" {
					p["thoughtSignature"] = ts
				}
				parts = append(parts, p)
			}
			if sig != "" && len(parts) == 0 {
				parts = append(parts, map[string]any{"text": "", "thoughtSignature": sig})
			}
			add("model", parts...)
		case agui.RoleTool:
			text := wire.ToolResultText(m)
			var resp any = map[string]any{"result": text}
			if o := wire.ObjectOrEmpty(text); string(o) != "{}" || text == "{}" {
				resp = o
			}
			if m.Error != "" {
				resp = map[string]any{"error": text}
			}
			add("user", map[string]any{"functionResponse": map[string]any{"id": m.ToolCallID, "name": names[m.ToolCallID], "response": resp}})
		}
	}
	return out, nil
}

func userParts(c agui.Content) ([]any, error) {
	if !c.IsParts() {
		if s := c.String(); s != "" {
			return []any{map[string]any{"text": s}}, nil
		}
		return nil, nil
	}
	var out []any
	for _, p := range c.PartList() {
		switch p.Type {
		case "text":
			out = append(out, map[string]any{"text": p.Content})
		case "image", "audio", "video", "document":
			if p.Source == nil {
				continue
			}
			mt := p.Source.MimeType
			if mt == "" {
				mt = map[string]string{"image": "image/png", "audio": "audio/wav", "video": "video/mp4", "document": "application/pdf"}[p.Type]
			}
			if p.Source.Type == "url" {
				out = append(out, map[string]any{"fileData": map[string]any{"mimeType": mt, "fileUri": p.Source.Value}})
			} else {
				out = append(out, map[string]any{"inlineData": map[string]any{"mimeType": mt, "data": p.Source.Value}})
			}
		default:
			return nil, &wire.ErrUnsupported{Msg: "gemini: unsupported content part " + p.Type}
		}
	}
	return out, nil
}

// ChatStream implements chat.Adapter.
func (a *Adapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return wire.Stream(ctx, &wire.Provider{Name: "gemini", Model: a.model, Options: a.opts,
		Build: func(req *chat.Request) (*wire.Request, error) {
			body, err := a.Body(req)
			if err != nil {
				return nil, err
			}
			h := map[string][]string{}
			if k := a.opts.Key(); k != "" {
				h["X-Goog-Api-Key"] = []string{k}
			}
			u := a.opts.Base(DefaultBaseURL) + "/models/" + url.PathEscape(a.model) + ":streamGenerateContent?alt=sse"
			return &wire.Request{URL: u, Headers: h, Body: body}, nil
		},
		Parser: func(em *wire.Emitter) wire.Parser { return newParser(em) },
	}, req)
}

// parser translates streamGenerateContent chunks into adapter chunks.
// Gemini has no terminal event: the turn ends with the stream, after a
// chunk that carried a finishReason.
type parser struct {
	compact bytes.Buffer
	em      *wire.Emitter
	s       jsonlex.Scanner
	// usage holds the latest usageMetadata counts; every chunk repeats
	// them, so they are decoded in place and turned into a TokenUsage once.
	usage    usageCounts
	hasUsage bool
	finish   string
	blocked  string
	sig      string
	calls    int
	thought  string
	parts    []part
}

// newParser returns a parser feeding em.
func newParser(em *wire.Emitter) *parser {
	em.StepDeltas, em.FinalStep, em.ErrorWithoutRun = true, wire.StepIfSigned, true
	return &parser{em: em}
}

type part struct {
	text    string
	thought bool
	sig     string
	hasCall bool
	name    string
	id      string
	args    []byte
}

// Feed handles one SSE data payload.
func (p *parser) Feed(data []byte) error {
	s := &p.s
	s.Reset(data)
	p.parts = p.parts[:0]
	var errMsg, errStatus string
	var errCode int64
	hasErr := false
	err := wire.Object(s, func(k []byte) error {
		switch string(k) {
		case "candidates":
			return wire.Array(s, func(i int) error {
				if i > 0 {
					return wire.Skip(s)
				}
				return p.candidate(s)
			})
		case "usageMetadata":
			if s.IsNull() {
				return nil
			}
			p.hasUsage = true
			return p.usage.parse(s)
		case "modelVersion":
			if p.em.WantsModel() {
				m, err := wire.Str(s)
				p.em.SetModel(m)
				return err
			}
		case "responseId":
			id, err := wire.Str(s)
			if p.em.MessageID == "" {
				p.em.MessageID = id
			}
			return err
		case "promptFeedback":
			return wire.Object(s, func(k []byte) error {
				if string(k) == "blockReason" {
					var err error
					p.blocked, err = wire.Str(s)
					return err
				}
				return wire.Skip(s)
			})
		case "error":
			hasErr = true
			return wire.Object(s, func(k []byte) error {
				var err error
				switch string(k) {
				case "message":
					errMsg, err = wire.Str(s)
				case "status":
					errStatus, err = wire.Str(s)
				case "code":
					errCode, err = wire.Int(s)
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
	for i := range p.parts {
		p.part(&p.parts[i])
	}
	if hasErr {
		code := errStatus
		if errCode != 0 {
			code = itoa(errCode)
		}
		if code == "" {
			code = "stream_error"
		}
		p.em.Fail(code, errMsg, p.tokenUsage())
	}
	return nil
}

func (p *parser) candidate(s *jsonlex.Scanner) error {
	return wire.Object(s, func(k []byte) error {
		switch string(k) {
		case "content":
			return wire.Object(s, func(k []byte) error {
				if string(k) != "parts" {
					return wire.Skip(s)
				}
				return wire.Array(s, func(int) error {
					p.parts = append(p.parts, part{})
					return parsePart(s, &p.parts[len(p.parts)-1])
				})
			})
		case "finishReason":
			var err error
			p.finish, err = wire.Str(s)
			return err
		}
		return wire.Skip(s)
	})
}

func parsePart(s *jsonlex.Scanner, pt *part) error {
	return wire.Object(s, func(k []byte) error {
		var err error
		switch string(k) {
		case "text":
			pt.text, err = wire.Str(s)
		case "thought":
			pt.thought, err = wire.Bool(s)
		case "thoughtSignature":
			pt.sig, err = wire.Str(s)
		case "functionCall":
			pt.hasCall = true
			err = wire.Object(s, func(k []byte) error {
				var err error
				switch string(k) {
				case "name":
					pt.name, err = wire.Str(s)
				case "id":
					pt.id, err = wire.Str(s)
				case "args":
					pt.args, err = s.Raw()
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
}

func (p *parser) part(pt *part) {
	em := p.em
	switch {
	case pt.hasCall:
		id := pt.id
		if id == "" || em.HasTool(id) {
			p.calls++
			id = "call_" + itoa(int64(p.calls)) + "_" + wire.NewID("gemini")
		}
		var meta map[string]any
		if pt.sig != "" {
			meta = map[string]any{"thoughtSignature": pt.sig}
		}
		em.ToolStart(id, pt.name, em.ToolCount(), meta)
		// Arguments arrive whole; they are sent compact, and every call ends
		// when the turn finishes (the reference's order and form).
		args := "{}"
		if len(pt.args) > 0 && string(pt.args) != "null" {
			p.compact.Reset()
			if json.Compact(&p.compact, pt.args) == nil {
				args = p.compact.String()
			} else {
				args = string(pt.args)
			}
		}
		em.ToolArgs(id, args)
	case pt.thought:
		if p.thought == "" {
			p.thought = wire.NewID("thought")
		}
		em.Reasoning(p.thought, pt.text)
		if pt.sig != "" {
			p.sig = pt.sig
		}
	default:
		if pt.sig != "" {
			p.sig = pt.sig
		}
		em.Text("", pt.text)
	}
}

// End finishes the turn at the end of the stream and reports whether a
// finish reason (or a prompt block) had been seen.
func (p *parser) End() bool {
	em := p.em
	if em.Done() {
		return true
	}
	if p.finish == "" && p.blocked == "" {
		return false
	}
	if p.sig != "" {
		// The signature belongs to the turn's thinking: the engine stores it
		// with the thinking content it has accumulated.
		if em.ReasoningOpen() {
			em.EndReasoning(p.sig)
		} else {
			em.EndText()
			em.Encrypted("message", "", p.sig)
		}
	}
	reason := agui.FinishStop
	switch p.finish {
	case "MAX_TOKENS":
		reason = agui.FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "LANGUAGE":
		reason = agui.FinishContentFilter
	}
	if p.blocked != "" {
		reason = agui.FinishContentFilter
	}
	em.Finish(reason, p.tokenUsage())
	return true
}

type usageCounts struct {
	prompt, candidates, total, cached, thoughts, text int64
}

func (u *usageCounts) parse(s *jsonlex.Scanner) error {
	*u = usageCounts{}
	return wire.Object(s, func(k []byte) error {
		var err error
		switch string(k) {
		case "promptTokenCount":
			u.prompt, err = wire.Int(s)
		case "candidatesTokenCount":
			u.candidates, err = wire.Int(s)
		case "totalTokenCount":
			u.total, err = wire.Int(s)
		case "cachedContentTokenCount":
			u.cached, err = wire.Int(s)
		case "thoughtsTokenCount":
			u.thoughts, err = wire.Int(s)
		case "promptTokensDetails":
			// [{modality, tokenCount}]: the TEXT count is reported as
			// promptTokensDetails.textTokens, as the reference does.
			err = wire.Array(s, func(int) error {
				var text bool
				var n int64
				err := wire.Object(s, func(k []byte) error {
					switch string(k) {
					case "modality":
						b, err := s.String(nil)
						text = string(b) == "TEXT"
						return err
					case "tokenCount":
						var err error
						n, err = wire.Int(s)
						return err
					}
					return wire.Skip(s)
				})
				if text {
					u.text = n
				}
				return err
			})
		default:
			err = wire.Skip(s)
		}
		return err
	})
}

// tokenUsage reports the counts as the reference does: outputTokens is
// candidatesTokenCount (thoughts are reasoningTokens, not added), and zero
// details are omitted.
func (p *parser) tokenUsage() *agui.TokenUsage {
	if !p.hasUsage {
		return nil
	}
	c := &p.usage
	u := &agui.TokenUsage{PromptTokens: c.prompt, CompletionTokens: c.candidates, TotalTokens: c.total}
	if c.cached > 0 || c.text > 0 {
		d := &agui.PromptTokensDetails{}
		if c.cached > 0 {
			d.CachedTokens = wire.I64(c.cached)
		}
		if c.text > 0 {
			d.Extra = map[string]json.RawMessage{"textTokens": json.RawMessage(strconv.FormatInt(c.text, 10))}
		}
		u.PromptTokensDetails = d
	}
	if c.thoughts > 0 {
		u.CompletionTokensDetails = &agui.CompletionTokensDetails{ReasoningTokens: wire.I64(c.thoughts)}
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
