package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

func addTool(calls *[]addIn) *chat.Tool {
	return chat.NewTool("add", "add", func(ctx context.Context, in addIn) (map[string]float64, error) {
		if calls != nil {
			*calls = append(*calls, in)
		}
		return map[string]float64{"sum": in.A + in.B}, nil
	})
}

func TestCheck01DefaultStrategyCapsAtFiveModelCalls(t *testing.T) {
	a := &chattest.Adapter{}
	for i := 0; i < 8; i++ {
		a.Turns = append(a.Turns, chattest.ToolTurn("c"+string(rune('0'+i)), "add", `{"a":1,"b":2}`))
	}
	if _, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("go"), Tools: []*chat.Tool{addTool(nil)}}); err != nil {
		t.Fatal(err)
	}
	if len(a.Requests()) != 5 {
		t.Fatalf("model calls = %d, want 5", len(a.Requests()))
	}
}

func TestCheck02MaxIterationsTwoEndsWithToolResult(t *testing.T) {
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.ToolTurn("c1", "add", `{"a":1,"b":2}`), chattest.ToolTurn("c2", "add", `{"a":3,"b":4}`), chattest.TextTurn("m", "x", "stop")}}
	var calls []addIn
	var finish string
	mw := &chat.Middleware{Name: "f", OnFinish: func(_ *chat.Context, i chat.FinishInfo) error { finish = i.FinishReason; return nil }}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("go"), Tools: []*chat.Tool{addTool(&calls)}, Strategy: chat.MaxIterations(2), Middleware: []*chat.Middleware{mw}})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Requests()) != 2 || len(calls) != 2 {
		t.Fatalf("model calls %d, tool calls %d; want 2 and 2", len(a.Requests()), len(calls))
	}
	if last := evs[len(evs)-1]; last.Type != agui.ToolCallResult {
		t.Fatalf("last event %s, want TOOL_CALL_RESULT", last.Type)
	}
	if finish != agui.FinishToolCalls {
		t.Fatalf("onFinish finishReason %q, want tool_calls", finish)
	}
}

func TestCheck03And04ToolArgsAndSecondCallHistory(t *testing.T) {
	var got struct {
		City string `json:"city"`
	}
	var gotID string
	tool := chat.NewTool("weather", "w", func(ctx context.Context, in struct {
		City string `json:"city"`
	}) (string, error) {
		got.City = in.City
		tc, _ := chat.ToolCallFrom(ctx)
		gotID = tc.ID
		return "sunny", nil
	})
	turn := chattest.ToolTurn("call_9", "weather", `{"city":"NYC"}`)
	turn = append(turn[:1], append([]agui.Event{
		{Type: agui.TextMessageStart, MessageID: "m1", Role: "assistant"},
		{Type: agui.TextMessageContent, MessageID: "m1", Delta: "checking"},
		{Type: agui.TextMessageEnd, MessageID: "m1"},
	}, turn[1:]...)...)
	a := &chattest.Adapter{Turns: [][]agui.Event{turn, chattest.TextTurn("m2", "done", "stop")}}
	if _, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("weather?"), Tools: []*chat.Tool{tool}}); err != nil {
		t.Fatal(err)
	}
	if got.City != "NYC" || gotID != "call_9" {
		t.Fatalf("tool got %+v id %q", got, gotID)
	}
	msgs := a.Requests()[1].Messages
	if len(msgs) != 3 || msgs[1].Role != "assistant" || msgs[1].ID != "m1" || msgs[1].Content.String() != "checking" ||
		len(msgs[1].ToolCalls) != 1 || msgs[2].Role != "tool" || msgs[2].ToolCallID != "call_9" || msgs[2].Content.String() != "sunny" {
		b, _ := json.Marshal(msgs)
		t.Fatalf("second call history: %s", b)
	}
}

func TestCheck05And06HeldRunFinishedOrder(t *testing.T) {
	tool := chat.NewTool("progress", "p", func(ctx context.Context, in struct{}) (string, error) {
		tc, _ := chat.ToolCallFrom(ctx)
		tc.EmitCustomEvent("progress", map[string]any{"pct": 50})
		return "ok", nil
	})
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.ToolTurn("c1", "progress", `{}`), chattest.TextTurn("m", "done", "stop")}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("go"), Tools: []*chat.Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	want := "RUN_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END CUSTOM RUN_FINISHED TOOL_CALL_RESULT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED"
	if got := chattest.Types(evs); got != want {
		t.Fatalf("order:\n got %s\nwant %s (0.58.0: one RUN_STARTED, a RUN_FINISHED per turn)", got, want)
	}
}

