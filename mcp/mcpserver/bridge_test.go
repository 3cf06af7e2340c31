package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/middleware/toolcache"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// agentAdapter stands in for a harness adapter: during its model turn it
// starts the bridge over the run's tools and, as the agent in the sandbox
// would, calls them with the Go SDK client, then reports what it got.
type agentAdapter struct {
	calls  []*mcp.CallToolParams
	mu     sync.Mutex
	got    []*mcp.CallToolResult
	errs   []error
	runner chat.ToolRunner
}

func (a *agentAdapter) Name() string  { return "agent" }
func (a *agentAdapter) Model() string { return "agent-1" }

func (a *agentAdapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		runner, err := chat.ToolRunnerCapability.Get(req.Capabilities)
		if err != nil {
			yield(agui.Event{}, err)
			return
		}
		a.runner = runner
		b, err := StartBridge(req.Tools, BridgeOptions{Call: runner.RunTool})
		if err != nil {
			yield(agui.Event{}, err)
			return
		}
		defer b.Close()
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		cl := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
		cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.URL, HTTPClient: &http.Client{Transport: bearer{tr, b.Token()}}, DisableStandaloneSSE: true}, nil)
		if err != nil {
			yield(agui.Event{}, err)
			return
		}
		defer cs.Close()
		if !yield(agui.Event{Type: agui.RunStarted, Model: "agent-1"}, nil) {
			return
		}
		for _, p := range a.calls {
			res, err := cs.CallTool(ctx, p)
			a.mu.Lock()
			a.got, a.errs = append(a.got, res), append(a.errs, err)
			a.mu.Unlock()
		}
		for _, ev := range []agui.Event{
			{Type: agui.TextMessageStart, MessageID: "m1", Role: "assistant", Model: "agent-1"},
			{Type: agui.TextMessageContent, MessageID: "m1", Delta: "done", Model: "agent-1"},
			{Type: agui.TextMessageEnd, MessageID: "m1", Model: "agent-1"},
			{Type: agui.RunFinished, FinishReason: agui.FinishStop, Model: "agent-1"},
		} {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// Bridged calls take the engine's tool path: hooks, the tool cache, CUSTOM
// events into the run's stream, tool errors as isError.
func TestBridgeRunsThroughEngine(t *testing.T) {
	var executed atomic.Int32
	lookup := chat.NewTool("lookup", "Looks up", func(ctx context.Context, in struct{ Q string }) (map[string]string, error) {
		executed.Add(1)
		if tc, ok := chat.ToolCallFrom(ctx); ok {
			tc.EmitCustomEvent("lookup.progress", map[string]any{"q": in.Q})
		}
		return map[string]string{"answer": "42 for " + in.Q}, nil
	})
	fail := chat.NewTool("fail", "Fails", func(context.Context, struct{}) (string, error) {
		return "", errors.New("no luck")
	})
	var mu sync.Mutex
	var hooks []string
	record := &chat.Middleware{
		Name: "record",
		OnBeforeToolCall: func(_ *chat.Context, h *chat.ToolCallHook) (chat.ToolDecision, error) {
			mu.Lock()
			hooks = append(hooks, "before:"+h.ToolName)
			mu.Unlock()
			return chat.ToolDecision{}, nil
		},
		OnAfterToolCall: func(_ *chat.Context, info chat.AfterToolCallInfo) error {
			mu.Lock()
			hooks = append(hooks, "after:"+info.ToolName)
			mu.Unlock()
			return nil
		},
	}
	a := &agentAdapter{calls: []*mcp.CallToolParams{
		{Name: "lookup", Arguments: map[string]any{"Q": "life"}},
		{Name: "lookup", Arguments: map[string]any{"Q": "life"}},
		{Name: "fail", Arguments: map[string]any{}},
		{Name: "lookup", Arguments: map[string]any{"Q": 7}},
		{Name: "ghost", Arguments: map[string]any{}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var evs []agui.Event
	for ev, err := range chat.Stream(ctx, chat.Options{
		Adapter:    a,
		Messages:   []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("go")}},
		Tools:      []*chat.Tool{lookup, fail},
		Middleware: []*chat.Middleware{record, toolcache.New(toolcache.Options{})},
	}) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	text := func(i int) string {
		if a.errs[i] != nil || len(a.got[i].Content) == 0 {
			return ""
		}
		return a.got[i].Content[0].(*mcp.TextContent).Text
	}
	if text(0) != `{"answer":"42 for life"}` || text(1) != text(0) {
		t.Errorf("lookup results: %q %q (%v %v)", text(0), text(1), a.errs[0], a.errs[1])
	}
	if n := executed.Load(); n != 1 {
		t.Errorf("the tool cache should have answered the second call: executed %d times", n)
	}
	if a.errs[2] != nil || !a.got[2].IsError || text(2) != "Tool execution failed: no luck" {
		t.Errorf("fail: %+v %v", a.got[2], a.errs[2])
	}
	if a.errs[3] != nil || !a.got[3].IsError || !strings.Contains(text(3), "Input validation failed for tool lookup") {
		t.Errorf("invalid input: %+v %v", a.got[3], a.errs[3])
	}
	if a.errs[4] == nil || !strings.Contains(a.errs[4].Error(), "Unknown tool: ghost") {
		t.Errorf("unknown tool: %v", a.errs[4])
	}
	mu.Lock()
	got := strings.Join(hooks, ",")
	mu.Unlock()
	if got != "before:lookup,after:lookup,before:lookup,after:lookup,before:fail,after:fail" {
		t.Errorf("hooks: %s", got)
	}
	var custom *agui.Event
	for i := range evs {
		if evs[i].Type == agui.Custom && evs[i].Name == "lookup.progress" {
			custom = &evs[i]
		}
	}
	if custom == nil {
		t.Fatal("the tool's CUSTOM event did not reach the run's stream")
	}
	var v map[string]any
	if err := json.Unmarshal(custom.Value, &v); err != nil || v["q"] != "life" || !strings.HasPrefix(v["toolCallId"].(string), "bridge-") {
		t.Errorf("custom event value %s", custom.Value)
	}
	if last := evs[len(evs)-1]; last.Type != agui.RunFinished {
		t.Errorf("run ended with %s", last.Type)
	}
	// Outside a model turn the runner refuses.
	if _, err := a.runner.RunTool(ctx, "lookup", json.RawMessage(`{"Q":"late"}`)); !errors.Is(err, chat.ErrNotStreaming) {
		t.Errorf("after the run: %v", err)
	}
}
