// Package otel is a chat middleware that traces runs with OpenTelemetry
// using the GenAI semantic conventions (gen_ai.*), as TanStack AI's
// otelMiddleware does (docs/engine.md §9).
//
// Each run gets a root span ("chat <model>"), each model call an iteration
// span ("chat <model> #<n>", kind client) under it, and each executed tool a
// span ("execute_tool <name>") under the iteration. Spans carry the
// provider, operation, request model, sampling options, response model,
// finish reasons and token usage; failures set the span status. With a
// Meter the middleware also records the gen_ai.client.operation.duration
// and gen_ai.client.token.usage histograms.
//
// Prompt and completion text is captured only with CaptureContent, after
// Redact. The root span is a child of whatever span the caller's context
// carries, so a run nests under, say, an HTTP server span.
//
// The package depends only on the OpenTelemetry API; the application
// chooses the SDK and exporters.
package otel

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// Scope is the role of a span.
type Scope string

const (
	ScopeChat      Scope = "chat"      // the run's root span
	ScopeIteration Scope = "iteration" // one model call
	ScopeTool      Scope = "tool"      // one tool execution
)

// SpanInfo describes the span a callback is asked about.
type SpanInfo struct {
	Scope Scope
	Run   *chat.Context
	// Iteration is the model call's index (iteration and tool spans).
	Iteration int
	// ToolName and ToolCallID identify the call (tool spans).
	ToolName   string
	ToolCallID string
}

// SpanStart is what a span is started with; OnBeforeSpanStart may change it.
type SpanStart struct {
	Kind       trace.SpanKind
	Attributes []attribute.KeyValue
	Links      []trace.Link
}

// Options configure the middleware.
type Options struct {
	// Tracer starts the spans; nil traces nothing (a no-op tracer).
	Tracer trace.Tracer
	// Meter, when set, records the duration and token histograms.
	Meter metric.Meter
	// CaptureContent attaches prompts, completions, tool arguments and
	// results to spans. Off by default so no PII lands on a span by
	// accident.
	CaptureContent bool
	// Redact rewrites every captured string first. If it panics the
	// captured value is "[redaction_failed]", never the original.
	Redact func(string) string
	// MaxContentLength caps the completion text kept per model call (in
	// bytes, cut on a character boundary, "…" appended): 0 means
	// DefaultMaxContentLength, negative means no cap.
	MaxContentLength int
	// SpanNameFormatter overrides span names; "" keeps the default.
	SpanNameFormatter func(SpanInfo) string
	// AttributeEnricher adds attributes to every span after it starts.
	AttributeEnricher func(SpanInfo) []attribute.KeyValue
	// OnBeforeSpanStart may change a span's kind, attributes and links.
	OnBeforeSpanStart func(SpanInfo, SpanStart) SpanStart
	// OnSpanEnd runs just before every span ends.
	OnSpanEnd func(SpanInfo, trace.Span)
}

// DefaultMaxContentLength is the default cap on captured completion text.
const DefaultMaxContentLength = 100_000

// RedactionFailed replaces content whose redaction panicked.
const RedactionFailed = "[redaction_failed]"

// Name is the middleware's name.
const Name = "otel"

// Attribute keys beyond the GenAI conventions.
const (
	attrIteration        = "tanstack.ai.iteration"
	attrIterations       = "tanstack.ai.iterations"
	attrToolOutcome      = "tanstack.ai.tool.outcome"
	attrCompletionReason = "tanstack.ai.completion.reason"
)

// New returns the tracing middleware. One value may serve many runs.
func New(opts Options) (*chat.Middleware, error) {
	m := &mw{opts: opts, state: chat.NewCapability[*runState]("otel-span-state")}
	if m.opts.Tracer == nil {
		m.opts.Tracer = noop.NewTracerProvider().Tracer("")
	}
	switch {
	case m.opts.MaxContentLength == 0:
		m.maxContent = DefaultMaxContentLength
	case m.opts.MaxContentLength > 0:
		m.maxContent = m.opts.MaxContentLength
	}
	if opts.Meter != nil {
		var err error
		m.duration, err = opts.Meter.Float64Histogram("gen_ai.client.operation.duration",
			metric.WithDescription("GenAI client operation duration"), metric.WithUnit("s"),
			metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92))
		if err != nil {
			return nil, fmt.Errorf("otel middleware: duration histogram: %w", err)
		}
		m.tokens, err = opts.Meter.Int64Histogram("gen_ai.client.token.usage",
			metric.WithDescription("GenAI client token usage"), metric.WithUnit("{token}"),
			metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864))
		if err != nil {
			return nil, fmt.Errorf("otel middleware: token histogram: %w", err)
		}
	}
	return &chat.Middleware{
		Name:             Name,
		Setup:            m.setup,
		OnStart:          m.onStart,
		OnConfig:         m.onConfig,
		OnChunk:          m.onChunk,
		ChunkTypes:       []agui.EventType{agui.TextMessageContent, agui.RunFinished},
		OnUsage:          m.onUsage,
		OnBeforeToolCall: m.onBeforeToolCall,
		OnAfterToolCall:  m.onAfterToolCall,
		OnFinish:         m.onFinish,
		OnAbort:          m.onAbort,
		OnError:          m.onError,
	}, nil
}