func TestCheck08To10ToolErrorsBecomeResults(t *testing.T) {
	failing := chat.NewTool("boom", "b", func(ctx context.Context, in struct{}) (string, error) { return "", errors.New("kaput") })
	var called bool
	hook := &chat.Middleware{Name: "h", OnBeforeToolCall: func(_ *chat.Context, h *chat.ToolCallHook) (chat.ToolDecision, error) {
		if h.ToolName == "nope" {
			called = true
		}
		return chat.ToolDecision{}, nil
	}}
	turn := []agui.Event{{Type: agui.RunStarted, ThreadID: "t", RunID: "r"}}
	for _, c := range [][3]string{{"c1", "boom", "{}"}, {"c2", "nope", "{}"}, {"c3", "add", "{bad"}, {"c4", "add", ""}, {"c5", "add", "null"}} {
		turn = append(turn, agui.Event{Type: agui.ToolCallStart, ToolCallID: c[0], ToolCallName: c[1]},
			agui.Event{Type: agui.ToolCallArgs, ToolCallID: c[0], Delta: c[2]}, agui.Event{Type: agui.ToolCallEnd, ToolCallID: c[0]})
	}
	turn = append(turn, agui.Event{Type: agui.RunFinished, FinishReason: agui.FinishToolCalls})
	a := &chattest.Adapter{Turns: [][]agui.Event{turn, chattest.TextTurn("m", "ok", "stop")}}
	lenient := chat.NewTool("add", "add", func(ctx context.Context, in map[string]any) (int, error) { return len(in), nil })
	lenient.ValidateInput = false
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("go"), Tools: []*chat.Tool{failing, lenient}, Middleware: []*chat.Middleware{hook}})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]agui.Event{}
	for _, e := range evs {
		if e.Type == agui.ToolCallResult {
			results[e.ToolCallID] = e
		}
	}
	check := func(id, content string, isErr bool) {
		t.Helper()
		r := results[id]
		if r.Content != content {
			t.Errorf("%s content %q, want %q", id, r.Content, content)
		}
		state, _ := r.TanstackMeta()["state"].(string)
		if (state == "output-error") != isErr {
			t.Errorf("%s state %q", id, state)
		}
	}
	check("c1", `{"error":"kaput"}`, true)
	check("c2", `{"error":"Unknown tool: nope"}`, true)
	check("c3", `{"error":"Failed to parse tool arguments as JSON: {bad"}`, true)
	check("c4", "0", false)
	check("c5", "0", false)
	if called {
		t.Error("an unknown tool reached onBeforeToolCall")
	}
	if len(a.Requests()) != 2 {
		t.Errorf("the loop did not continue after tool errors")
	}
}

func TestCheck24ConfigPipedAtInitAndBeforeEveryModelCall(t *testing.T) {
	var phases []chat.Phase
	m1 := &chat.Middleware{Name: "a", OnConfig: func(c *chat.Context, cfg *chat.Config) error {
		phases = append(phases, c.Phase)
		cfg.SystemPrompts = append(cfg.SystemPrompts, chat.SystemPrompt{Content: "A"})
		return nil
	}}
	m2 := &chat.Middleware{Name: "b", OnConfig: func(c *chat.Context, cfg *chat.Config) error {
		if n := len(cfg.SystemPrompts); n == 0 || cfg.SystemPrompts[n-1].Content != "A" {
			t.Errorf("second onConfig did not see the first's output")
		}
		cfg.ModelOptions = map[string]any{"temperature": 0.2}
		return nil
	}}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.ToolTurn("c1", "add", `{"a":1,"b":1}`), chattest.TextTurn("m", "x", "stop")}}
	if _, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil)}, Middleware: []*chat.Middleware{m1, m2}}); err != nil {
		t.Fatal(err)
	}
	if got := len(phases); got != 3 || phases[0] != chat.PhaseInit || phases[1] != chat.PhaseBeforeModel {
		t.Fatalf("onConfig phases %v", phases)
	}
	if a.Requests()[0].ModelOptions["temperature"] != 0.2 {
		t.Fatalf("modelOptions not applied: %v", a.Requests()[0].ModelOptions)
	}
}

