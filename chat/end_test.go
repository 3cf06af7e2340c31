package chat_test

import (
	"errors"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
)

// terminalHooks counts the terminal hooks a run ran and keeps what they
// were told.
type terminalHooks struct {
	finished, failed, aborted int
	err                       error
	reason                    string
}

func (h *terminalHooks) middleware(onChunk func(*chat.Context, *agui.Event) (chat.ChunkAction, error)) *chat.Middleware {
	return &chat.Middleware{Name: "ends",
		OnChunk:  onChunk,
		OnFinish: func(*chat.Context, chat.FinishInfo) error { h.finished++; return nil },
		OnError:  func(_ *chat.Context, i chat.ErrorInfo) error { h.failed++; h.err = i.Err; return nil },
		OnAbort:  func(_ *chat.Context, i chat.AbortInfo) error { h.aborted++; h.reason = i.Reason; return nil },
	}
}

func modelErrorTurn(messages ...string) []agui.Event {
	turn := []agui.Event{{Type: agui.RunStarted, ThreadID: "t", RunID: "r"}}
	for _, m := range messages {
		turn = append(turn, agui.Event{Type: agui.RunError, Message: m, Code: "overloaded"})
	}
	return turn
}

// The model's RUN_ERROR ends the run with that error: OnError once, the
// loop stops (no second model call), nothing after the first error counts.
func TestModelErrorEndsRunOnce(t *testing.T) {
	var h terminalHooks
	a := chattest.NewAdapter(modelErrorTurn("busy", "later"), chattest.TextTurn("m", "never", "stop"))
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"),
		Middleware: []*chat.Middleware{h.middleware(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	var re *chat.RunError
	if h.failed != 1 || h.finished+h.aborted != 0 || !errors.As(h.err, &re) || re.Message != "busy" || re.Code != "overloaded" {
		t.Fatalf("onError %d (%v), onFinish %d, onAbort %d", h.failed, h.err, h.finished, h.aborted)
	}
	if len(a.Requests()) != 1 {
		t.Fatalf("%d model calls after a model error", len(a.Requests()))
	}
	if last := evs[len(evs)-1]; last.Type != agui.RunError || last.Message != "busy" {
		t.Fatalf("events %s, last %+v", chattest.Types(evs), last)
	}
}

// A middleware that aborts on the model's RUN_ERROR wins over the failure
// it was bound for: OnAbort, not OnError, and the stream ends with the abort.
func TestAbortWinsOverModelError(t *testing.T) {
	var h terminalHooks
	mw := h.middleware(func(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		if ev.Type == agui.RunError {
			c.Abort("stop on error")
		}
		return chat.Pass, nil
	})
	a := chattest.NewAdapter(modelErrorTurn("busy"))
	_, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{mw}})
	if !errors.Is(err, chat.ErrAborted) {
		t.Fatalf("stream ended with %v, want the abort", err)
	}
	if h.aborted != 1 || h.reason != "stop on error" || h.failed+h.finished != 0 {
		t.Fatalf("onAbort %d (%q), onError %d, onFinish %d", h.aborted, h.reason, h.failed, h.finished)
	}
}
