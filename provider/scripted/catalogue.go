package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// Catalogue builds the fixed tools and middleware scenarios name, and
// records hook calls for the log_hooks middleware.
type Catalogue struct {
	mu    sync.Mutex
	hooks []HookRecord
	// Cache, when set, builds the "cache" middleware (the tool cache lives
	// in its own package so the engine does not depend on it).
	Cache func() *chat.Middleware
	// Record makes the catalogue keep the hook calls and tool executions
	// that Hooks returns. Off, it keeps none: a server shares one
	// catalogue between all its runs and never reads them, and they grew
	// with every tool call for as long as it ran.
	Record bool
}

// HookRecord is one recorded hook call.
type HookRecord struct {
	Hook      string `json:"hook"`
	Phase     string `json:"phase"`
	Iteration int    `json:"iteration"`
	Detail    any    `json:"detail,omitempty"`
}

// Hooks returns the recorded hook calls.
func (c *Catalogue) Hooks() []HookRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]HookRecord(nil), c.hooks...)
}

func (c *Catalogue) record(ctx *chat.Context, hook string, detail any) {
	if !c.Record {
		return
	}
	c.mu.Lock()
	c.hooks = append(c.hooks, HookRecord{Hook: hook, Phase: string(ctx.Phase), Iteration: ctx.Iteration, Detail: detail})
	c.mu.Unlock()
}

// Tools returns the named catalogue tools.
func (c *Catalogue) Tools(names []string) ([]*chat.Tool, error) {
	var out []*chat.Tool
	for _, n := range names {
		t, err := c.tool(n)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}
type addOut struct {
	Sum float64 `json:"sum"`
}
type echoIn struct {
	Text *string `json:"text,omitempty"`
}
type sleepIn struct {
	Ms int `json:"ms"`
}
type sleepOut struct {
	Slept int `json:"slept"`
}
type actionIn struct {
	Action string `json:"action"`
}
type actionOut struct {
	Done string `json:"done"`
}
type pickIn struct {
	Options []string `json:"options"`
}

func (c *Catalogue) execRecord(ctx context.Context, name string, args any) {
	if !c.Record {
		return
	}
	tc, ok := chat.ToolCallFrom(ctx)
	if !ok || tc.Run == nil {
		return
	}
	c.record(tc.Run, "tool:execute", map[string]any{"toolName": name, "toolCallId": tc.ID, "args": args})
}

// catalogueSchemas are the raw JSON Schemas the reference catalogue
// declares; 0.58.0 never validates raw schemas, so neither do we here, and
// the same bytes make the same interrupt binding hashes.
var catalogueSchemas = map[string][2]string{
	"add":            {"Add two numbers.", `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`},
	"echo":           {"Echo the text back.", `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`},
	"fail":           {"Always fails.", `{"type":"object","properties":{}}`},
	"sleep":          {"Sleep for ms milliseconds.", `{"type":"object","properties":{"ms":{"type":"integer"}},"required":["ms"]}`},
	"needs_approval": {"Does something that needs approval.", `{"type":"object","properties":{"action":{"type":"string"}},"required":["action"]}`},
	"client_pick":    {"Let the user pick one of the options.", `{"type":"object","properties":{"options":{"type":"array","items":{"type":"string"}}},"required":["options"]}`},
}

func noValidate(t *chat.Tool) *chat.Tool {
	spec := catalogueSchemas[t.Name]
	t.Description = spec[0]
	t.InputSchema = json.RawMessage(spec[1])
	t.OutputSchema = nil
	t.ValidateInput = false
	return t
}

func (c *Catalogue) tool(name string) (*chat.Tool, error) {
	switch name {
	case "add":
		return noValidate(chat.NewTool("add", "Add two numbers", func(ctx context.Context, in addIn) (addOut, error) {
			c.execRecord(ctx, "add", in)
			return addOut{Sum: in.A + in.B}, nil
		})), nil
	case "echo":
		return noValidate(chat.NewTool("echo", "Echo the text", func(ctx context.Context, in echoIn) (any, error) {
			c.execRecord(ctx, "echo", in)
			if in.Text == nil {
				return nil, nil
			}
			return *in.Text, nil
		})), nil
	case "fail":
		return noValidate(chat.NewTool("fail", "Always fails", func(ctx context.Context, in struct{}) (any, error) {
			c.execRecord(ctx, "fail", map[string]any{})
			return nil, errors.New("tool failed on purpose")
		})), nil
	case "sleep":
		return noValidate(chat.NewTool("sleep", "Sleep for ms milliseconds", func(ctx context.Context, in sleepIn) (sleepOut, error) {
			c.execRecord(ctx, "sleep", in)
			t := time.NewTimer(time.Duration(in.Ms) * time.Millisecond)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return sleepOut{}, context.Cause(ctx)
			case <-t.C:
			}
			return sleepOut{Slept: in.Ms}, nil
		})), nil
	case "needs_approval":
		t := chat.NewTool("needs_approval", "An action that needs approval", func(ctx context.Context, in actionIn) (actionOut, error) {
			c.execRecord(ctx, "needs_approval", in)
			return actionOut{Done: in.Action}, nil
		})
		t.NeedsApproval = true
		return noValidate(t), nil
	case "client_pick":
		return noValidate(chat.NewClientTool[pickIn]("client_pick", "")), nil
	}
	return nil, fmt.Errorf("unknown catalogue tool %q (have add, echo, fail, sleep, needs_approval, client_pick)", name)
}