func TestCheck25And26ChunkDropExpandAndHistory(t *testing.T) {
	var laterSaw []agui.EventType
	drop := &chat.Middleware{Name: "drop", OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		switch ev.Type {
		case agui.TextMessageContent:
			return chat.Drop(), nil
		case agui.TextMessageEnd:
			return chat.Replace(agui.Event{Type: agui.Custom, Name: "x"}, *ev), nil
		}
		return chat.Pass, nil
	}}
	later := &chat.Middleware{Name: "later", OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		laterSaw = append(laterSaw, ev.Type)
		return chat.Pass, nil
	}}
	turn := chattest.TextTurn("m1", "secret", agui.FinishToolCalls)
	turn = append(turn[:4], chattest.ToolTurn("c1", "add", `{"a":1,"b":1}`)[1:]...)
	a := &chattest.Adapter{Turns: [][]agui.Event{turn, chattest.TextTurn("m2", "x", "stop")}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil)}, Middleware: []*chat.Middleware{drop, later}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == agui.TextMessageContent && e.Delta == "secret" {
			t.Fatal("dropped chunk reached the consumer")
		}
	}
	for _, ty := range laterSaw {
		if ty == agui.TextMessageContent {
			t.Fatal("dropped chunk reached later middleware")
		}
	}
	if !strings.Contains(chattest.Types(evs), "CUSTOM TEXT_MESSAGE_END") {
		t.Fatalf("expanded chunks missing: %s", chattest.Types(evs))
	}
	if got := a.Requests()[1].Messages[1].Content.String(); got != "secret" {
		t.Fatalf("history lost dropped text: %q", got)
	}
}

func TestCheck29To31BeforeToolCallDecisions(t *testing.T) {
	var afterCount int
	var calls []addIn
	first := &chat.Middleware{Name: "first", OnBeforeToolCall: func(_ *chat.Context, h *chat.ToolCallHook) (chat.ToolDecision, error) {
		switch h.ToolCallID {
		case "c1":
			return chat.Skip(map[string]any{"sum": 42}), nil
		case "c2":
			return chat.TransformArgs(json.RawMessage(`{"a":10,"b":20}`)), nil
		}
		return chat.ToolDecision{}, nil
	}}
	second := &chat.Middleware{Name: "second",
		OnBeforeToolCall: func(_ *chat.Context, h *chat.ToolCallHook) (chat.ToolDecision, error) {
			if h.ToolCallID == "c1" || h.ToolCallID == "c2" {
				t.Errorf("second middleware asked for %s after a decision", h.ToolCallID)
			}
			return chat.ToolDecision{}, nil
		},
		OnAfterToolCall: func(_ *chat.Context, info chat.AfterToolCallInfo) error {
			afterCount++
			if info.ToolCallID == "c1" && (!info.OK || info.Duration != 0) {
				t.Errorf("skip: onAfterToolCall %+v", info)
			}
			return nil
		}}
	turn := []agui.Event{{Type: agui.RunStarted}}
	for _, id := range []string{"c1", "c2"} {
		turn = append(turn, agui.Event{Type: agui.ToolCallStart, ToolCallID: id, ToolCallName: "add"},
			agui.Event{Type: agui.ToolCallArgs, ToolCallID: id, Delta: `{"a":1,"b":2}`}, agui.Event{Type: agui.ToolCallEnd, ToolCallID: id})
	}
	turn = append(turn, agui.Event{Type: agui.RunFinished, FinishReason: agui.FinishToolCalls})
	a := &chattest.Adapter{Turns: [][]agui.Event{turn, chattest.TextTurn("m", "x", "stop")}}
	if _, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(&calls)}, Middleware: []*chat.Middleware{first, second}}); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].A != 10 {
		t.Fatalf("executions %+v: skip must not execute, transformArgs must change args", calls)
	}
	if afterCount != 2 {
		t.Fatalf("onAfterToolCall ran %d times, want 2", afterCount)
	}
}

