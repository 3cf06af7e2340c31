package mockprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/provider/scripted"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jstr(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimRight(buf.String(), "\n")
}

func objArgs(s string) string {
	t := strings.TrimSpace(s)
	if t == "" || !json.Valid([]byte(t)) || t[0] != '{' {
		return "{}"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(t)) != nil {
		return "{}"
	}
	return buf.String()
}

// out buffers a response body and flushes it on pauses and at the end.
type out struct {
	w     http.ResponseWriter
	f     http.Flusher
	buf   bytes.Buffer
	model string
	n     int
}

func (o *out) sse(event, data string) {
	if event != "" {
		o.buf.WriteString("event: ")
		o.buf.WriteString(event)
		o.buf.WriteByte('\n')
	}
	o.buf.WriteString("data: ")
	o.buf.WriteString(data)
	o.buf.WriteString("\n\n")
}

func (o *out) line(s string) {
	o.buf.WriteString(s)
	o.buf.WriteByte('\n')
}

func (o *out) flush() {
	if o.buf.Len() > 0 {
		_, _ = o.w.Write(o.buf.Bytes())
		o.buf.Reset()
	}
	if o.f != nil {
		o.f.Flush()
	}
}

// writer renders one provider's stream.
type writer interface {
	start(fin *agui.Event)
	text(delta string)
	endText()
	reasoning(delta string)
	endReasoning(sig string)
	toolStart(id, name string, meta map[string]any)
	toolArgs(id, delta string)
	toolEnd(id string)
	finish(reason string, u *agui.TokenUsage)
	fail(code, msg string, u *agui.TokenUsage)
	flush()
}

