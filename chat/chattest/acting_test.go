package chattest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
)

func TestActingAdapterActsBeforeEachTurn(t *testing.T) {
	var acted []string
	a := &chattest.ActingAdapter{
		Adapter: chattest.NewAdapter(chattest.ToolTurn("c1", "noop", `{}`), chattest.TextTurn("m", "done", agui.FinishStop)),
		Act: func(_ context.Context, req *chat.Request) {
			acted = append(acted, req.Messages[len(req.Messages)-1].Role)
		},
	}
	type in struct{}
	noop := chat.NewTool("noop", "does nothing", func(context.Context, in) (string, error) { return "ok", nil })
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("go"), Tools: []*chat.Tool{noop}})
	if err != nil {
		t.Fatal(err)
	}
	// Act saw each call's request: the user's message, then the tool result.
	if len(acted) != 2 || acted[0] != agui.RoleUser || acted[1] != agui.RoleTool {
		t.Fatalf("acted before %v, want [user tool]", acted)
	}
	if i, j := chattest.Index(evs, agui.RunFinished), chattest.LastIndex(evs, agui.RunFinished); i < 0 || j <= i {
		t.Fatalf("RUN_FINISHED first at %d, last at %d in %s", i, j, chattest.Types(evs))
	}
	if chattest.Index(evs, agui.RunError) != -1 || chattest.LastIndex(evs, agui.RunError) != -1 {
		t.Fatalf("a RUN_ERROR in %s", chattest.Types(evs))
	}
}

func TestCollectContextAbortsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a := &chattest.ActingAdapter{
		Adapter: chattest.NewAdapter(chattest.TextTurn("m", "never", agui.FinishStop)),
		Act:     func(context.Context, *chat.Request) { cancel() },
	}
	_, err := chattest.CollectContext(ctx, t, chat.Options{Adapter: a, Messages: chattest.User("go")})
	if !errors.Is(err, chat.ErrAborted) {
		t.Fatalf("err %v, want chat.ErrAborted", err)
	}
}