func TestCheck31AbortDecisionEndsWithoutTerminalEvent(t *testing.T) {
	var aborted, finished, errored int
	var reason string
	mw := &chat.Middleware{Name: "guard",
		OnBeforeToolCall: func(*chat.Context, *chat.ToolCallHook) (chat.ToolDecision, error) {
			return chat.AbortRun("blocked"), nil
		},
		OnAbort:  func(_ *chat.Context, i chat.AbortInfo) error { aborted++; reason = i.Reason; return nil },
		OnFinish: func(*chat.Context, chat.FinishInfo) error { finished++; return nil },
		OnError:  func(*chat.Context, chat.ErrorInfo) error { errored++; return nil },
	}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.ToolTurn("c1", "add", `{"a":1,"b":2}`)}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil)}, Middleware: []*chat.Middleware{mw}})
	var ae *chat.AbortError
	if !errors.As(err, &ae) || ae.Reason != "blocked" || !errors.Is(err, chat.ErrAborted) {
		t.Fatalf("the stream must end with the abort, got %v", err)
	}
	for _, e := range evs {
		if e.IsTerminal() {
			t.Fatalf("terminal event after abort: %s", chattest.Types(evs))
		}
	}
	if aborted != 1 || finished+errored != 0 || reason != "blocked" {
		t.Fatalf("onAbort %d (%q), onFinish %d, onError %d", aborted, reason, finished, errored)
	}
}

func TestCheck32AbortInOnStartPreventsChunks(t *testing.T) {
	var chunks, aborts int
	mw := &chat.Middleware{Name: "stop",
		OnStart: func(c *chat.Context) error { c.Abort("no"); return nil },
		OnChunk: func(*chat.Context, *agui.Event) (chat.ChunkAction, error) { chunks++; return chat.Pass, nil },
		OnAbort: func(*chat.Context, chat.AbortInfo) error { aborts++; return nil },
	}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "x", "stop")}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}})
	if !errors.Is(err, chat.ErrAborted) || len(evs) != 0 || chunks != 0 || aborts != 1 || len(a.Requests()) != 0 {
		t.Fatalf("err %v events %d chunks %d aborts %d model calls %d", err, len(evs), chunks, aborts, len(a.Requests()))
	}
}

func TestCheck33AbortDuringToolCancelsItsContext(t *testing.T) {
	started := make(chan struct{})
	var sawCancel bool
	slow := chat.NewTool("slow", "s", func(ctx context.Context, in struct{}) (string, error) {
		close(started)
		select {
		case <-ctx.Done():
			sawCancel = true
			return "", ctx.Err()
		case <-time.After(5 * time.Second):
			return "late", nil
		}
	})
	var mctx *chat.Context
	mw := &chat.Middleware{Name: "m", OnStart: func(c *chat.Context) error {
		mctx = c
		go func() { <-started; mctx.Abort("stop now") }()
		return nil
	}}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.ToolTurn("c1", "slow", `{}`)}}
	if _, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{slow}, Middleware: []*chat.Middleware{mw}}); !errors.Is(err, chat.ErrAborted) {
		t.Fatal(err)
	}
	if !sawCancel {
		t.Fatal("the tool's context was not cancelled by ctx.Abort")
	}
}

func TestCheck34CallerAbortReason(t *testing.T) {
	for _, tc := range []struct {
		cause error
		want  bool
	}{{chat.ErrCancelRequested, true}, {errors.New("user left"), false}} {
		var info chat.AbortInfo
		mw := &chat.Middleware{Name: "m", OnAbort: func(_ *chat.Context, i chat.AbortInfo) error { info = i; return nil }}
		a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "hello", "stop")}, Delay: 20 * time.Millisecond}
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		for ev := range chat.Stream(ctx, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}}) {
			if ev.Type == agui.TextMessageStart {
				cancel(tc.cause)
			}
		}
		if info.Reason != tc.cause.Error() || info.CancelRequested != tc.want {
			t.Errorf("cause %v: onAbort %+v", tc.cause, info)
		}
	}
}