// play renders a turn through w.
func play(ctx context.Context, w writer, turn []scripted.Item) {
	var fin *agui.Event
	for i := range turn {
		if t := turn[i].Event.Type; t == agui.RunFinished || t == agui.RunError {
			fin = &turn[i].Event
		}
	}
	started, textOpen, reasonOpen, reasonDone := false, false, false, false
	start := func() {
		if !started {
			started = true
			w.start(fin)
		}
	}
	closeReason := func(sig string) {
		if reasonOpen || reasonDone || sig != "" {
			w.endReasoning(sig)
		}
		reasonOpen, reasonDone = false, false
	}
	closeText := func() {
		if textOpen {
			w.endText()
			textOpen = false
		}
	}
	for i := range turn {
		it := &turn[i]
		if it.Delay > 0 {
			w.flush()
			t := time.NewTimer(time.Duration(it.Delay) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		ev := &it.Event
		if ev.Type != agui.RunStarted {
			start()
		}
		switch ev.Type {
		case agui.RunStarted:
			start()
		case agui.TextMessageContent:
			if reasonOpen || reasonDone {
				closeReason("")
			}
			textOpen = true
			w.text(ev.Delta)
		case agui.TextMessageEnd:
			closeText()
		case agui.ReasoningMessageContent:
			closeText()
			if reasonDone {
				closeReason("")
			}
			reasonOpen = true
			w.reasoning(ev.Delta)
		case agui.ReasoningEnd, agui.ReasoningMessageEnd:
			if reasonOpen {
				reasonOpen, reasonDone = false, true
			}
		case agui.StepFinished:
			if ev.Signature != "" {
				closeText()
				closeReason(ev.Signature)
			}
		case agui.ReasoningEncryptedValue:
			if ev.Subtype != "tool-call" {
				closeText()
				closeReason(ev.EncryptedValue)
			}
		case agui.ToolCallStart:
			closeText()
			if reasonOpen || reasonDone {
				closeReason("")
			}
			name := ev.ToolCallName
			if name == "" {
				name = ev.ToolName
			}
			w.toolStart(ev.ToolCallID, name, ev.Metadata)
		case agui.ToolCallArgs:
			w.toolArgs(ev.ToolCallID, ev.Delta)
		case agui.ToolCallEnd:
			w.toolEnd(ev.ToolCallID)
		case agui.RunFinished:
			closeText()
			if reasonOpen || reasonDone {
				closeReason("")
			}
			w.finish(ev.FinishReasonValue(), ev.Usage)
			return
		case agui.RunError:
			msg, code := ev.Message, ev.Code
			if ev.Error != nil {
				if msg == "" {
					msg = ev.Error.Message
				}
				if code == "" {
					code = ev.Error.Code
				}
			}
			w.fail(code, msg, ev.Usage)
			return
		}
	}
	// No terminal chunk: the stream just stops (a dropped connection).
}

func usageOf(fin *agui.Event) *agui.TokenUsage {
	if fin == nil || fin.Usage == nil {
		return &agui.TokenUsage{}
	}
	return fin.Usage
}

func cached(u *agui.TokenUsage) (r, w int64) {
	if u.PromptTokensDetails != nil {
		if u.PromptTokensDetails.CachedTokens != nil {
			r = *u.PromptTokensDetails.CachedTokens
		}
		if u.PromptTokensDetails.CacheWriteTokens != nil {
			w = *u.PromptTokensDetails.CacheWriteTokens
		}
	}
	return
}

func reasoningTok(u *agui.TokenUsage) int64 {
	if u.CompletionTokensDetails != nil && u.CompletionTokensDetails.ReasoningTokens != nil {
		return *u.CompletionTokensDetails.ReasoningTokens
	}
	return 0
}

func total(u *agui.TokenUsage) int64 {
	if u.TotalTokens != 0 {
		return u.TotalTokens
	}
	return u.PromptTokens + u.CompletionTokens
}

// ---- OpenAI Responses ----

type rTool struct {
	id, itemID, name string
	idx              int
	args             strings.Builder
}

type responsesWriter struct {
	*out
	seq     int
	outIdx  int
	respID  string
	textID  string
	textIdx int
	textBuf strings.Builder
	rsID    string
	rsIdx   int
	rsText  strings.Builder
	tools   []*rTool
	created int64
}

func (r *responsesWriter) ev(typ, rest string) {
	r.sse(typ, fmt.Sprintf(`{"type":%s,%s,"sequence_number":%d}`, jstr(typ), rest, r.seq))
	r.seq++
}

func (r *responsesWriter) resp(status, extra string) string {
	return fmt.Sprintf(`{"id":%s,"object":"response","created_at":%d,"status":%s,"model":%s,"output":[]%s}`,
		jstr(r.respID), r.created, jstr(status), jstr(r.model), extra)
}

func (r *responsesWriter) start(*agui.Event) {
	r.respID = fmt.Sprintf("resp_mock%03d", r.n)
	r.created = 1741290958
	r.ev("response.created", `"response":`+r.resp("in_progress", ""))
	r.ev("response.in_progress", `"response":`+r.resp("in_progress", ""))
}

func (r *responsesWriter) text(d string) {
	if r.textID == "" {
		r.textID = fmt.Sprintf("msg_mock%03d_%d", r.n, r.outIdx)
		r.textIdx = r.outIdx
		r.outIdx++
		r.textBuf.Reset()
		r.ev("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":{"id":%s,"type":"message","status":"in_progress","content":[],"role":"assistant"}`, r.textIdx, jstr(r.textID)))
		r.ev("response.content_part.added", fmt.Sprintf(`"item_id":%s,"output_index":%d,"content_index":0,"part":{"type":"output_text","annotations":[],"text":""}`, jstr(r.textID), r.textIdx))
	}
	r.textBuf.WriteString(d)
	r.ev("response.output_text.delta", fmt.Sprintf(`"item_id":%s,"output_index":%d,"content_index":0,"delta":%s`, jstr(r.textID), r.textIdx, jstr(d)))
}

func (r *responsesWriter) endText() {
	if r.textID == "" {
		return
	}
	t := jstr(r.textBuf.String())
	id := jstr(r.textID)
	r.ev("response.output_text.done", fmt.Sprintf(`"item_id":%s,"output_index":%d,"content_index":0,"text":%s`, id, r.textIdx, t))
	r.ev("response.content_part.done", fmt.Sprintf(`"item_id":%s,"output_index":%d,"content_index":0,"part":{"type":"output_text","annotations":[],"text":%s}`, id, r.textIdx, t))
	r.ev("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":{"id":%s,"type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":%s}],"role":"assistant"}`, r.textIdx, id, t))
	r.textID = ""
}

func (r *responsesWriter) openReasoning() {
	r.rsID = fmt.Sprintf("rs_mock%03d_%d", r.n, r.outIdx)
	r.rsIdx = r.outIdx
	r.outIdx++
	r.rsText.Reset()
	r.ev("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":{"id":%s,"type":"reasoning","summary":[]}`, r.rsIdx, jstr(r.rsID)))
}

func (r *responsesWriter) reasoning(d string) {
	if r.rsID == "" {
		r.openReasoning()
		r.ev("response.reasoning_summary_part.added", fmt.Sprintf(`"item_id":%s,"output_index":%d,"summary_index":0,"part":{"type":"summary_text","text":""}`, jstr(r.rsID), r.rsIdx))
	}
	r.rsText.WriteString(d)
	r.ev("response.reasoning_summary_text.delta", fmt.Sprintf(`"item_id":%s,"output_index":%d,"summary_index":0,"delta":%s`, jstr(r.rsID), r.rsIdx, jstr(d)))
}

func (r *responsesWriter) endReasoning(sig string) {
	summary := "[]"
	if r.rsID == "" {
		r.openReasoning()
	} else {
		t := jstr(r.rsText.String())
		r.ev("response.reasoning_summary_text.done", fmt.Sprintf(`"item_id":%s,"output_index":%d,"summary_index":0,"text":%s`, jstr(r.rsID), r.rsIdx, t))
		r.ev("response.reasoning_summary_part.done", fmt.Sprintf(`"item_id":%s,"output_index":%d,"summary_index":0,"part":{"type":"summary_text","text":%s}`, jstr(r.rsID), r.rsIdx, t))
		summary = `[{"type":"summary_text","text":` + t + `}]`
	}
	enc := ""
	if sig != "" {
		enc = `,"encrypted_content":` + jstr(sig)
	}
	r.ev("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":{"id":%s,"type":"reasoning","summary":%s%s}`, r.rsIdx, jstr(r.rsID), summary, enc))
	r.rsID = ""
}

func (r *responsesWriter) tool(id string) *rTool {
	for _, t := range r.tools {
		if t.id == id {
			return t
		}
	}
	return nil
}

func (r *responsesWriter) toolStart(id, name string, _ map[string]any) {
	t := &rTool{id: id, itemID: fmt.Sprintf("fc_mock%03d_%d", r.n, r.outIdx), name: name, idx: r.outIdx}
	r.outIdx++
	r.tools = append(r.tools, t)
	r.ev("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":{"id":%s,"type":"function_call","status":"in_progress","arguments":"","call_id":%s,"name":%s}`, t.idx, jstr(t.itemID), jstr(id), jstr(name)))
}

func (r *responsesWriter) toolArgs(id, d string) {
	t := r.tool(id)
	if t == nil {
		return
	}
	t.args.WriteString(d)
	r.ev("response.function_call_arguments.delta", fmt.Sprintf(`"item_id":%s,"output_index":%d,"delta":%s`, jstr(t.itemID), t.idx, jstr(d)))
}

func (r *responsesWriter) toolEnd(id string) {
	t := r.tool(id)
	if t == nil {
		return
	}
	a := jstr(t.args.String())
	r.ev("response.function_call_arguments.done", fmt.Sprintf(`"item_id":%s,"output_index":%d,"arguments":%s`, jstr(t.itemID), t.idx, a))
	r.ev("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":{"id":%s,"type":"function_call","status":"completed","arguments":%s,"call_id":%s,"name":%s}`, t.idx, jstr(t.itemID), a, jstr(id), jstr(t.name)))
}

