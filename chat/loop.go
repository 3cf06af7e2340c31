package chat

import (
	"fmt"
	"log/slog"

	"github.com/goai-sdk/goai/agui"
)

func (r *run) body() error {
	if proceed, err := r.begin(); err != nil || !proceed {
		return err
	}
	if err := r.loop(); err != nil {
		return err
	}
	return r.conclude()
}

// begin runs Setup, the initial OnConfig, the resume, OnStart and the tool
// calls history left pending; proceed is false when the run already ended
// or paused.
func (r *run) begin() (proceed bool, err error) {
	if err := r.runSetup(); err != nil {
		return false, err
	}
	r.mctx.Phase = PhaseInit
	if err := r.runConfig(); err != nil {
		return false, err
	}
	if err := r.applyResume(); err != nil {
		return false, err
	}
	if err := r.eachHook("onStart", func(m *Middleware) error {
		if m.OnStart == nil {
			return nil
		}
		return m.OnStart(r.mctx)
	}); err != nil {
		return false, err
	}
	if r.cancelled() {
		return false, nil
	}
	if r.end == endStopping {
		return false, r.successfulEarlyTermination()
	}
	wait, err := r.pendingToolCalls()
	return err == nil && !wait, err
}

// loop alternates model turns and tool phases until the strategy, a pause,
// an error or the end of the run stops it.
func (r *run) loop() error {
	if r.so != nil && !r.so.combined && len(r.tools) == 0 {
		return nil // path A without tools: straight to the structured call
	}
	for !r.ending() && !r.cancelled() {
		var more bool
		var err error
		if r.cycle == cycleText {
			more, err = r.modelCycle()
		} else {
			more, err = r.toolCycle()
		}
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// modelCycle runs one model turn between its interrupt boundaries; more is
// false when the loop must stop (the model failed, the run was cancelled
// or paused).
//
// A run waiting on its model parks with modelCycle on its stack: what comes
// before and after the model's turn is in functions of their own, so that
// their frames are not part of every parked run's stack.
func (r *run) modelCycle() (more bool, err error) {
	if ok, err := r.beforeModelTurn(); !ok || err != nil {
		return false, err
	}
	if err := r.streamModelTurn(); err != nil {
		return false, err
	}
	return r.afterModelTurn()
}

// beforeModelTurn starts an iteration; false: the run paused or failed.
func (r *run) beforeModelTurn() (bool, error) {
	r.log.Log(CatAgentLoop, fmt.Sprintf("iteration=%d", r.mctx.Iteration))
	if err := r.beginIteration(); err != nil {
		return false, err
	}
	r.mctx.Phase = PhaseBeforeModel
	r.mctx.Iteration = r.iterationCount
	if err := r.runConfig(); err != nil {
		return false, err
	}
	paused, err := r.boundary(PhaseBeforeModel)
	return !paused && err == nil, err
}

// afterModelTurn holds or delivers the turn's RUN_FINISHED; more: the tool
// cycle follows.
func (r *run) afterModelTurn() (more bool, err error) {
	if r.ending() || r.cancelled() {
		return false, nil
	}
	if paused, err := r.boundary(PhaseAfterModel); err != nil || paused {
		return false, err
	}
	if r.shouldExecuteToolPhase() {
		r.heldToolFinished = append(r.heldToolFinished, r.heldModelFinished...)
		r.heldModelFinished = nil
	} else if r.so == nil || !r.so.combined {
		r.flushHeld(&r.heldModelFinished)
	}
	r.cycle = cycleTools // the tool cycle always follows
	return true, nil
}

// toolCycle runs the tool phase of the turn, then asks whether to go on.
func (r *run) toolCycle() (more bool, err error) {
	if err := r.processToolCalls(); err != nil {
		return false, err
	}
	if r.cancelled() {
		return false, nil
	}
	r.cycle = cycleText
	r.iterationCount++
	// 0.58.0 asks onShouldContinue even after a pause.
	cont, err := r.shouldContinue()
	if err != nil {
		return false, err
	}
	return cont && r.toolPhase != phaseWait, nil
}

// conclude ends a run whose loop stopped: the structured-output
// finalization, the terminal assistant message, and OnFinish or OnError.
// A paused, cancelled or already ended run has nothing to conclude.
func (r *run) conclude() error {
	r.log.Log(CatAgentLoop, "run finished", slog.String("finishReason", r.lastFinishReason))
	if r.cancelled() || r.toolPhase == phaseWait || r.end.ended() {
		return nil
	}
	if r.so != nil && !r.ending() {
		if r.so.combined {
			if err := r.harvestCombined(); err != nil {
				return err
			}
			if r.end != endFailing && !r.cancelled() {
				r.flushHeld(&r.heldModelFinished)
			}
		} else if err := r.structuredFinalization(); err != nil {
			return err
		}
		if r.cancelled() {
			return nil
		}
	}
	if r.end == endFailing {
		r.runOnError(r.failure)
		return nil
	}
	r.addTerminalAssistantMessage()
	return r.runOnFinish()
}

func (r *run) shouldExecuteToolPhase() bool {
	return r.lastFinishReason == agui.FinishToolCalls && len(r.tools) > 0 && r.calls.has()
}

func (r *run) beginIteration() error {
	r.turnState.reset(newID("msg"))
	r.mctx.CurrentMessageID = r.currentMessageID
	info := IterationInfo{Iteration: r.iterationCount, MessageID: r.currentMessageID}
	return r.eachHook("onIteration", func(m *Middleware) error {
		if m.OnIteration == nil {
			return nil
		}
		return m.OnIteration(r.mctx, info)
	})
}

func (r *run) loopState() LoopState {
	return LoopState{
		IterationCount:        r.iterationCount,
		Messages:              r.messages,
		FinishReason:          r.lastFinishReason,
		ToolCallCount:         r.toolCallCount,
		LastTurnToolCallCount: r.lastTurnToolCallCount,
	}
}

func (r *run) shouldContinue() (bool, error) {
	st := r.loopState()
	strategy := r.opts.Strategy
	if strategy == nil {
		strategy = MaxIterations(5)
	}
	var ok bool
	if err := r.guard("agent loop strategy", func() { ok = strategy(st) }); err != nil {
		return false, err
	}
	mwOK := true
	for _, m := range r.mws {
		if m.OnShouldContinue == nil {
			continue
		}
		var v bool
		if err := r.callHook(m, "onShouldContinue", func() error {
			var err error
			v, err = m.OnShouldContinue(r.mctx, st)
			return err
		}); err != nil {
			return false, err
		}
		if !v {
			mwOK = false
			break
		}
	}
	return ok && mwOK && r.toolPhase == phaseContinue, nil
}

func (r *run) successfulEarlyTermination() error {
	r.lastFinishReason = agui.FinishStop
	fin := r.syntheticFinished(agui.FinishStop)
	if err := r.syntheticRunStarted(fin); err != nil {
		return err
	}
	fin.Timestamp = now()
	fin.Outcome = &agui.Outcome{Type: "success"}
	if err := r.pipe(fin); err != nil {
		return err
	}
	return r.runOnFinish()
}