type mw struct {
	opts       Options
	maxContent int // 0: no cap
	state      *chat.Capability[*runState]
	duration   metric.Float64Histogram
	tokens     metric.Int64Histogram
}

type toolSpan struct {
	span trace.Span
	name string
}

// runState is one run's spans. Hooks of a run are called one at a time.
type runState struct {
	root       trace.Span
	start      time.Time
	iter       trace.Span
	iterations int // iteration spans started
	tools      map[string]toolSpan
	text       strings.Builder // the model call's completion (CaptureContent)
	truncated  bool
	finish     string
	usage      map[string]float64 // summed usage attributes for the root
	usageOrder []string
	ended      bool
}

func (m *mw) setup(c *chat.Context) error {
	m.state.Provide(c, &runState{tools: map[string]toolSpan{}})
	return nil
}

func (m *mw) get(c *chat.Context) *runState {
	st, ok := m.state.GetOptional(c)
	if !ok || st.root == nil || st.ended {
		return nil
	}
	return st
}

// guard runs a user callback, turning a panic into a logged error.
func guard[T any](c *chat.Context, what string, fallback T, fn func() T) (out T) {
	defer func() {
		if p := recover(); p != nil {
			c.Logger().Log(chat.CatErrors, fmt.Sprintf("otel middleware: %s panicked: %v", what, p), slog.String("middleware", Name))
			out = fallback
		}
	}()
	return fn()
}

func (m *mw) startSpan(parent trace.Span, info SpanInfo, name string, start SpanStart) trace.Span {
	c := info.Run
	if f := m.opts.SpanNameFormatter; f != nil {
		if n := guard(c, "SpanNameFormatter", "", func() string { return f(info) }); n != "" {
			name = n
		}
	}
	if f := m.opts.OnBeforeSpanStart; f != nil {
		start = guard(c, "OnBeforeSpanStart", start, func() SpanStart { return f(info, start) })
	}
	ctx := trace.ContextWithSpan(c, parent)
	if parent == nil {
		ctx = c // the root: child of the caller's span, if any
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(start.Kind), trace.WithAttributes(start.Attributes...)}
	if len(start.Links) > 0 {
		opts = append(opts, trace.WithLinks(start.Links...))
	}
	_, span := m.opts.Tracer.Start(ctx, name, opts...)
	if f := m.opts.AttributeEnricher; f != nil {
		if attrs := guard(c, "AttributeEnricher", nil, func() []attribute.KeyValue { return f(info) }); len(attrs) > 0 {
			span.SetAttributes(attrs...)
		}
	}
	return span
}

func (m *mw) endSpan(info SpanInfo, span trace.Span) {
	if f := m.opts.OnSpanEnd; f != nil {
		guard(info.Run, "OnSpanEnd", struct{}{}, func() struct{} { f(info, span); return struct{}{} })
	}
	span.End()
}

func (m *mw) redact(c *chat.Context, s string) string {
	if m.opts.Redact == nil {
		return s
	}
	return guard(c, "Redact", RedactionFailed, func() string { return m.opts.Redact(s) })
}

func baseAttrs(c *chat.Context) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", c.Provider),
		attribute.String("gen_ai.system", c.Provider),
		attribute.String("gen_ai.request.model", c.Model),
	}
}

func (m *mw) onStart(c *chat.Context) error {
	st, ok := m.state.GetOptional(c)
	if !ok || st.root != nil {
		return nil
	}
	st.start = time.Now()
	st.root = m.startSpan(nil, SpanInfo{Scope: ScopeChat, Run: c}, "chat "+c.Model,
		SpanStart{Kind: trace.SpanKindInternal, Attributes: baseAttrs(c)})
	return nil
}