func (r *responsesWriter) usage(u *agui.TokenUsage) string {
	if u == nil {
		return ""
	}
	cr, _ := cached(u)
	return fmt.Sprintf(`,"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}`,
		u.PromptTokens, cr, u.CompletionTokens, reasoningTok(u), total(u))
}

func (r *responsesWriter) finish(reason string, u *agui.TokenUsage) {
	switch reason {
	case agui.FinishLength:
		r.ev("response.incomplete", `"response":`+r.resp("incomplete", `,"incomplete_details":{"reason":"max_output_tokens"}`+r.usage(u)))
	case agui.FinishContentFilter:
		r.ev("response.incomplete", `"response":`+r.resp("incomplete", `,"incomplete_details":{"reason":"content_filter"}`+r.usage(u)))
	default:
		r.ev("response.completed", `"response":`+r.resp("completed", r.usage(u)))
	}
}

func (r *responsesWriter) fail(code, msg string, _ *agui.TokenUsage) {
	if code == "" {
		code = "server_error"
	}
	r.ev("error", fmt.Sprintf(`"code":%s,"message":%s,"param":null`, jstr(code), jstr(msg)))
}

// ---- OpenAI Chat Completions ----

type chatWriter struct {
	*out
	tools []string
}

func (c *chatWriter) chunk(delta, finish string) {
	c.sse("", fmt.Sprintf(`{"id":"chatcmpl-mock%03d","object":"chat.completion.chunk","created":1741290958,"model":%s,"system_fingerprint":"fp_mock","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]}`,
		c.n, jstr(c.model), delta, finish))
}

