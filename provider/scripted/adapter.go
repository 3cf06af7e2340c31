package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/internal/jsonlex"
	"github.com/goai-sdk/goai/provider/internal/wire"
)

// Adapter replays a scenario's turns, one per ChatStream call, across every
// run that uses it. It is safe for concurrent use.
type Adapter struct {
	sc    *Scenario
	model string

	mu    sync.Mutex
	calls int
	log   []Call
}

// Call records what one adapter call received.
type Call struct {
	Kind     string // "chatStream" | "structuredOutput"
	Messages []agui.ModelMessage
	Tools    []string
}

// New returns an adapter for sc.
func New(sc *Scenario) *Adapter { return &Adapter{sc: sc, model: "scripted-1"} }

// Name implements chat.Adapter.
func (a *Adapter) Name() string { return "scripted" }

// Model implements chat.Adapter.
func (a *Adapter) Model() string { return a.model }

// maxCallLog bounds the call log, so a long-lived goai serve --model
// scripted:FILE does not grow without end.
const maxCallLog = 256

// record appends to the call log; a.mu is held.
func (a *Adapter) record(c Call) {
	if len(a.log) == maxCallLog {
		copy(a.log, a.log[1:])
		a.log = a.log[:maxCallLog-1]
	}
	a.log = append(a.log, c)
}

// Calls returns what the most recent calls (up to 256) received, in order.
func (a *Adapter) Calls() []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Call(nil), a.log...)
}

// Reset starts the script over.
func (a *Adapter) Reset() {
	a.mu.Lock()
	a.calls = 0
	a.log = nil
	a.mu.Unlock()
}

// ChatStream yields the next turn.
func (a *Adapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	a.mu.Lock()
	n := a.calls
	a.calls++
	names := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		names[i] = t.Name
	}
	a.record(Call{Kind: "chatStream", Messages: append([]agui.ModelMessage(nil), req.Messages...), Tools: names})
	a.mu.Unlock()
	if a.sc.Cycle && a.sc.NumTurns() > 0 {
		n %= a.sc.NumTurns()
	}
	return func(yield func(agui.Event, error) bool) {
		if n >= a.sc.NumTurns() {
			exhausted(yield)
			return
		}
		p := pacer{ctx: ctx, stamp: a.sc.StampYield}
		defer p.stop()
		if a.sc.lazyTurns != nil {
			p.replayLazy(a.sc.lazyTurns[n], n, yield)
		} else {
			p.replay(a.sc.Turns[n], yield)
		}
	}
}

// exhausted ends a call past the script's last turn. Not inlined: the
// event would be in the frame of ChatStream's iterator, under every pause.
//
//go:noinline
func exhausted(yield func(agui.Event, error) bool) {
	yield(agui.Event{Type: agui.RunError, Message: "script exhausted"}, nil)
}

// fail ends a call with err. Not inlined, for the same reason, in the
// replay's frame.
//
//go:noinline
func fail(yield func(agui.Event, error) bool, err error) {
	yield(agui.Event{}, err)
}

// pacer replays one turn, pausing where the scenario says. A run waiting
// on a paced model parks in a pause, with the replay's frames on its stack:
// they are kept small (one event each), and so is the stack of every
// waiting run.
type pacer struct {
	ctx   context.Context
	stamp bool        // set each chunk's timestamp to when it is yielded
	t     *time.Timer // one per turn, not per pause: a paced turn pauses before every chunk
}

func (p *pacer) pause(ms int) bool {
	if d := time.Duration(ms) * time.Millisecond; p.t == nil {
		p.t = time.NewTimer(d)
	} else {
		p.t.Reset(d) // no stale tick: the last pause received it or ended the turn
	}
	select {
	case <-p.ctx.Done():
		return false
	case <-p.t.C:
		return true
	}
}

func (p *pacer) stop() {
	if p.t != nil {
		p.t.Stop()
	}
}

// replay yields a decoded turn.
func (p *pacer) replay(turn []Item, yield func(agui.Event, error) bool) {
	for i := range turn {
		it := &turn[i]
		if it.Delay > 0 {
			if !p.pause(it.Delay) {
				return
			}
			continue
		}
		if !p.send(yield, &it.Event) {
			return
		}
	}
}

// send yields ev, stamped with the time if the scenario asks (on a copy:
// ev may be the scenario's). Not inlined: the event it passes by value
// would be in the replay's frame, under every pause.
//
//go:noinline
func (p *pacer) send(yield func(agui.Event, error) bool, ev *agui.Event) bool {
	if p.stamp {
		stamped := *ev
		stamped.Timestamp = time.Now().UnixMilli()
		return yield(stamped, nil)
	}
	return yield(*ev, nil)
}

// replayLazy decodes turn n's chunks from their JSON as it yields them.
func (p *pacer) replayLazy(turn []byte, n int, yield func(agui.Event, error) bool) {
	ev := new(agui.Event) // on the heap: one per turn, off the frame that pauses
	s := jsonlex.New(turn)
	if err := s.ArrayStart(); err != nil {
		fail(yield, fmt.Errorf("scenario turn %d: %w", n, err))
		return
	}
	for i, first := 0, true; ; i, first = i+1, false {
		ok, err := s.NextElem(first)
		if err != nil {
			fail(yield, fmt.Errorf("scenario turn %d: %w", n, err))
			return
		}
		if !ok {
			return
		}
		raw, err := s.Raw()
		if err == nil {
			err = agui.DecodeEvent(raw, ev)
		}
		if err != nil {
			fail(yield, fmt.Errorf("scenario turn %d chunk %d: %w", n, i, err))
			return
		}
		if ev.Type == "" {
			d, err := delayOf(ev)
			if err != nil {
				fail(yield, fmt.Errorf("scenario turn %d chunk %d: %w", n, i, err))
				return
			}
			if d > 0 && !p.pause(d) {
				return
			}
			continue
		}
		if !p.send(yield, ev) {
			return
		}
	}
}

// StructuredOutput serves the scenario's "structured" answer.
func (a *Adapter) StructuredOutput(ctx context.Context, req *chat.Request, schema json.RawMessage) (*chat.StructuredResult, error) {
	a.mu.Lock()
	a.record(Call{Kind: "structuredOutput", Messages: append([]agui.ModelMessage(nil), req.Messages...)})
	a.mu.Unlock()
	st := a.sc.Structured
	if st == nil {
		return nil, errors.New("scenario has no structured answer")
	}
	if st.Error != "" {
		return nil, errors.New(st.Error)
	}
	raw := ""
	if st.Raw != nil {
		raw = *st.Raw
	}
	return wire.ParseStructured(raw, st.Usage)
}
