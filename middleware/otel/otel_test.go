package otel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/middleware/internal/mwtest"
	otelmw "github.com/goai-sdk/goai/middleware/otel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type harness struct {
	rec    *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newHarness(t *testing.T) *harness {
	h := &harness{rec: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.rec))
	h.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() {
		_ = h.tp.Shutdown(context.Background())
		_ = h.mp.Shutdown(context.Background())
	})
	return h
}

func (h *harness) mw(t *testing.T, opts otelmw.Options) *chat.Middleware {
	t.Helper()
	if opts.Tracer == nil {
		opts.Tracer = h.tp.Tracer("test")
	}
	m, err := otelmw.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (h *harness) spans(t *testing.T) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	if started, ended := len(h.rec.Started()), len(h.rec.Ended()); started != ended {
		t.Fatalf("%d spans started, %d ended", started, ended)
	}
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range h.rec.Ended() {
		if _, dup := out[s.Name()]; dup {
			t.Fatalf("two spans named %q", s.Name())
		}
		out[s.Name()] = s
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %q, want %q (all: %v)", s.Name(), k, got[k], v, got)
		}
	}
}

func noAttr(t *testing.T, s sdktrace.ReadOnlySpan, keys ...string) {
	t.Helper()
	got := attrs(s)
	for _, k := range keys {
		if v, ok := got[k]; ok {
			t.Errorf("span %q has %s = %q", s.Name(), k, v)
		}
	}
}

func addTool() *chat.Tool {
	return &chat.Tool{Name: "add", Execute: func(_ context.Context, args json.RawMessage) (any, error) {
		var in struct{ A, B float64 }
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		return map[string]any{"sum": in.A + in.B}, nil
	}}
}

func failTool() *chat.Tool {
	return &chat.Tool{Name: "fail", Execute: func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("tool failed on purpose")
	}}
}

func toolThenText() *mwtest.Turns {
	return &mwtest.Turns{Turns: [][]agui.Event{
		mwtest.ToolTurn(mwtest.Call{ID: "call_1", Name: "add", Args: `{"a":1,"b":2}`}),
		mwtest.TextTurn("m2", "the sum ", "is 3"),
	}}
}