func (c *chatWriter) start(*agui.Event) {
	c.chunk(`{"role":"assistant","content":"","refusal":null}`, "null")
}
func (c *chatWriter) text(d string) { c.chunk(`{"content":`+jstr(d)+`}`, "null") }
func (c *chatWriter) endText()      {}
func (c *chatWriter) reasoning(d string) {
	c.chunk(`{"reasoning_content":`+jstr(d)+`}`, "null")
}
func (c *chatWriter) endReasoning(string) {}

func (c *chatWriter) idx(id string) int {
	for i, t := range c.tools {
		if t == id {
			return i
		}
	}
	return -1
}

func (c *chatWriter) toolStart(id, name string, _ map[string]any) {
	c.tools = append(c.tools, id)
	c.chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":""}}]}`, len(c.tools)-1, jstr(id), jstr(name)), "null")
}

func (c *chatWriter) toolArgs(id, d string) {
	c.chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, c.idx(id), jstr(d)), "null")
}

func (c *chatWriter) toolEnd(string) {}

func (c *chatWriter) finish(reason string, u *agui.TokenUsage) {
	if reason == "" {
		reason = "stop"
	}
	c.chunk(`{}`, jstr(reason))
	if u != nil {
		cr, _ := cached(u)
		c.sse("", fmt.Sprintf(`{"id":"chatcmpl-mock%03d","object":"chat.completion.chunk","created":1741290958,"model":%s,"system_fingerprint":"fp_mock","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":%d,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
			c.n, jstr(c.model), u.PromptTokens, u.CompletionTokens, total(u), cr, reasoningTok(u)))
	}
	c.sse("", "[DONE]")
}

func (c *chatWriter) fail(code, msg string, _ *agui.TokenUsage) {
	if code == "" {
		code = "server_error"
	}
	c.sse("", fmt.Sprintf(`{"error":{"message":%s,"type":"server_error","param":null,"code":%s}}`, jstr(msg), jstr(code)))
}

// ---- Anthropic Messages ----

type anthropicWriter struct {
	*out
	idx    int
	open   int // index of the open text/thinking block, -1 none
	kind   string
	tools  map[string]int
	outTok int64
}

func (a *anthropicWriter) ev(typ, data string) { a.sse(typ, data) }

func (a *anthropicWriter) start(fin *agui.Event) {
	a.open = -1
	a.tools = map[string]int{}
	u := usageOf(fin)
	cr, cw := cached(u)
	in := u.PromptTokens - cr - cw
	if in < 0 {
		in = 0
	}
	a.outTok = u.CompletionTokens
	a.ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_mock%03d","type":"message","role":"assistant","model":%s,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}}}`,
		a.n, jstr(a.model), in, cw, cr))
	a.ev("ping", `{"type": "ping"}`)
}

func (a *anthropicWriter) openBlock(kind, cb string) {
	if a.open >= 0 && a.kind == kind {
		return
	}
	a.closeOpen("")
	a.open, a.kind = a.idx, kind
	a.idx++
	a.ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, a.open, cb))
}

