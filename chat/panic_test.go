package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
)

// panicAdapter streams a few chunks of a text turn, then panics.
type panicAdapter struct {
	before int  // chunks streamed before the panic
	early  bool // panic in ChatStream itself, before returning the iterator
	value  any
}

func (a *panicAdapter) Name() string  { return "boomer" }
func (a *panicAdapter) Model() string { return "boomer-1" }
func (a *panicAdapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	if a.early {
		panic(a.value)
	}
	return func(yield func(agui.Event, error) bool) {
		for i, ev := range chattest.TextTurn("m", "hello", "stop") {
			if i == a.before {
				panic(a.value)
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// syncBuffer is a log sink shared with engine goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// errorsOnly logs the errors debug category into a buffer.
func errorsOnly() (*chat.Debug, *syncBuffer) {
	buf := &syncBuffer{}
	return &chat.Debug{Logger: slog.New(slog.NewJSONHandler(buf, nil))}, buf
}

// wantInternal asserts the run ended with a RUN_ERROR code "internal"
// naming what panicked, with the stack logged under the errors category and
// the panic value kept out of the message.
func wantInternal(t *testing.T, err error, log *syncBuffer, names string) {
	t.Helper()
	var re *chat.RunError
	if !errors.As(err, &re) || re.Code != chat.CodeInternal {
		t.Fatalf("the run should end with a RunError code %q, got %#v", chat.CodeInternal, err)
	}
	var pe *chat.PanicError
	if !errors.As(err, &pe) || len(pe.Stack) == 0 {
		t.Fatalf("no *PanicError with a stack behind %v", err)
	}
	if !strings.Contains(re.Message, names) {
		t.Fatalf("message %q does not name %s", re.Message, names)
	}
	if strings.Contains(re.Message, "sk-secret") {
		t.Fatalf("message %q carries the panic value", re.Message)
	}
	logged := log.String()
	if !strings.Contains(logged, `"category":"errors"`) || !strings.Contains(logged, "goroutine ") || !strings.Contains(logged, "panic_test.go") {
		t.Fatalf("no stack logged under the errors category:\n%s", logged)
	}
}

func TestPanickingAdapterEndsTheRunInternal(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    *panicAdapter
	}{
		{"mid-stream", &panicAdapter{before: 2, value: "sk-secret"}},
		{"before streaming", &panicAdapter{early: true, value: "sk-secret"}},
		{"runtime error", &panicAdapter{before: 1, value: nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbg, log := errorsOnly()
			var onError error
			mw := &chat.Middleware{Name: "watch", OnError: func(_ *chat.Context, i chat.ErrorInfo) error { onError = i.Err; return nil }}
			if tc.a.value == nil {
				tc.a.value = runtimeError()
			}
			evs, err := chattest.Collect(t, chat.Options{Adapter: tc.a, Messages: chattest.User("hi"), Middleware: []*chat.Middleware{mw}, Debug: dbg})
			wantInternal(t, err, log, `adapter "boomer": panic`)
			if onError == nil {
				t.Fatal("OnError did not run")
			}
			if tc.a.early && len(evs) != 0 || !tc.a.early && len(evs) != tc.a.before {
				t.Fatalf("events before the panic: %s", chattest.Types(evs))
			}
			if tc.name == "runtime error" && !strings.Contains(err.Error(), "index out of range [3] with length 0") {
				t.Fatalf("a runtime error's message should say which: %v", err)
			}
		})
	}
}

func runtimeError() (v any) {
	defer func() { v = recover() }()
	return index([]int{}, 3)
}

func index(s []int, i int) int { return s[i] }

func TestPanickingToolEndsTheRunInternal(t *testing.T) {
	boom := chat.NewTool("boom", "panics", func(ctx context.Context, in struct{}) (string, error) { panic("sk-secret") })
	var sums []addIn
	// Two calls in one turn: the first runs, the panicking second ends the run.
	turn := []agui.Event{
		{Type: agui.RunStarted, ThreadID: "t", RunID: "r"},
		{Type: agui.ToolCallStart, ToolCallID: "c1", ToolCallName: "add", Index: agui.Int(0)},
		{Type: agui.ToolCallArgs, ToolCallID: "c1", Delta: `{"a":1,"b":2}`},
		{Type: agui.ToolCallEnd, ToolCallID: "c1"},
		{Type: agui.ToolCallStart, ToolCallID: "c2", ToolCallName: "boom", Index: agui.Int(1)},
		{Type: agui.ToolCallArgs, ToolCallID: "c2", Delta: `{}`},
		{Type: agui.ToolCallEnd, ToolCallID: "c2"},
		{Type: agui.RunFinished, ThreadID: "t", RunID: "r", FinishReason: agui.FinishToolCalls},
	}
	a := &chattest.Adapter{Turns: [][]agui.Event{turn, chattest.TextTurn("m", "never", "stop")}}
	dbg, log := errorsOnly()
	_, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(&sums), boom}, Debug: dbg})
	wantInternal(t, err, log, `tool "boom": panic`)
	if len(sums) != 1 {
		t.Fatalf("add ran %d times, want 1", len(sums))
	}
	if len(a.Requests()) != 1 {
		t.Fatalf("the model was called again after the panic (%d calls)", len(a.Requests()))
	}
}