func TestSpansForRunIterationsAndTools(t *testing.T) {
	h := newHarness(t)
	mwtest.Collect(t, chat.Options{Adapter: toolThenText(), Messages: mwtest.User("add"), Tools: []*chat.Tool{addTool()},
		ModelOptions: map[string]any{"temperature": 0.5, "max_tokens": 100, "options": map[string]any{"top_p": 0.9}},
		Middleware:   []*chat.Middleware{h.mw(t, otelmw.Options{})}})
	spans := h.spans(t)
	if len(spans) != 4 {
		t.Fatalf("spans %v", keys(spans))
	}
	root, it0, it1, tool := spans["chat test-1"], spans["chat test-1 #0"], spans["chat test-1 #1"], spans["execute_tool add"]
	if root == nil || it0 == nil || it1 == nil || tool == nil {
		t.Fatalf("spans %v", keys(spans))
	}
	if root.Parent().IsValid() {
		t.Error("root span has a parent")
	}
	for _, s := range []sdktrace.ReadOnlySpan{it0, it1} {
		if s.Parent().SpanID() != root.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: parent %v kind %v", s.Name(), s.Parent().SpanID(), s.SpanKind())
		}
	}
	if tool.Parent().SpanID() != it0.SpanContext().SpanID() {
		t.Error("tool span is not a child of iteration 0")
	}
	common := map[string]string{"gen_ai.operation.name": "chat", "gen_ai.system": "test", "gen_ai.provider.name": "test", "gen_ai.request.model": "test-1"}
	wantAttrs(t, root, common)
	wantAttrs(t, root, map[string]string{"gen_ai.response.finish_reasons": `["stop"]`, "tanstack.ai.iterations": "2",
		"gen_ai.usage.input_tokens": "17", "gen_ai.usage.output_tokens": "8", "gen_ai.usage.total_tokens": "25"})
	wantAttrs(t, it0, common)
	wantAttrs(t, it0, map[string]string{"tanstack.ai.iteration": "0", "gen_ai.response.finish_reasons": `["tool_calls"]`,
		"gen_ai.response.model": "test-1", "gen_ai.usage.input_tokens": "7", "gen_ai.usage.output_tokens": "3",
		"gen_ai.request.temperature": "0.5", "gen_ai.request.max_tokens": "100", "gen_ai.request.top_p": "0.9"})
	wantAttrs(t, it1, map[string]string{"tanstack.ai.iteration": "1", "gen_ai.response.finish_reasons": `["stop"]`,
		"gen_ai.usage.input_tokens": "10", "gen_ai.usage.output_tokens": "5"})
	wantAttrs(t, tool, map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add",
		"gen_ai.tool.call.id": "call_1", "gen_ai.tool.type": "function", "tanstack.ai.tool.outcome": "success"})
	if tool.Status().Code == codes.Error || root.Status().Code == codes.Error {
		t.Error("error status on a successful run")
	}
	// Content capture is off by default.
	for _, s := range spans {
		noAttr(t, s, "gen_ai.input.messages", "gen_ai.output.messages")
		if len(s.Events()) != 0 {
			t.Errorf("span %s has events %v", s.Name(), s.Events())
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestMetrics(t *testing.T) {
	h := newHarness(t)
	mw := h.mw(t, otelmw.Options{Meter: h.mp.Meter("test")})
	for range 2 {
		mwtest.Collect(t, chat.Options{Adapter: toolThenText(), Messages: mwtest.User("add"), Tools: []*chat.Tool{addTool()},
			Middleware: []*chat.Middleware{mw}})
	}
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found[m.Name] = true
			switch m.Name {
			case "gen_ai.client.operation.duration":
				hist := m.Data.(metricdata.Histogram[float64])
				if m.Unit != "s" || len(hist.DataPoints) != 1 || hist.DataPoints[0].Count != 2 {
					t.Errorf("duration: unit %q points %+v", m.Unit, hist.DataPoints)
				}
				dp := hist.DataPoints[0]
				if v, _ := dp.Attributes.Value("gen_ai.request.model"); v.AsString() != "test-1" {
					t.Errorf("duration attrs %v", dp.Attributes)
				}
				if _, ok := dp.Attributes.Value("error.type"); ok {
					t.Errorf("error.type on a successful run")
				}
			case "gen_ai.client.token.usage":
				hist := m.Data.(metricdata.Histogram[int64])
				sums := map[string]int64{}
				counts := map[string]uint64{}
				for _, dp := range hist.DataPoints {
					v, _ := dp.Attributes.Value("gen_ai.token.type")
					sums[v.AsString()] += dp.Sum
					counts[v.AsString()] += dp.Count
				}
				// Two runs of two model calls: input 7+10, output 3+5 each.
				if m.Unit != "{token}" || sums["input"] != 34 || sums["output"] != 16 || counts["input"] != 4 || counts["output"] != 4 {
					t.Errorf("token usage: unit %q sums %v counts %v", m.Unit, sums, counts)
				}
			}
		}
	}
	if !found["gen_ai.client.operation.duration"] || !found["gen_ai.client.token.usage"] {
		t.Fatalf("metrics %v", found)
	}
}

func TestToolFailureSetsErrorStatus(t *testing.T) {
	h := newHarness(t)
	a := &mwtest.Turns{Turns: [][]agui.Event{mwtest.ToolTurn(mwtest.Call{ID: "c1", Name: "fail", Args: `{}`}), mwtest.TextTurn("m", "ok")}}
	mwtest.Collect(t, chat.Options{Adapter: a, Messages: mwtest.User("x"), Tools: []*chat.Tool{failTool()}, Middleware: []*chat.Middleware{h.mw(t, otelmw.Options{})}})
	spans := h.spans(t)
	tool := spans["execute_tool fail"]
	if tool == nil || tool.Status().Code != codes.Error || tool.Status().Description != "tool failed on purpose" {
		t.Fatalf("tool span %+v", tool)
	}
	wantAttrs(t, tool, map[string]string{"tanstack.ai.tool.outcome": "error", "error.type": "*errors.errorString"})
	if len(tool.Events()) != 1 || tool.Events()[0].Name != "exception" {
		t.Fatalf("events %v", tool.Events())
	}
	if spans["chat test-1"].Status().Code == codes.Error {
		t.Error("a tool failure is not a run failure")
	}
}