func (a *anthropicWriter) closeOpen(sig string) {
	if a.open < 0 {
		return
	}
	if a.kind == "thinking" && sig != "" {
		a.ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%s}}`, a.open, jstr(sig)))
	}
	a.ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, a.open))
	a.open = -1
}

func (a *anthropicWriter) text(d string) {
	a.openBlock("text", `{"type":"text","text":""}`)
	a.ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, a.open, jstr(d)))
}

func (a *anthropicWriter) endText() {
	if a.kind == "text" {
		a.closeOpen("")
	}
}

func (a *anthropicWriter) reasoning(d string) {
	a.openBlock("thinking", `{"type":"thinking","thinking":"","signature":""}`)
	a.ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%s}}`, a.open, jstr(d)))
}

func (a *anthropicWriter) endReasoning(sig string) {
	if a.open < 0 || a.kind != "thinking" {
		if sig == "" {
			return
		}
		a.openBlock("thinking", `{"type":"thinking","thinking":"","signature":""}`)
	}
	a.closeOpen(sig)
}

func (a *anthropicWriter) toolStart(id, name string, _ map[string]any) {
	a.closeOpen("")
	i := a.idx
	a.idx++
	a.tools[id] = i
	a.ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%s,"name":%s,"input":{}}}`, i, jstr(id), jstr(name)))
}

func (a *anthropicWriter) toolArgs(id, d string) {
	a.ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, a.tools[id], jstr(d)))
}

func (a *anthropicWriter) toolEnd(id string) {
	a.ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, a.tools[id]))
}

func (a *anthropicWriter) stop(reason string, u *agui.TokenUsage) {
	a.closeOpen("")
	out := a.outTok
	if u != nil {
		out = u.CompletionTokens
	}
	a.ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%s,"stop_sequence":null},"usage":{"output_tokens":%d}}`, jstr(reason), out))
	a.ev("message_stop", `{"type":"message_stop"}`)
}

func (a *anthropicWriter) finish(reason string, u *agui.TokenUsage) {
	r := "end_turn"
	switch reason {
	case agui.FinishToolCalls:
		r = "tool_use"
	case agui.FinishLength:
		r = "max_tokens"
	case agui.FinishContentFilter:
		r = "refusal"
	}
	a.stop(r, u)
}

func (a *anthropicWriter) fail(code, msg string, u *agui.TokenUsage) {
	if code == "max_tokens" {
		a.stop("max_tokens", u)
		return
	}
	if code == "" {
		code = "api_error"
	}
	a.ev("error", fmt.Sprintf(`{"type":"error","error":{"type":%s,"message":%s}}`, jstr(code), jstr(msg)))
}

// ---- Gemini ----

type gTool struct {
	id, name, sig string
	args          strings.Builder
}

type geminiWriter struct {
	*out
	tools []*gTool
}

func (g *geminiWriter) chunk(parts, tail string) {
	g.sse("", fmt.Sprintf(`{"candidates":[{"content":{"parts":[%s],"role":"model"}%s,"index":0}],"modelVersion":%s,"responseId":"mockresp%03d"}`,
		parts, tail, jstr(g.model), g.n))
}

func (g *geminiWriter) start(*agui.Event) {}
func (g *geminiWriter) text(d string)     { g.chunk(`{"text":`+jstr(d)+`}`, "") }
func (g *geminiWriter) endText()          {}
func (g *geminiWriter) reasoning(d string) {
	g.chunk(`{"text":`+jstr(d)+`,"thought":true}`, "")
}

func (g *geminiWriter) endReasoning(sig string) {
	if sig != "" {
		g.chunk(`{"text":"","thoughtSignature":`+jstr(sig)+`}`, "")
	}
}

func (g *geminiWriter) toolStart(id, name string, meta map[string]any) {
	t := &gTool{id: id, name: name}
	if s, ok := meta["thoughtSignature"].(string); ok {
		t.sig = s
	}
	g.tools = append(g.tools, t)
}

func (g *geminiWriter) toolArgs(id, d string) {
	for _, t := range g.tools {
		if t.id == id {
			t.args.WriteString(d)
		}
	}
}

