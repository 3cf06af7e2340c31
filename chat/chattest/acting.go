package chattest

import (
	"context"
	"iter"
	"slices"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// ActingAdapter is an Adapter whose model acts before it answers, as a
// coding agent edits its workspace before it reports: Act runs at the
// start of every model call's stream, before the first chunk, with the
// call's context and request (whose Capabilities hold what middleware
// provided, a sandbox handle for one). Act may block, as a working model
// does; the run waits for it.
type ActingAdapter struct {
	*Adapter
	Act func(ctx context.Context, req *chat.Request)
}

// ChatStream implements chat.Adapter.
func (a *ActingAdapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	seq := a.Adapter.ChatStream(ctx, req)
	return func(yield func(agui.Event, error) bool) {
		if a.Act != nil {
			a.Act(ctx, req)
		}
		seq(yield)
	}
}

// CollectContext is Collect with the run's context: cancelling ctx
// aborts the run.
func CollectContext(ctx context.Context, t testing.TB, opts chat.Options) ([]agui.Event, error) {
	t.Helper()
	var evs []agui.Event
	for ev, err := range chat.Stream(ctx, opts) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// Index returns the position of the first event of type typ, or -1.
func Index(evs []agui.Event, typ agui.EventType) int {
	return slices.IndexFunc(evs, func(e agui.Event) bool { return e.Type == typ })
}

// LastIndex returns the position of the last event of type typ, or -1.
func LastIndex(evs []agui.Event, typ agui.EventType) int {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return i
		}
	}
	return -1
}