func TestCheck35And36AdapterErrors(t *testing.T) {
	var gotErr error
	mw := &chat.Middleware{Name: "m", OnError: func(_ *chat.Context, i chat.ErrorInfo) error { gotErr = i.Err; return nil }}
	a := &chattest.Adapter{Turns: [][]agui.Event{{{Type: agui.RunStarted}, {Type: agui.RunError, Message: "rate limited", Code: "429"}}}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}})
	var re *chat.RunError
	if err != nil || evs[len(evs)-1].Type != agui.RunError || !errors.As(gotErr, &re) || re.Code != "429" {
		t.Fatalf("adapter RUN_ERROR: err %v events %s onError %v", err, chattest.Types(evs), gotErr)
	}
	gotErr = nil
	thrown := errors.New("socket closed")
	b := &chattest.Adapter{Err: thrown}
	_, err = chattest.Collect(t, chat.Options{Adapter: b, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}})
	if !errors.Is(err, thrown) || !errors.Is(gotErr, thrown) {
		t.Fatalf("thrown adapter error: stream err %v, onError %v", err, gotErr)
	}
}

func TestCheck37To39TerminalHookFailuresAndDefer(t *testing.T) {
	var order []string
	var mu sync.Mutex
	add := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	f1 := &chat.Middleware{Name: "f1", OnFinish: func(c *chat.Context, _ chat.FinishInfo) error {
		c.Defer(func(context.Context) error { add("deferred"); return errors.New("ignored") })
		add("f1")
		return errors.New("f1 failed")
	}}
	f2 := &chat.Middleware{Name: "f2", OnFinish: func(*chat.Context, chat.FinishInfo) error { add("f2"); panic("f2 panics") }}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "x", "stop")}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{f1, f2}, Debug: chat.DebugNone()})
	var pe *chat.PanicError
	if err == nil || !strings.Contains(err.Error(), "f1 failed") || !strings.Contains(err.Error(), `middleware "f2" onFinish: panic`) || !errors.As(err, &pe) {
		t.Fatalf("onFinish failures not surfaced together: %v", err)
	}
	if evs[len(evs)-1].Type != agui.RunFinished {
		t.Fatalf("RUN_FINISHED must precede the error")
	}
	if strings.Join(order, ",") != "f1,f2,deferred" {
		t.Fatalf("order %v", order)
	}
	// onError failures are swallowed and later hooks still run.
	var second bool
	e1 := &chat.Middleware{Name: "e1", OnError: func(*chat.Context, chat.ErrorInfo) error { panic("boom") }}
	e2 := &chat.Middleware{Name: "e2", OnError: func(*chat.Context, chat.ErrorInfo) error { second = true; return nil }}
	b := &chattest.Adapter{Turns: [][]agui.Event{{{Type: agui.RunError, Message: "x"}}}}
	if _, err := chattest.Collect(t, chat.Options{Adapter: b, Messages: chattest.User("x"), Middleware: []*chat.Middleware{e1, e2}, Debug: chat.DebugNone()}); err != nil || !second {
		t.Fatalf("onError isolation: err %v second %v", err, second)
	}
}

func TestCheck40UsageOncePerRunFinishedWithUsage(t *testing.T) {
	var totals []int64
	mw := &chat.Middleware{Name: "u", OnUsage: func(_ *chat.Context, u agui.TokenUsage) error { totals = append(totals, u.TotalTokens); return nil }}
	noUsage := chattest.ToolTurn("c1", "add", `{"a":1,"b":1}`)
	a := &chattest.Adapter{Turns: [][]agui.Event{noUsage, chattest.TextTurn("m", "x", "stop")}}
	if _, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil)}, Middleware: []*chat.Middleware{mw}}); err != nil {
		t.Fatal(err)
	}
	if len(totals) != 1 || totals[0] != 3 {
		t.Fatalf("onUsage calls %v, want [3]", totals)
	}
}

func TestCheck41ShouldContinueFalseStopsAfterResults(t *testing.T) {
	var finished bool
	mw := &chat.Middleware{Name: "once",
		OnShouldContinue: func(*chat.Context, chat.LoopState) (bool, error) { return false, nil },
		OnFinish:         func(*chat.Context, chat.FinishInfo) error { finished = true; return nil }}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.ToolTurn("c1", "add", `{"a":1,"b":1}`), chattest.TextTurn("m", "x", "stop")}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil)}, Middleware: []*chat.Middleware{mw}})
	if err != nil || len(a.Requests()) != 1 || evs[len(evs)-1].Type != agui.ToolCallResult || !finished {
		t.Fatalf("err %v calls %d last %s finished %v", err, len(a.Requests()), evs[len(evs)-1].Type, finished)
	}
}