func TestRunErrorEndsSpansWithError(t *testing.T) {
	h := newHarness(t)
	a := &mwtest.Turns{Turns: [][]agui.Event{{
		{Type: agui.RunStarted, ThreadID: "t", RunID: "r"},
		{Type: agui.RunError, Message: "slow down", Code: "rate_limited"},
	}}}
	mw := h.mw(t, otelmw.Options{Meter: h.mp.Meter("test")})
	mwtest.Collect(t, chat.Options{Adapter: a, Messages: mwtest.User("x"), Middleware: []*chat.Middleware{mw}})
	spans := h.spans(t)
	for _, name := range []string{"chat test-1", "chat test-1 #0"} {
		s := spans[name]
		if s == nil || s.Status().Code != codes.Error || s.Status().Description != "slow down" {
			t.Fatalf("%s: %+v", name, s)
		}
	}
	var rm metricdata.ResourceMetrics
	_ = h.reader.Collect(context.Background(), &rm)
	dp := rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints[0]
	if v, _ := dp.Attributes.Value("error.type"); v.AsString() != "rate_limited" {
		t.Fatalf("error.type %q", v.AsString())
	}
}

func TestAbortEndsSpansCancelled(t *testing.T) {
	h := newHarness(t)
	abort := &chat.Middleware{Name: "abort", OnBeforeToolCall: func(*chat.Context, *chat.ToolCallHook) (chat.ToolDecision, error) {
		return chat.AbortRun("stop here"), nil
	}}
	var runErr error
	for _, err := range chat.Stream(context.Background(), chat.Options{Adapter: toolThenText(), Messages: mwtest.User("x"), Tools: []*chat.Tool{addTool()},
		Middleware: []*chat.Middleware{h.mw(t, otelmw.Options{}), abort}}) {
		if err != nil {
			runErr = err
		}
	}
	if !errors.Is(runErr, chat.ErrAborted) {
		t.Fatalf("run ended with %v, want an abort", runErr)
	}
	spans := h.spans(t)
	for _, name := range []string{"chat test-1", "chat test-1 #0", "execute_tool add"} {
		s := spans[name]
		if s == nil || s.Status().Code != codes.Error || s.Status().Description != "cancelled" {
			t.Fatalf("%s: %+v", name, s)
		}
		wantAttrs(t, s, map[string]string{"tanstack.ai.completion.reason": "cancelled"})
	}
}

// A run that pauses on an approval fires no terminal hook; its spans still
// end, at the interrupt.
func TestInterruptEndsSpans(t *testing.T) {
	h := newHarness(t)
	tool := addTool()
	tool.NeedsApproval = true
	mwtest.Collect(t, chat.Options{Adapter: toolThenText(), Messages: mwtest.User("x"), Tools: []*chat.Tool{tool},
		Middleware: []*chat.Middleware{h.mw(t, otelmw.Options{})}})
	spans := h.spans(t)
	root := spans["chat test-1"]
	if root == nil || len(spans) != 2 {
		t.Fatalf("spans %v", keys(spans))
	}
	wantAttrs(t, root, map[string]string{"tanstack.ai.completion.reason": "interrupted"})
}

func TestRootIsChildOfCallerSpan(t *testing.T) {
	h := newHarness(t)
	ctx, parent := h.tp.Tracer("caller").Start(context.Background(), "http request")
	for _, err := range chat.Stream(ctx, chat.Options{Adapter: &mwtest.Turns{Turns: [][]agui.Event{mwtest.TextTurn("m", "hi")}},
		Messages: mwtest.User("x"), Middleware: []*chat.Middleware{h.mw(t, otelmw.Options{})}}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	parent.End()
	root := h.spans(t)["chat test-1"]
	if root.Parent().SpanID() != parent.SpanContext().SpanID() || root.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Fatal("root span is not a child of the caller's span")
	}
}