// Middleware returns the named catalogue middleware.
func (c *Catalogue) Middleware(names []string) ([]*chat.Middleware, error) {
	var out []*chat.Middleware
	for _, n := range names {
		m, err := c.middleware(n)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (c *Catalogue) middleware(name string) (*chat.Middleware, error) {
	switch name {
	case "noop":
		return &chat.Middleware{Name: "noop", OnChunk: func(*chat.Context, *agui.Event) (chat.ChunkAction, error) { return chat.Pass, nil }}, nil
	case "upper":
		return &chat.Middleware{Name: "upper", OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
			if ev.Type != agui.TextMessageContent {
				return chat.Pass, nil
			}
			up := *ev
			up.Delta = strings.ToUpper(ev.Delta)
			return chat.Replace(up), nil
		}}, nil
	case "drop_reasoning":
		return &chat.Middleware{Name: "drop_reasoning", OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
			if strings.HasPrefix(string(ev.Type), "REASONING_") {
				return chat.Drop(), nil
			}
			return chat.Pass, nil
		}}, nil
	case "cache":
		if c.Cache == nil {
			return nil, errors.New("catalogue middleware \"cache\" is not available in this build")
		}
		return c.Cache(), nil
	case "skip_add":
		return &chat.Middleware{Name: "skip_add", OnBeforeToolCall: func(_ *chat.Context, h *chat.ToolCallHook) (chat.ToolDecision, error) {
			if h.ToolName == "add" {
				return chat.Skip(map[string]any{"sum": 42}), nil
			}
			return chat.ToolDecision{}, nil
		}}, nil
	case "abort_on_fail":
		return &chat.Middleware{Name: "abort_on_fail", OnBeforeToolCall: func(_ *chat.Context, h *chat.ToolCallHook) (chat.ToolDecision, error) {
			if h.ToolName == "fail" {
				return chat.AbortRun("fail blocked"), nil
			}
			return chat.ToolDecision{}, nil
		}}, nil
	case "args_double":
		return &chat.Middleware{Name: "args_double", OnBeforeToolCall: func(_ *chat.Context, h *chat.ToolCallHook) (chat.ToolDecision, error) {
			if h.ToolName != "add" {
				return chat.ToolDecision{}, nil
			}
			var m map[string]any
			if err := json.Unmarshal(h.Args, &m); err != nil {
				return chat.ToolDecision{}, nil
			}
			for _, k := range []string{"a", "b"} {
				if f, ok := m[k].(float64); ok {
					m[k] = f * 2
				}
			}
			b, _ := json.Marshal(m)
			return chat.TransformArgs(b), nil
		}}, nil
	case "log_hooks":
		return c.logHooks(), nil
	}
	return nil, fmt.Errorf("unknown catalogue middleware %q", name)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func ids[T any](xs []T, id func(T) string) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, id(x))
	}
	return out
}