func (g *geminiWriter) toolEnd(id string) {
	for _, t := range g.tools {
		if t.id == id {
			p := fmt.Sprintf(`{"functionCall":{"name":%s,"args":%s}`, jstr(t.name), objArgs(t.args.String()))
			if t.sig != "" {
				p += `,"thoughtSignature":` + jstr(t.sig)
			}
			g.chunk(p+"}", "")
		}
	}
}

func (g *geminiWriter) finish(reason string, u *agui.TokenUsage) {
	fr := "STOP"
	switch reason {
	case agui.FinishLength:
		fr = "MAX_TOKENS"
	case agui.FinishContentFilter:
		fr = "SAFETY"
	}
	um := ""
	if u != nil {
		cr, _ := cached(u)
		rt := reasoningTok(u)
		um = fmt.Sprintf(`,"usageMetadata":{"promptTokenCount":%d,"candidatesTokenCount":%d,"totalTokenCount":%d`, u.PromptTokens, u.CompletionTokens-rt, total(u))
		if cr > 0 {
			um += fmt.Sprintf(`,"cachedContentTokenCount":%d`, cr)
		}
		if rt > 0 {
			um += fmt.Sprintf(`,"thoughtsTokenCount":%d`, rt)
		}
		um += "}"
	}
	g.sse("", fmt.Sprintf(`{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":%s,"index":0}]%s,"modelVersion":%s,"responseId":"mockresp%03d"}`,
		jstr(fr), um, jstr(g.model), g.n))
}

func (g *geminiWriter) fail(code, msg string, _ *agui.TokenUsage) {
	st := 500
	if n, err := strconv.Atoi(code); err == nil {
		st = n
	}
	status := "INTERNAL"
	if code != "" {
		if _, err := strconv.Atoi(code); err != nil {
			status = code
		}
	}
	g.sse("", fmt.Sprintf(`{"error":{"code":%d,"message":%s,"status":%s}}`, st, jstr(msg), jstr(status)))
}

// ---- Ollama ----

type ollamaWriter struct {
	*out
	tools []*gTool
}

const ollamaTime = "2025-03-06T20:15:58.123456789Z"

func (o *ollamaWriter) msg(fields string) {
	o.line(fmt.Sprintf(`{"model":%s,"created_at":%q,"message":{"role":"assistant",%s},"done":false}`, jstr(o.model), ollamaTime, fields))
}

func (o *ollamaWriter) start(*agui.Event)     {}
func (o *ollamaWriter) text(d string)         { o.msg(`"content":` + jstr(d)) }
func (o *ollamaWriter) endText()              {}
func (o *ollamaWriter) reasoning(d string)    { o.msg(`"content":"","thinking":` + jstr(d)) }
func (o *ollamaWriter) endReasoning(string)   {}
func (o *ollamaWriter) toolArgs(id, d string) { (&geminiWriter{tools: o.tools}).toolArgs(id, d) }
func (o *ollamaWriter) toolStart(id, name string, _ map[string]any) {
	o.tools = append(o.tools, &gTool{id: id, name: name})
}

func (o *ollamaWriter) toolEnd(id string) {
	for _, t := range o.tools {
		if t.id == id {
			o.msg(fmt.Sprintf(`"content":"","tool_calls":[{"function":{"name":%s,"arguments":%s}}]`, jstr(t.name), objArgs(t.args.String())))
		}
	}
}

func (o *ollamaWriter) finish(reason string, u *agui.TokenUsage) {
	dr := "stop"
	if reason == agui.FinishLength {
		dr = "length"
	}
	var p, e int64
	if u != nil {
		p, e = u.PromptTokens, u.CompletionTokens
	}
	o.line(fmt.Sprintf(`{"model":%s,"created_at":%q,"message":{"role":"assistant","content":""},"done_reason":%q,"done":true,"total_duration":4883583458,"load_duration":1334875,"prompt_eval_count":%d,"prompt_eval_duration":342546000,"eval_count":%d,"eval_duration":4535599000}`,
		jstr(o.model), ollamaTime, dr, p, e))
}

func (o *ollamaWriter) fail(_, msg string, _ *agui.TokenUsage) {
	o.line(`{"error":` + jstr(msg) + `}`)
}