func TestContentCapture(t *testing.T) {
	h := newHarness(t)
	redact := func(s string) string { return strings.ReplaceAll(s, "secret", "[x]") }
	a := &mwtest.Turns{Turns: [][]agui.Event{
		mwtest.ToolTurn(mwtest.Call{ID: "call_1", Name: "add", Args: `{"a":1,"b":2,"note":"secret"}`}),
		mwtest.TextTurn("m2", "the secret ", "sum is 3, ", "no more"),
	}}
	mwtest.Collect(t, chat.Options{Adapter: a, Messages: mwtest.User("my secret question"), Tools: []*chat.Tool{addTool()},
		SystemPrompts: []chat.SystemPrompt{{Content: "be secret", Metadata: map[string]any{"cache": true}}},
		Middleware:    []*chat.Middleware{h.mw(t, otelmw.Options{CaptureContent: true, Redact: redact, MaxContentLength: 20})}})
	spans := h.spans(t)
	it0, it1, tool, root := spans["chat test-1 #0"], spans["chat test-1 #1"], spans["execute_tool add"], spans["chat test-1"]
	wantAttrs(t, it0, map[string]string{
		"gen_ai.input.messages":              `[{"role":"system","content":"be [x]"},{"role":"user","content":"my [x] question"}]`,
		"tanstack.ai.system_prompt.metadata": `[{"cache":true}]`,
	})
	wantAttrs(t, root, map[string]string{
		"gen_ai.input.messages":  `[{"role":"system","content":"be [x]"},{"role":"user","content":"my [x] question"}]`,
		"gen_ai.output.messages": `[{"role":"assistant","content":"the [x] sum is 3,…"}]`,
	})
	// Completion capped at 20 bytes before redaction.
	wantAttrs(t, it1, map[string]string{"gen_ai.output.messages": `[{"role":"assistant","content":"the [x] sum is 3,…"}]`})
	wantAttrs(t, tool, map[string]string{
		"gen_ai.input.messages":  `[{"role":"tool","content":"{\"a\":1,\"b\":2,\"note\":\"[x]\"}"}]`,
		"gen_ai.output.messages": `[{"role":"tool","content":"{\"sum\":3}"}]`,
	})
	var names []string
	for _, e := range it0.Events() {
		names = append(names, e.Name)
	}
	if fmt.Sprint(names) != "[gen_ai.system.message gen_ai.user.message gen_ai.tool.message]" {
		t.Errorf("iteration 0 events %v", names)
	}
	if ev := it1.Events(); len(ev) == 0 || ev[len(ev)-1].Name != "gen_ai.choice" {
		t.Errorf("iteration 1 events %v", ev)
	}
}

func TestRedactPanicNeverLeaksContent(t *testing.T) {
	h := newHarness(t)
	var buf bytes.Buffer
	mwtest.Collect(t, chat.Options{Adapter: &mwtest.Turns{Turns: [][]agui.Event{mwtest.TextTurn("m", "hello")}}, Messages: mwtest.User("private"),
		Debug:      &chat.Debug{Logger: slog.New(slog.NewTextHandler(&buf, nil))},
		Middleware: []*chat.Middleware{h.mw(t, otelmw.Options{CaptureContent: true, Redact: func(string) string { panic("boom") }})}})
	it := h.spans(t)["chat test-1 #0"]
	wantAttrs(t, it, map[string]string{
		"gen_ai.input.messages":  `[{"role":"user","content":"[redaction_failed]"}]`,
		"gen_ai.output.messages": `[{"role":"assistant","content":"[redaction_failed]"}]`,
	})
	if !strings.Contains(buf.String(), "otel middleware: Redact panicked: boom") {
		t.Fatalf("log: %s", buf.String())
	}
}