func (c *Catalogue) logHooks() *chat.Middleware {
	return &chat.Middleware{
		Name:     "log_hooks",
		Setup:    func(ctx *chat.Context) error { c.record(ctx, "setup", nil); return nil },
		OnConfig: func(ctx *chat.Context, _ *chat.Config) error { c.record(ctx, "onConfig", nil); return nil },
		OnStructuredOutputConfig: func(ctx *chat.Context, _ *chat.StructuredOutputConfig) error {
			c.record(ctx, "onStructuredOutputConfig", nil)
			return nil
		},
		OnStart: func(ctx *chat.Context) error { c.record(ctx, "onStart", nil); return nil },
		OnIteration: func(ctx *chat.Context, info chat.IterationInfo) error {
			c.record(ctx, "onIteration", map[string]any{"iteration": info.Iteration})
			return nil
		},
		OnShouldContinue: func(ctx *chat.Context, st chat.LoopState) (bool, error) {
			c.record(ctx, "onShouldContinue", map[string]any{"iterationCount": st.IterationCount, "finishReason": nullable(st.FinishReason), "toolCallCount": st.ToolCallCount})
			return true, nil
		},
		OnChunk: func(ctx *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
			c.record(ctx, "onChunk", map[string]any{"type": ev.Type})
			return chat.Pass, nil
		},
		OnBeforeToolCall: func(ctx *chat.Context, h *chat.ToolCallHook) (chat.ToolDecision, error) {
			c.record(ctx, "onBeforeToolCall", map[string]any{"toolName": h.ToolName, "toolCallId": h.ToolCallID})
			return chat.ToolDecision{}, nil
		},
		OnAfterToolCall: func(ctx *chat.Context, info chat.AfterToolCallInfo) error {
			c.record(ctx, "onAfterToolCall", map[string]any{"toolName": info.ToolName, "toolCallId": info.ToolCallID, "ok": info.OK})
			return nil
		},
		OnToolPhaseComplete: func(ctx *chat.Context, info chat.ToolPhaseInfo) error {
			c.record(ctx, "onToolPhaseComplete", map[string]any{
				"results":              ids(info.Results, func(r chat.ToolResult) string { return r.ToolCallID }),
				"needsApproval":        ids(info.NeedsApproval, func(r chat.PendingApproval) string { return r.ToolCallID }),
				"needsClientExecution": ids(info.NeedsClientExecution, func(r chat.PendingClientCall) string { return r.ToolCallID }),
			})
			return nil
		},
		OnUsage: func(ctx *chat.Context, u agui.TokenUsage) error {
			c.record(ctx, "onUsage", map[string]any{"totalTokens": u.TotalTokens})
			return nil
		},
		OnFinish: func(ctx *chat.Context, info chat.FinishInfo) error {
			c.record(ctx, "onFinish", map[string]any{"finishReason": nullable(info.FinishReason)})
			return nil
		},
		OnAbort: func(ctx *chat.Context, info chat.AbortInfo) error {
			c.record(ctx, "onAbort", map[string]any{"reason": nullable(info.Reason)})
			return nil
		},
		OnError: func(ctx *chat.Context, info chat.ErrorInfo) error {
			c.record(ctx, "onError", map[string]any{"message": info.Err.Error()})
			return nil
		},
		OnInterruptBoundary: func(ctx *chat.Context) ([]chat.InterruptRequest, error) {
			c.record(ctx, "onInterruptBoundary", nil)
			return nil, nil
		},
		OnInterruptResolution: func(ctx *chat.Context, _ []chat.InterruptResolution) (chat.ToolResume, error) {
			c.record(ctx, "onInterruptResolution", nil)
			return "", nil
		},
	}
}

// Options builds chat options for a scenario, with its catalogue tools
// and middleware and a scripted adapter.
func (c *Catalogue) Options(sc *Scenario, a chat.Adapter) (chat.Options, error) {
	tools, err := c.Tools(sc.Tools)
	if err != nil {
		return chat.Options{}, err
	}
	mws, err := c.Middleware(sc.Middleware)
	if err != nil {
		return chat.Options{}, err
	}
	opts := chat.Options{
		Adapter: a, Messages: sc.Messages, SystemPrompts: sc.SystemPrompts, Tools: tools, Middleware: mws,
		ThreadID: sc.ThreadID, RunID: sc.RunID, ParentRunID: sc.ParentRunID, State: sc.State, Resume: sc.Resume,
		OutputSchema: sc.OutputSchema,
	}
	if sc.MaxIterations > 0 {
		opts.Strategy = chat.MaxIterations(sc.MaxIterations)
	}
	return opts, nil
}