func (m *mw) closeIteration(c *chat.Context, st *runState) {
	if st.iter == nil {
		return
	}
	m.endSpan(SpanInfo{Scope: ScopeIteration, Run: c, Iteration: st.iterations - 1}, st.iter)
	st.iter = nil
}

func (m *mw) onConfig(c *chat.Context, cfg *chat.Config) error {
	if c.Phase != chat.PhaseBeforeModel && c.Phase != chat.PhaseStructuredOutput {
		return nil
	}
	st := m.get(c)
	if st == nil {
		return nil
	}
	m.closeIteration(c, st)
	n := st.iterations
	attrs := append(baseAttrs(c), attribute.Int(attrIteration, n))
	attrs = append(attrs, samplingAttrs(cfg.ModelOptions)...)
	info := SpanInfo{Scope: ScopeIteration, Run: c, Iteration: n}
	span := m.startSpan(st.root, info, "chat "+c.Model+" #"+strconv.Itoa(n), SpanStart{Kind: trace.SpanKindClient, Attributes: attrs})
	st.iter = span
	st.iterations++
	st.text.Reset()
	st.truncated = false
	if m.opts.CaptureContent {
		m.captureInput(c, st, span, cfg, n)
	}
	return nil
}

type roleContent struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func (m *mw) captureInput(c *chat.Context, st *runState, span trace.Span, cfg *chat.Config, n int) {
	var input []roleContent
	var meta []any
	hasMeta := false
	for _, p := range cfg.SystemPrompts {
		body := m.redact(c, p.Content)
		span.AddEvent("gen_ai.system.message", trace.WithAttributes(attribute.String("content", body)))
		input = append(input, roleContent{Role: "system", Content: body})
		if p.Metadata != nil {
			hasMeta = true
			meta = append(meta, p.Metadata)
		} else {
			meta = append(meta, nil)
		}
	}
	if hasMeta {
		if b, err := json.Marshal(meta); err == nil {
			span.SetAttributes(attribute.String("tanstack.ai.system_prompt.metadata", string(b)))
		}
	}
	for _, msg := range cfg.Messages {
		body := serializeContent(msg.Content)
		if body == "" {
			continue
		}
		body = m.redact(c, body)
		span.AddEvent("gen_ai."+msg.Role+".message", trace.WithAttributes(attribute.String("content", body)))
		input = append(input, roleContent{Role: msg.Role, Content: body})
	}
	if len(input) == 0 {
		return
	}
	b, err := json.Marshal(input)
	if err != nil {
		return
	}
	span.SetAttributes(attribute.String("gen_ai.input.messages", string(b)))
	if n == 0 {
		st.root.SetAttributes(attribute.String("gen_ai.input.messages", string(b)))
	}
}

// serializeContent renders message content as text, media as [image] etc.
func serializeContent(c agui.Content) string {
	if !c.IsParts() {
		return c.String()
	}
	parts := make([]string, 0, len(c.PartList()))
	for _, p := range c.PartList() {
		switch p.Type {
		case "text":
			parts = append(parts, p.Content)
		case "":
			parts = append(parts, "[unknown]")
		default:
			parts = append(parts, "["+p.Type+"]")
		}
	}
	return strings.Join(parts, " ")
}

var maxTokensKeys = []string{"max_output_tokens", "max_tokens", "max_completion_tokens", "maxOutputTokens", "maxCompletionTokens", "maxTokens"}

func samplingAttrs(opts map[string]any) []attribute.KeyValue {
	if len(opts) == 0 {
		return nil
	}
	nested, _ := opts["options"].(map[string]any)
	var out []attribute.KeyValue
	if v, ok := firstNumber(opts["temperature"], nested["temperature"]); ok {
		out = append(out, attribute.Float64("gen_ai.request.temperature", v))
	}
	if v, ok := firstNumber(opts["top_p"], opts["topP"], nested["top_p"]); ok {
		out = append(out, attribute.Float64("gen_ai.request.top_p", v))
	}
	cands := make([]any, 0, len(maxTokensKeys)+1)
	for _, k := range maxTokensKeys {
		cands = append(cands, opts[k])
	}
	if v, ok := firstNumber(append(cands, nested["num_predict"])...); ok {
		out = append(out, attribute.Int64("gen_ai.request.max_tokens", int64(v)))
	}
	return out
}