func TestCallbacks(t *testing.T) {
	h := newHarness(t)
	var ended []string
	opts := otelmw.Options{
		SpanNameFormatter: func(i otelmw.SpanInfo) string {
			if i.Scope == otelmw.ScopeTool {
				return "tool/" + i.ToolName + "/" + i.ToolCallID
			}
			return ""
		},
		AttributeEnricher: func(i otelmw.SpanInfo) []attribute.KeyValue {
			return []attribute.KeyValue{attribute.String("app.scope", string(i.Scope)), attribute.Int("app.iteration", i.Iteration)}
		},
		OnBeforeSpanStart: func(i otelmw.SpanInfo, s otelmw.SpanStart) otelmw.SpanStart {
			if i.Scope == otelmw.ScopeChat {
				s.Kind = trace.SpanKindServer
				s.Attributes = append(s.Attributes, attribute.String("app.run", i.Run.RunID))
			}
			return s
		},
		OnSpanEnd: func(i otelmw.SpanInfo, s trace.Span) {
			ended = append(ended, string(i.Scope))
			s.SetAttributes(attribute.Bool("app.ended", true))
		},
	}
	mwtest.Collect(t, chat.Options{Adapter: toolThenText(), Messages: mwtest.User("x"), Tools: []*chat.Tool{addTool()}, RunID: "run-7",
		Middleware: []*chat.Middleware{h.mw(t, opts)}})
	spans := h.spans(t)
	tool := spans["tool/add/call_1"]
	if tool == nil {
		t.Fatalf("spans %v", keys(spans))
	}
	wantAttrs(t, tool, map[string]string{"app.scope": "tool", "app.iteration": "0", "app.ended": "true"})
	root := spans["chat test-1"]
	wantAttrs(t, root, map[string]string{"app.scope": "chat", "app.run": "run-7", "app.ended": "true"})
	if root.SpanKind() != trace.SpanKindServer {
		t.Errorf("root kind %v", root.SpanKind())
	}
	wantAttrs(t, spans["chat test-1 #1"], map[string]string{"app.scope": "iteration", "app.iteration": "1"})
	if fmt.Sprint(ended) != "[tool iteration iteration chat]" {
		t.Errorf("OnSpanEnd order %v", ended)
	}
}

// A panicking callback is logged and the run and its spans go on.
func TestPanickingCallbackDoesNotFailRun(t *testing.T) {
	h := newHarness(t)
	var buf bytes.Buffer
	mwtest.Collect(t, chat.Options{Adapter: toolThenText(), Messages: mwtest.User("x"), Tools: []*chat.Tool{addTool()},
		Debug: &chat.Debug{Logger: slog.New(slog.NewTextHandler(&buf, nil))},
		Middleware: []*chat.Middleware{h.mw(t, otelmw.Options{
			SpanNameFormatter: func(otelmw.SpanInfo) string { panic("name") },
			AttributeEnricher: func(otelmw.SpanInfo) []attribute.KeyValue { panic("enrich") },
			OnSpanEnd:         func(otelmw.SpanInfo, trace.Span) { panic("end") },
		})}})
	if n := len(h.spans(t)); n != 4 {
		t.Fatalf("%d spans", n)
	}
	for _, w := range []string{"SpanNameFormatter panicked: name", "AttributeEnricher panicked: enrich", "OnSpanEnd panicked: end"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("log lacks %q", w)
		}
	}
}

// With no tracer the middleware is a no-op and runs still work.
func TestNilTracer(t *testing.T) {
	m, err := otelmw.New(otelmw.Options{})
	if err != nil {
		t.Fatal(err)
	}
	evs := mwtest.Collect(t, chat.Options{Adapter: toolThenText(), Messages: mwtest.User("x"), Tools: []*chat.Tool{addTool()}, Middleware: []*chat.Middleware{m}})
	if len(mwtest.Of(evs, agui.ToolCallResult)) != 1 {
		t.Fatal("run did not complete")
	}
}