func TestCheck42CapabilitiesAndSetupOrder(t *testing.T) {
	db := chat.NewCapability[string]("db")
	var order []string
	provider := &chat.Middleware{Name: "p", Provides: []chat.CapabilityKey{db},
		Setup:    func(c *chat.Context) error { order = append(order, "setup"); db.Provide(c, "pg"); return nil },
		OnConfig: func(*chat.Context, *chat.Config) error { order = append(order, "config"); return nil }}
	var got string
	user1 := &chat.Middleware{Name: "u", Requires: []chat.CapabilityKey{db}, OnStart: func(c *chat.Context) error {
		v, err := db.Get(c)
		got = v
		return err
	}}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "x", "stop")}}
	if _, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{provider, user1}}); err != nil {
		t.Fatal(err)
	}
	if got != "pg" || strings.Join(order, ",") != "setup,config,config" {
		t.Fatalf("got %q order %v", got, order)
	}
	// Unmet requires: rejected before any work.
	b := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "x", "stop")}}
	_, err := chattest.Collect(t, chat.Options{Adapter: b, Messages: chattest.User("x"), Middleware: []*chat.Middleware{user1}})
	if err == nil || !strings.Contains(err.Error(), `"db"`) || len(b.Requests()) != 0 {
		t.Fatalf("unmet requires: %v (calls %d)", err, len(b.Requests()))
	}
	// Declared but never provided: the run fails.
	liar := &chat.Middleware{Name: "liar", Provides: []chat.CapabilityKey{db}}
	_, err = chattest.Collect(t, chat.Options{Adapter: b, Messages: chattest.User("x"), Middleware: []*chat.Middleware{liar}, Debug: chat.DebugNone()})
	if err == nil || !strings.Contains(err.Error(), "never called provide()") {
		t.Fatalf("unprovided capability: %v", err)
	}
}

func TestCheck43DuplicateToolNames(t *testing.T) {
	a := &chattest.Adapter{}
	_, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Tools: []*chat.Tool{addTool(nil), addTool(nil)}})
	var dup *chat.DuplicateToolNameError
	if !errors.As(err, &dup) || dup.Name != "add" || len(a.Requests()) != 0 {
		t.Fatalf("err %v", err)
	}
}

func TestCheck44InProcessUsageAndWireForm(t *testing.T) {
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "x", "stop")}}
	a.Turns[0][4].Usage.Extra = map[string]json.RawMessage{"cost": json.RawMessage("0.5")}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x")})
	if err != nil {
		t.Fatal(err)
	}
	rf := evs[len(evs)-1]
	if rf.Usage == nil || rf.Usage.PromptTokens != 1 || rf.FinishReason != "" || rf.FinishReasonValue() != "stop" {
		t.Fatalf("in-process RUN_FINISHED: %s", agui.AppendJSON(nil, &rf))
	}
	wire := string(agui.AppendWire(nil, &rf))
	if !strings.Contains(wire, `"usage":[{"inputTokens":1,"outputTokens":2,"totalTokens":3}]`) || !strings.Contains(wire, `"usage":{"cost":0.5}`) {
		t.Fatalf("wire RUN_FINISHED: %s", wire)
	}
}

func TestCheck53DebugCategories(t *testing.T) {
	run := func(d *chat.Debug) string {
		var buf bytes.Buffer
		l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if d != nil {
			d.Logger = l
		} else {
			d = &chat.Debug{Logger: l, Categories: map[string]bool{}}
			for _, c := range []string{"request", "provider", "output", "middleware", "tools", "agentLoop", "config", "sandbox"} {
				d.Categories[c] = false
			}
		}
		mw := &chat.Middleware{Name: "m", OnStart: func(*chat.Context) error { return nil }}
		a := &chattest.Adapter{Turns: [][]agui.Event{{{Type: agui.RunError, Message: "bad"}}}}
		for range chat.Stream(context.Background(), chat.Options{Adapter: a, Messages: chattest.User("x"), Debug: d, Middleware: []*chat.Middleware{mw}}) {
		}
		return buf.String()
	}
	if out := run(nil); strings.Contains(out, "agentLoop") {
		t.Errorf("errors-only logged other categories: %s", out)
	}
	if out := run(chat.DebugNone()); out != "" {
		t.Errorf("debug false logged: %s", out)
	}
	out := run(&chat.Debug{Categories: map[string]bool{"middleware": false}})
	if strings.Contains(out, "tanstack-ai:middleware") || !strings.Contains(out, "tanstack-ai:agentLoop") {
		t.Errorf("{middleware:false}: %s", out)
	}
}

