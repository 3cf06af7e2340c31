package chat

import (
	"fmt"
	"slices"
	"time"

	"github.com/goai-sdk/goai/agui"
)

// emit hands an event to the consumer.
func (r *run) emit(ev agui.Event) {
	if r.held != nil {
		*r.held = append(*r.held, ev)
		return
	}
	if r.consumer == consumerGone {
		return
	}
	if r.log.Enabled(CatOutput) {
		r.log.Log(CatOutput, "type="+string(ev.Type))
	}
	r.consumer = consumerInBody
	ok := r.yield(ev, nil)
	r.consumer = consumerWaiting
	if !ok {
		r.consumer = consumerGone
		r.cancel(errConsumerGone)
		return
	}
	r.mctx.ChunkIndex++
}

func now() int64 { return time.Now().UnixMilli() }

// chunkChain pipes one chunk through the OnChunk hooks from index i, then
// emits what survives. modelTurn selects the model-stream emission rules
// (RUN_FINISHED held).
func (r *run) chunkChain(ev *agui.Event, i int, modelTurn bool) error {
	for ; i < len(r.chunkMws); i++ {
		m := r.chunkMws[i]
		if len(m.ChunkTypes) > 0 && !slices.Contains(m.ChunkTypes, ev.Type) {
			continue
		}
		var act ChunkAction
		if err := r.callHook(m, "onChunk", func() error {
			var err error
			act, err = m.OnChunk(r.mctx, r.hookCopy[i].load(ev))
			return err
		}); err != nil {
			return err
		}
		switch act.op {
		case opDrop:
			if r.log.Enabled(CatMiddleware) {
				r.log.Log(CatMiddleware, fmt.Sprintf("hook=onChunk middleware=%s dropped type=%s", m.Name, ev.Type))
			}
			return nil
		case opReplace:
			for k := range act.events {
				if err := r.chunkChain(&act.events[k], i+1, modelTurn); err != nil {
					return err
				}
			}
			return nil
		}
	}
	r.emitPublic(ev, modelTurn)
	return nil
}

// emitPublic normalizes a post-middleware chunk, adds its fan-outs, and
// yields the results (docs/engine.md §4).
//
// Every model chunk passes here, at the deepest point of a run's stack, so
// its frame holds one event: what may be held back is decided by a callee
// that returns before the event is emitted, and the rare fan-outs are
// emitted from a frame of their own. A run's stack then stays in a smaller
// size class.
func (r *run) emitPublic(ev *agui.Event, modelTurn bool) {
	n := agui.Normalize(ev)
	if r.admit(&n, modelTurn) {
		r.emit(n)
	}
	if extras := agui.Fanout(ev); len(extras) > 0 {
		r.emitFanout(extras, modelTurn)
	}
}

func (r *run) emitFanout(extras []agui.Event, modelTurn bool) {
	for i := range extras {
		n := agui.Normalize(&extras[i])
		if r.admit(&n, modelTurn) {
			r.emit(n)
		}
	}
}

// admit reports whether the normalized event n is emitted now: a model
// turn's RUN_FINISHED is held, and a second public RUN_STARTED dropped.
func (r *run) admit(n *agui.Event, modelTurn bool) bool {
	if modelTurn && r.so != nil && !r.so.combined && (n.Type == agui.RunFinished || n.Type == agui.RunStarted && (r.tanstack || r.publicRunStarted)) {
		// Path A: the finalization call's pair brackets the run. 0.58.0
		// drops the loop's RUN_STARTED too, so an error in the loop arrives
		// before any RUN_STARTED; the agui profile keeps the first one.
		return false
	}
	if modelTurn && n.Type == agui.RunFinished {
		r.heldModelFinished = append(r.heldModelFinished, *n)
		return false
	}
	if n.Type == agui.RunStarted {
		if r.publicRunStarted {
			return false
		}
		r.publicRunStarted = true
	}
	return true
}

func (r *run) flushHeld(held *[]agui.Event) {
	for _, ev := range *held {
		r.emit(ev)
	}
	*held = nil
}

// pipe sends an engine-made chunk through middleware to the consumer.
func (r *run) pipe(ev agui.Event) error {
	if err := r.chunkChain(&ev, 0, false); err != nil {
		return err
	}
	return nil
}

func (r *run) syntheticFinished(reason string) agui.Event {
	return agui.WithTanstack(agui.Event{
		Type: agui.RunFinished, RunID: r.runID(), ThreadID: r.threadID, Timestamp: now(),
	}, map[string]any{"finishReason": reason, "model": r.mctx.Model})
}

func (r *run) syntheticRunStarted(fin agui.Event) error {
	if r.publicRunStarted {
		return nil
	}
	return r.pipe(agui.Event{Type: agui.RunStarted, RunID: fin.RunID, ThreadID: fin.ThreadID, Timestamp: now()})
}
