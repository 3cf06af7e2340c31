package chat

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/goai-sdk/goai/agui"
)

// callHook runs one hook, turning a panic into an error.
func (r *run) callHook(m *Middleware, hook string, fn func() error) (err error) {
	defer func() {
		if r.consumer == consumerInBody {
			return // the consumer's panic, reached through an Emit: theirs
		}
		if p := recover(); p != nil {
			pe := r.recovered(fmt.Sprintf("middleware %q %s", m.Name, hook), p)
			pe.Source = "" // the HookError names it
			err = &HookError{Middleware: m.Name, Hook: hook, Err: pe}
		}
	}()
	if r.log.Enabled(CatMiddleware) && hook != "onChunk" {
		r.log.Log(CatMiddleware, fmt.Sprintf("hook=%s middleware=%s", hook, m.Name))
	}
	if err := fn(); err != nil {
		var ae *abortError
		if errors.As(err, &ae) {
			return err
		}
		var he *HookError
		if errors.As(err, &he) {
			return err
		}
		return &HookError{Middleware: m.Name, Hook: hook, Err: err}
	}
	return nil
}

// eachHook runs a sequential hook on every middleware; the first error stops.
func (r *run) eachHook(hook string, fn func(m *Middleware) error) error {
	for _, m := range r.mws {
		if err := r.callHook(m, hook, func() error { return fn(m) }); err != nil {
			return err
		}
		if r.end == endAborting {
			return nil
		}
	}
	return nil
}

func (r *run) runSetup() error {
	if err := r.eachHook("setup", func(m *Middleware) error {
		if m.Setup == nil {
			return nil
		}
		return m.Setup(r.mctx)
	}); err != nil {
		return err
	}
	for _, m := range r.mws {
		for _, p := range m.Provides {
			if _, ok := r.mctx.Lookup(p); !ok {
				return fmt.Errorf("middleware %q declares it provides %q but never called provide() in setup()", m.Name, p.Name())
			}
		}
	}
	return nil
}

func (r *run) currentConfig() Config {
	return Config{
		Messages:      slices.Clone(r.messages),
		SystemPrompts: slices.Clone(r.systemPrompts),
		Tools:         slices.Clone(r.tools),
		Resume:        r.resume,
		Metadata:      r.metadata,
		ModelOptions:  maps.Clone(r.modelOptions),
	}
}

// runConfig pipes the config through every OnConfig and applies it.
func (r *run) runConfig() error {
	cfg, err := r.pipeConfig(r.currentConfig())
	if err != nil {
		return err
	}
	return r.applyConfig(cfg)
}

// pipeConfig runs OnConfig hooks over cfg in order.
func (r *run) pipeConfig(cfg Config) (Config, error) {
	for _, m := range r.mws {
		if m.OnConfig == nil {
			continue
		}
		if err := r.callHook(m, "onConfig", func() error { return m.OnConfig(r.mctx, &cfg) }); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

func (r *run) applyConfig(cfg Config) error {
	if err := checkUniqueTools(cfg.Tools); err != nil {
		return err
	}
	r.messages = cfg.Messages
	r.systemPrompts = cfg.SystemPrompts
	r.tools = cfg.Tools
	r.resume = cfg.Resume
	r.metadata = cfg.Metadata
	r.modelOptions = cfg.ModelOptions
	r.mctx.Metadata = cfg.Metadata
	r.syncContext()
	return nil
}

func (r *run) runOnUsage(u agui.TokenUsage) error {
	return r.eachHook("onUsage", func(m *Middleware) error {
		if m.OnUsage == nil {
			return nil
		}
		return m.OnUsage(r.mctx, u)
	})
}

func (r *run) finishUsage() *agui.TokenUsage {
	if r.finished == nil {
		return nil
	}
	return r.finished.Usage
}

// runOnFinish runs every OnFinish; failures are joined and returned after
// all have run.
func (r *run) runOnFinish() error {
	r.end = endFinished
	r.disconnect.terminal()
	info := FinishInfo{FinishReason: r.lastFinishReason, Duration: time.Since(r.start), Content: string(r.accumulated), Usage: r.finishUsage()}
	var errs []error
	for _, m := range r.mws {
		if m.OnFinish == nil {
			continue
		}
		if err := r.callHook(m, "onFinish", func() error { return m.OnFinish(r.mctx, info) }); err != nil {
			errs = append(errs, err)
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%d middleware onFinish hooks failed: %w", len(errs), errors.Join(errs...))
}

func (r *run) runAbort(reason string) {
	r.end = endAborted
	r.disconnect.terminal()
	info := AbortInfo{Reason: reason, Duration: time.Since(r.start), CancelRequested: reason == CancelRequestedReason}
	r.aborted = &AbortError{Reason: reason, CancelRequested: info.CancelRequested}
	for _, m := range r.mws {
		if m.OnAbort == nil {
			continue
		}
		if err := r.callHook(m, "onAbort", func() error { return m.OnAbort(r.mctx, info) }); err != nil {
			r.log.Log(CatErrors, "onAbort hook failed: "+err.Error())
		}
	}
}

func (r *run) runOnError(err error) {
	r.end = endFailed
	r.disconnect.terminal()
	info := ErrorInfo{Err: err, Duration: time.Since(r.start)}
	for _, m := range r.mws {
		if m.OnError == nil {
			continue
		}
		if herr := r.callHook(m, "onError", func() error { return m.OnError(r.mctx, info) }); herr != nil {
			r.log.Log(CatErrors, "onError hook failed: "+herr.Error())
		}
	}
}