func TestConsumerBreakAbortsAndLeaksNothing(t *testing.T) {
	var aborted bool
	mw := &chat.Middleware{Name: "m", OnAbort: func(*chat.Context, chat.AbortInfo) error { aborted = true; return nil }}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "x", "stop")}}
	for ev := range chat.Stream(context.Background(), chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}}) {
		if ev.Type == agui.TextMessageStart {
			break
		}
	}
	if !aborted {
		t.Fatal("breaking the iteration did not abort the run")
	}
}

func TestPanickingHookFailsRunWithOnError(t *testing.T) {
	var gotErr error
	mw := &chat.Middleware{Name: "bad", OnStart: func(*chat.Context) error { panic("oops") },
		OnError: func(_ *chat.Context, i chat.ErrorInfo) error { gotErr = i.Err; return nil }}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "x", "stop")}}
	_, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}, Debug: chat.DebugNone()})
	var he *chat.HookError
	if !errors.As(err, &he) || he.Hook != "onStart" || gotErr == nil {
		t.Fatalf("err %v onError %v", err, gotErr)
	}
}

// BenchmarkHotPath streams text deltas through three pass-through
// middleware into the SSE encoder writing to io.Discard.
func BenchmarkHotPath(b *testing.B) {
	const n = 10000
	turn := []agui.Event{{Type: agui.RunStarted, ThreadID: "t", RunID: "r"}, {Type: agui.TextMessageStart, MessageID: "m", Role: "assistant"}}
	for i := 0; i < n; i++ {
		turn = append(turn, agui.Event{Type: agui.TextMessageContent, MessageID: "m", Delta: "token "})
	}
	turn = append(turn, agui.Event{Type: agui.TextMessageEnd, MessageID: "m"}, agui.Event{Type: agui.RunFinished, FinishReason: "stop"})
	noop := func() *chat.Middleware {
		return &chat.Middleware{Name: "noop", OnChunk: func(*chat.Context, *agui.Event) (chat.ChunkAction, error) { return chat.Pass, nil }}
	}
	mws := []*chat.Middleware{noop(), noop(), noop()}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a := &chattest.Adapter{Turns: [][]agui.Event{turn}}
		w := agui.NewWriter(io.Discard, agui.WriterOptions{})
		for ev := range chat.Stream(context.Background(), chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: mws}) {
			_ = w.Write(&ev)
		}
		_ = w.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(turn)), "ns/chunk")
}

func TestRunDisconnectLateSubscriberFiresAndIsAwaited(t *testing.T) {
	d := chat.NewRunDisconnect()
	var fired, done bool
	release := make(chan struct{})
	mw := &chat.Middleware{Name: "sandbox-like",
		Setup: func(c *chat.Context) error {
			d.Notify() // the client left while setup was still running
			n, err := chat.RunDisconnectCapability.Get(c)
			if err != nil {
				return err
			}
			n.Subscribe(func(context.Context) error {
				fired = true
				<-release
				done = true
				return nil
			})
			return nil
		},
		OnFinish: func(*chat.Context, chat.FinishInfo) error { close(release); return nil },
	}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "x", "stop")}}
	if _, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}, Disconnect: d}); err != nil {
		t.Fatal(err)
	}
	if !fired || !done {
		t.Fatalf("late subscriber fired=%v awaited=%v", fired, done)
	}
	// After the run ended, notifications are ignored.
	d2 := chat.NewRunDisconnect()
	var calls int
	mw2 := &chat.Middleware{Name: "m", Setup: func(c *chat.Context) error {
		n, _ := chat.RunDisconnectCapability.Get(c)
		n.Subscribe(func(context.Context) error { calls++; return nil })
		return nil
	}}
	b := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "x", "stop")}}
	if _, err := chattest.Collect(t, chat.Options{Adapter: b, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw2}, Disconnect: d2}); err != nil {
		t.Fatal(err)
	}
	d2.Notify()
	if calls != 0 || d2.Disconnected() {
		t.Fatalf("a notification after the terminal hook reached listeners (%d)", calls)
	}
}