func firstNumber(vs ...any) (float64, bool) {
	for _, v := range vs {
		switch x := v.(type) {
		case float64:
			return x, true
		case float32:
			return float64(x), true
		case int:
			return float64(x), true
		case int64:
			return float64(x), true
		case json.Number:
			if f, err := x.Float64(); err == nil {
				return f, true
			}
		}
	}
	return 0, false
}

func (m *mw) appendText(st *runState, delta string) {
	if st.truncated {
		return
	}
	if m.maxContent > 0 {
		remaining := m.maxContent - st.text.Len()
		if len(delta) > remaining {
			cut := max(remaining, 0)
			for cut > 0 && cut < len(delta) && !isRuneStart(delta[cut]) {
				cut--
			}
			st.text.WriteString(delta[:cut])
			st.text.WriteString("…")
			st.truncated = true
			return
		}
	}
	st.text.WriteString(delta)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func (m *mw) onChunk(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
	switch ev.Type {
	case agui.TextMessageContent:
		if !m.opts.CaptureContent {
			return chat.Pass, nil
		}
		if st := m.get(c); st != nil {
			m.appendText(st, ev.Delta)
		}
	case agui.RunFinished:
		st := m.get(c)
		if st == nil {
			return chat.Pass, nil
		}
		if ev.Outcome != nil && ev.Outcome.Type == "interrupt" {
			// The run pauses: no terminal hook follows, so end the spans here.
			m.endRun(c, st, time.Since(st.start), func(span trace.Span) {
				span.SetAttributes(attribute.String(attrCompletionReason, "interrupted"))
			})
			return chat.Pass, nil
		}
		m.modelFinished(c, st, ev)
	}
	return chat.Pass, nil
}

func (m *mw) modelFinished(c *chat.Context, st *runState, ev *agui.Event) {
	fr := ev.FinishReason
	model := ev.Model
	if ts := ev.TanstackMeta(); ts != nil {
		if fr == "" {
			fr, _ = ts["finishReason"].(string)
		}
		if model == "" {
			model, _ = ts["model"].(string)
		}
	}
	if fr != "" {
		st.finish = fr
	}
	span := st.iter
	if span == nil {
		return
	}
	if fr != "" {
		span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{fr}))
	}
	if model != "" {
		span.SetAttributes(attribute.String("gen_ai.response.model", model))
	}
	if ev.Usage != nil {
		span.SetAttributes(usageAttrs(*ev.Usage)...)
	}
	if m.opts.CaptureContent && st.text.Len() > 0 {
		completion := m.redact(c, st.text.String())
		span.AddEvent("gen_ai.choice", trace.WithAttributes(attribute.String("content", completion)))
		if b, err := json.Marshal([]roleContent{{Role: "assistant", Content: completion}}); err == nil {
			span.SetAttributes(attribute.String("gen_ai.output.messages", string(b)))
			st.root.SetAttributes(attribute.String("gen_ai.output.messages", string(b)))
		}
		st.text.Reset()
		st.truncated = false
	}
}

// usageAttrs are the gen_ai.usage.* attributes of a TokenUsage.
func usageAttrs(u agui.TokenUsage) []attribute.KeyValue {
	out := []attribute.KeyValue{
		attribute.Int64("gen_ai.usage.input_tokens", u.PromptTokens),
		attribute.Int64("gen_ai.usage.output_tokens", u.CompletionTokens),
		attribute.Int64("gen_ai.usage.total_tokens", u.TotalTokens),
	}
	if d := u.PromptTokensDetails; d != nil {
		if d.CachedTokens != nil {
			out = append(out, attribute.Int64("gen_ai.usage.cache_read.input_tokens", *d.CachedTokens))
		}
		if d.CacheWriteTokens != nil {
			out = append(out, attribute.Int64("gen_ai.usage.cache_creation.input_tokens", *d.CacheWriteTokens))
		}
	}
	if d := u.CompletionTokensDetails; d != nil && d.ReasoningTokens != nil {
		out = append(out, attribute.Int64("gen_ai.usage.reasoning.output_tokens", *d.ReasoningTokens))
	}
	if raw, ok := u.Extra["cost"]; ok {
		var f float64
		if json.Unmarshal(raw, &f) == nil {
			out = append(out, attribute.Float64("gen_ai.usage.cost", f))
		}
	}
	if raw, ok := u.Extra["billed"]; ok {
		var b struct {
			Quantity *float64 `json:"quantity"`
			Unit     string   `json:"unit"`
		}
		if json.Unmarshal(raw, &b) == nil && b.Quantity != nil {
			out = append(out, attribute.Float64("tanstack.ai.usage.billed_quantity", *b.Quantity),
				attribute.String("tanstack.ai.usage.billed_unit", b.Unit))
		}
	}
	if raw, ok := u.Extra["costDetails"]; ok {
		var cd struct {
			UpstreamCost       *float64 `json:"upstreamCost"`
			UpstreamInputCost  *float64 `json:"upstreamInputCost"`
			UpstreamOutputCost *float64 `json:"upstreamOutputCost"`
		}
		if json.Unmarshal(raw, &cd) == nil {
			for k, v := range map[string]*float64{"tanstack.ai.usage.upstream_cost": cd.UpstreamCost,
				"tanstack.ai.usage.upstream_input_cost": cd.UpstreamInputCost, "tanstack.ai.usage.upstream_output_cost": cd.UpstreamOutputCost} {
				if v != nil {
					out = append(out, attribute.Float64(k, *v))
				}
			}
		}
	}
	return out
}