// TestPanickingToolsInParallelRuns: panics in tools of many runs at once
// each end their own run; the other runs finish.
func TestPanickingToolsInParallelRuns(t *testing.T) {
	boom := chat.NewTool("boom", "panics", func(ctx context.Context, in struct{}) (string, error) { panic("sk-secret") })
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			call := chattest.ToolTurn("c", "add", `{"a":1,"b":2}`)
			if i%2 == 0 {
				call = chattest.ToolTurn("c", "boom", `{}`)
			}
			a := &chattest.Adapter{Turns: [][]agui.Event{call, chattest.TextTurn("m", "ok", "stop")}}
			var err error
			for _, e := range chat.Stream(context.Background(), chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil), boom}, Debug: chat.DebugNone()}) {
				if e != nil {
					err = e
				}
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		var re *chat.RunError
		if i%2 == 0 && (!errors.As(err, &re) || re.Code != chat.CodeInternal) {
			t.Errorf("run %d (panicking tool): %v", i, err)
		}
		if i%2 == 1 && err != nil {
			t.Errorf("run %d (plain tool): %v", i, err)
		}
	}
}

// TestPanickingHooksEndTheRunInternal covers every hook that fails the run.
func TestPanickingHooksEndTheRunInternal(t *testing.T) {
	p := func() { panic("sk-secret") }
	hooks := map[string]*chat.Middleware{
		"setup":       {Setup: func(*chat.Context) error { p(); return nil }},
		"onConfig":    {OnConfig: func(*chat.Context, *chat.Config) error { p(); return nil }},
		"onStart":     {OnStart: func(*chat.Context) error { p(); return nil }},
		"onIteration": {OnIteration: func(*chat.Context, chat.IterationInfo) error { p(); return nil }},
		"onChunk":     {OnChunk: func(*chat.Context, *agui.Event) (chat.ChunkAction, error) { p(); return chat.Pass, nil }},
		"onBeforeToolCall": {OnBeforeToolCall: func(*chat.Context, *chat.ToolCallHook) (chat.ToolDecision, error) {
			p()
			return chat.ToolDecision{}, nil
		}},
		"onAfterToolCall":     {OnAfterToolCall: func(*chat.Context, chat.AfterToolCallInfo) error { p(); return nil }},
		"onToolPhaseComplete": {OnToolPhaseComplete: func(*chat.Context, chat.ToolPhaseInfo) error { p(); return nil }},
		"onUsage":             {OnUsage: func(*chat.Context, agui.TokenUsage) error { p(); return nil }},
		"onShouldContinue":    {OnShouldContinue: func(*chat.Context, chat.LoopState) (bool, error) { p(); return true, nil }},
		"onInterruptBoundary": {OnInterruptBoundary: func(*chat.Context) ([]chat.InterruptRequest, error) { p(); return nil, nil }},
		"onFinish":            {OnFinish: func(*chat.Context, chat.FinishInfo) error { p(); return nil }},
	}
	for hook, mw := range hooks {
		t.Run(hook, func(t *testing.T) {
			mw.Name = "bad"
			dbg, log := errorsOnly()
			usage := chattest.ToolTurn("c1", "add", `{"a":1,"b":2}`)
			usage[len(usage)-1].Usage = &agui.TokenUsage{TotalTokens: 3}
			a := &chattest.Adapter{Turns: [][]agui.Event{usage, chattest.TextTurn("m", "done", "stop")}}
			_, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil)}, Middleware: []*chat.Middleware{mw}, Debug: dbg})
			wantInternal(t, err, log, `middleware "bad" `+hook+`: panic`)
			var he *chat.HookError
			if !errors.As(err, &he) || he.Hook != hook {
				t.Fatalf("no HookError for %s behind %v", hook, err)
			}
		})
	}
	t.Run("strategy", func(t *testing.T) {
		dbg, log := errorsOnly()
		a := &chattest.Adapter{Turns: [][]agui.Event{chattest.ToolTurn("c1", "add", `{"a":1,"b":2}`), chattest.TextTurn("m", "done", "stop")}}
		_, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil)},
			Strategy: func(chat.LoopState) bool { p(); return true }, Debug: dbg})
		wantInternal(t, err, log, "agent loop strategy: panic")
	})
}

