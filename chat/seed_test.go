package chat_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
)

// The seed's analytics middleware: onStart, onUsage, and deferred side
// effects from onFinish that never block the stream.
func TestSeedAnalyticsMiddleware(t *testing.T) {
	var mu sync.Mutex
	var log []string
	add := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	analytics := &chat.Middleware{
		Name:    "analytics",
		OnStart: func(c *chat.Context) error { add("started " + c.Model); return nil },
		OnUsage: func(_ *chat.Context, u agui.TokenUsage) error { add("tokens"); return nil },
		OnFinish: func(c *chat.Context, info chat.FinishInfo) error {
			c.Defer(func(ctx context.Context) error { add("posted " + info.FinishReason); return nil })
			return nil
		},
		OnError: func(*chat.Context, chat.ErrorInfo) error { add("error"); return nil },
	}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "hi", "stop")}}
	if _, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{analytics}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(log, ","); got != "started test-1,tokens,posted stop" {
		t.Fatalf("got %s", got)
	}
}

// The seed's composition example: logging, a config transform that adds a
// system prompt and a sampling option under the provider's native key, and
// the order each hook kind composes in.
func TestSeedCompositionOrder(t *testing.T) {
	var order []string
	logging := &chat.Middleware{Name: "logging",
		OnStart: func(*chat.Context) error { order = append(order, "logging.start"); return nil },
		OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
			if ev.Type == agui.TextMessageContent {
				order = append(order, "logging.chunk:"+ev.Delta)
			}
			return chat.Pass, nil
		},
		OnFinish: func(*chat.Context, chat.FinishInfo) error { order = append(order, "logging.finish"); return nil },
	}
	transform := &chat.Middleware{Name: "config-transform",
		OnConfig: func(c *chat.Context, cfg *chat.Config) error {
			if c.Phase == chat.PhaseInit {
				cfg.SystemPrompts = append(cfg.SystemPrompts, chat.SystemPrompt{Content: "Always respond in JSON."})
				cfg.ModelOptions = map[string]any{"temperature": 0.2}
			}
			return nil
		},
		OnStart: func(*chat.Context) error { order = append(order, "transform.start"); return nil },
		OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
			if ev.Type == agui.TextMessageContent {
				up := *ev
				up.Delta = strings.ToUpper(ev.Delta)
				order = append(order, "transform.chunk")
				return chat.Replace(up), nil
			}
			return chat.Pass, nil
		},
		OnFinish: func(*chat.Context, chat.FinishInfo) error { order = append(order, "transform.finish"); return nil },
	}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "hi", "stop")}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{logging, transform}})
	if err != nil {
		t.Fatal(err)
	}
	want := "logging.start,transform.start,logging.chunk:hi,transform.chunk,logging.finish,transform.finish"
	if got := strings.Join(order, ","); got != want {
		t.Fatalf("order\n got %s\nwant %s", got, want)
	}
	req := a.Requests()[0]
	if req.SystemPrompts[len(req.SystemPrompts)-1].Content != "Always respond in JSON." || req.ModelOptions["temperature"] != 0.2 {
		t.Fatalf("config not applied: %+v %+v", req.SystemPrompts, req.ModelOptions)
	}
	for _, e := range evs {
		if e.Type == agui.TextMessageContent && e.Delta != "HI" {
			t.Fatalf("piped chunk: %q", e.Delta)
		}
	}
}