func (m *mw) metricAttrs(c *chat.Context, extra ...attribute.KeyValue) metric.MeasurementOption {
	attrs := append([]attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", c.Provider),
		attribute.String("gen_ai.system", c.Provider),
		attribute.String("gen_ai.request.model", c.Model),
	}, extra...)
	return metric.WithAttributes(attrs...)
}

func (m *mw) onUsage(c *chat.Context, u agui.TokenUsage) error {
	st := m.get(c)
	if st == nil {
		return nil
	}
	for _, kv := range usageAttrs(u) {
		k := string(kv.Key)
		var v float64
		switch kv.Value.Type() {
		case attribute.INT64:
			v = float64(kv.Value.AsInt64())
		case attribute.FLOAT64:
			v = kv.Value.AsFloat64()
		default:
			continue
		}
		if st.usage == nil {
			st.usage = map[string]float64{}
		}
		if _, seen := st.usage[k]; !seen {
			st.usageOrder = append(st.usageOrder, k)
		}
		st.usage[k] += v
	}
	if m.tokens != nil {
		m.tokens.Record(c, u.PromptTokens, m.metricAttrs(c, attribute.String("gen_ai.token.type", "input")))
		m.tokens.Record(c, u.CompletionTokens, m.metricAttrs(c, attribute.String("gen_ai.token.type", "output")))
	}
	span := st.iter
	if span == nil {
		span = st.root
	}
	span.SetAttributes(usageAttrs(u)...)
	return nil
}

func (m *mw) onBeforeToolCall(c *chat.Context, h *chat.ToolCallHook) (chat.ToolDecision, error) {
	st := m.get(c)
	if st == nil {
		return chat.ToolDecision{}, nil
	}
	parent := st.iter
	if parent == nil {
		parent = st.root
	}
	info := SpanInfo{Scope: ScopeTool, Run: c, Iteration: st.iterations - 1, ToolName: h.ToolName, ToolCallID: h.ToolCallID}
	span := m.startSpan(parent, info, "execute_tool "+h.ToolName, SpanStart{Kind: trace.SpanKindInternal, Attributes: []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", h.ToolName),
		attribute.String("gen_ai.tool.call.id", h.ToolCallID),
		attribute.String("gen_ai.tool.type", "function"),
	}})
	if m.opts.CaptureContent {
		args := m.redact(c, string(h.Args))
		if b, err := json.Marshal([]roleContent{{Role: "tool", Content: args}}); err == nil {
			span.SetAttributes(attribute.String("gen_ai.input.messages", string(b)))
		}
	}
	st.tools[h.ToolCallID] = toolSpan{span: span, name: h.ToolName}
	return chat.ToolDecision{}, nil
}