// TestPanicsInIsolatedHooksAreLogged: terminal OnError/OnAbort, sandbox
// hooks, disconnect listeners and deferred work are isolated: a panic is
// logged with its stack and the run's outcome stands.
func TestPanicsInIsolatedHooksAreLogged(t *testing.T) {
	p := func() { panic("sk-secret") }
	dbg, log := errorsOnly()
	d := chat.NewRunDisconnect()
	mw := &chat.Middleware{Name: "iso",
		Setup: func(c *chat.Context) error {
			n, _ := chat.RunDisconnectCapability.Get(c)
			n.Subscribe(func(context.Context) error { p(); return nil })
			c.Defer(func(context.Context) error { p(); return nil })
			return nil
		},
		OnStart: func(c *chat.Context) error {
			rt, err := chat.SandboxRuntimeCapability.Get(c)
			if err != nil {
				return err
			}
			rt.Emit(chat.FileEvent{Type: "create", Path: "a.txt"})
			d.Notify()
			return nil
		},
		Sandbox: chat.SandboxHooks{OnFileCreate: func(*chat.Context, chat.FileEvent) error { p(); return nil }},
	}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "fine", "stop")}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}, Debug: dbg, Disconnect: d})
	if err != nil {
		t.Fatalf("an isolated panic failed the run: %v", err)
	}
	if evs[len(evs)-1].Type != agui.RunFinished {
		t.Fatalf("events %s", chattest.Types(evs))
	}
	logged := log.String()
	for _, want := range []string{`middleware \"iso\" onFileCreate panicked`, "run disconnect listener panicked", "deferred work panicked"} {
		if !strings.Contains(logged, want) {
			t.Errorf("log lacks %q:\n%s", want, logged)
		}
	}
	if strings.Count(logged, `"stack":"goroutine `) < 3 {
		t.Errorf("stacks not logged:\n%s", logged)
	}
}

// TestConsumerPanicIsNotRecovered: the consumer's own panic in its loop body
// is theirs; the engine must not turn it into a run error.
func TestConsumerPanicIsNotRecovered(t *testing.T) {
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "x", "stop")}}
	mw := &chat.Middleware{Name: "noop", OnChunk: func(*chat.Context, *agui.Event) (chat.ChunkAction, error) { return chat.Pass, nil }}
	defer func() {
		if p := recover(); p != "consumer" {
			t.Fatalf("recovered %v, want the consumer's own panic", p)
		}
	}()
	for range chat.Stream(context.Background(), chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}, Debug: chat.DebugNone()}) {
		panic("consumer")
	}
}

// The RUN_ERROR a transport writes carries the code.
func TestInternalErrorIsARunError(t *testing.T) {
	_, err := chattest.Collect(t, chat.Options{Adapter: &panicAdapter{early: true, value: "x"}, Messages: chattest.User("x"), Debug: chat.DebugNone()})
	var re *chat.RunError
	if !errors.As(err, &re) {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{"code": re.Code, "message": re.Message})
	if string(b) != `{"code":"internal","message":"adapter \"boomer\": panic"}` {
		t.Fatalf("got %s", b)
	}
}