func (m *mw) onAfterToolCall(c *chat.Context, info chat.AfterToolCallInfo) error {
	st := m.get(c)
	if st == nil {
		return nil
	}
	ts, ok := st.tools[info.ToolCallID]
	if !ok {
		return nil // an earlier middleware decided; the call never started a span
	}
	delete(st.tools, info.ToolCallID)
	span := ts.span
	if info.OK {
		span.SetAttributes(attribute.String(attrToolOutcome, "success"))
	} else {
		span.SetAttributes(attribute.String(attrToolOutcome, "error"), attribute.String("error.type", errorType(info.Err)))
		if info.Err != nil {
			span.RecordError(info.Err)
			span.SetStatus(codes.Error, info.Err.Error())
		} else {
			span.SetStatus(codes.Error, "")
		}
	}
	if m.opts.CaptureContent {
		var body string
		if s, isStr := info.Result.(string); isStr {
			body = s
		} else if b, err := json.Marshal(info.Result); err == nil {
			body = string(b)
		} else {
			body = "[unserializable_tool_result]"
		}
		body = m.redact(c, body)
		if st.iter != nil {
			st.iter.AddEvent("gen_ai.tool.message", trace.WithAttributes(attribute.String("content", body), attribute.String("tool_call_id", info.ToolCallID)))
		}
		if b, err := json.Marshal([]roleContent{{Role: "tool", Content: body}}); err == nil {
			span.SetAttributes(attribute.String("gen_ai.output.messages", string(b)))
		}
	}
	m.endSpan(SpanInfo{Scope: ScopeTool, Run: c, Iteration: st.iterations - 1, ToolName: info.ToolName, ToolCallID: info.ToolCallID}, span)
	return nil
}

// errorType is a low-cardinality error.type: a RunError's code, else the
// error's Go type.
func errorType(err error) string {
	if err == nil {
		return "_OTHER"
	}
	var re *chat.RunError
	if errors.As(err, &re) && re.Code != "" {
		return re.Code
	}
	var he *chat.HookError
	if errors.As(err, &he) && he.Err != nil {
		return fmt.Sprintf("%T", he.Err)
	}
	return fmt.Sprintf("%T", err)
}

// endRun ends every open span of the run and records the run's duration.
// mark is applied to each span first; errType marks a failed operation in
// the metric.
func (m *mw) endRun(c *chat.Context, st *runState, d time.Duration, mark func(trace.Span), errType ...attribute.KeyValue) {
	for id, ts := range st.tools {
		mark(ts.span)
		m.endSpan(SpanInfo{Scope: ScopeTool, Run: c, Iteration: st.iterations - 1, ToolName: ts.name, ToolCallID: id}, ts.span)
		delete(st.tools, id)
	}
	if st.iter != nil {
		mark(st.iter)
		m.closeIteration(c, st)
	}
	if m.duration != nil {
		m.duration.Record(c, d.Seconds(), m.metricAttrs(c, errType...))
	}
	mark(st.root)
	st.root.SetAttributes(attribute.Int(attrIterations, st.iterations))
	if len(st.usage) > 0 {
		attrs := make([]attribute.KeyValue, 0, len(st.usageOrder))
		for _, k := range st.usageOrder {
			v := st.usage[k]
			if strings.HasSuffix(k, "_tokens") {
				attrs = append(attrs, attribute.Int64(k, int64(v)))
			} else {
				attrs = append(attrs, attribute.Float64(k, v))
			}
		}
		st.root.SetAttributes(attrs...)
	}
	m.endSpan(SpanInfo{Scope: ScopeChat, Run: c}, st.root)
	st.ended = true
}

func (m *mw) onFinish(c *chat.Context, info chat.FinishInfo) error {
	st := m.get(c)
	if st == nil {
		return nil
	}
	for _, ts := range st.tools {
		ts.span.SetAttributes(attribute.String(attrToolOutcome, "unknown"))
	}
	if st.finish != "" {
		st.root.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{st.finish}))
	}
	if len(st.usage) == 0 && info.Usage != nil {
		st.root.SetAttributes(usageAttrs(*info.Usage)...)
	}
	m.endRun(c, st, info.Duration, func(trace.Span) {})
	return nil
}

func (m *mw) onAbort(c *chat.Context, info chat.AbortInfo) error {
	st := m.get(c)
	if st == nil {
		return nil
	}
	m.endRun(c, st, info.Duration, func(span trace.Span) {
		span.SetAttributes(attribute.String(attrCompletionReason, "cancelled"))
		span.SetStatus(codes.Error, "cancelled")
	}, attribute.String("error.type", "cancelled"))
	return nil
}

func (m *mw) onError(c *chat.Context, info chat.ErrorInfo) error {
	st := m.get(c)
	if st == nil {
		return nil
	}
	msg := ""
	if info.Err != nil {
		msg = info.Err.Error()
	}
	m.endRun(c, st, info.Duration, func(span trace.Span) {
		if info.Err != nil {
			span.RecordError(info.Err)
		}
		span.SetStatus(codes.Error, msg)
	}, attribute.String("error.type", errorType(info.Err)))
	return nil
}
