package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/goai-sdk/goai/agui"
)

// Structured-output error codes.
const (
	CodeStructuredMissing    = "structured-output-missing-result"
	CodeStructuredParse      = "structured-output-parse-failed"
	CodeStructuredValidation = "structured-output-validation-failed"
)

// Structured-output CUSTOM event names.
const (
	StructuredOutputStart    = "structured-output.start"
	StructuredOutputComplete = "structured-output.complete"
)

// StructuredOutputStreamer is implemented by adapters that stream the
// structured-output call themselves (lifecycle events, JSON deltas and a
// structured-output.complete CUSTOM event).
type StructuredOutputStreamer interface {
	StructuredOutputStream(ctx context.Context, req *Request, schema json.RawMessage) iter.Seq2[agui.Event, error]
}

// CombinedStructuredOutput is implemented by adapters that accept tools and
// an output schema in the same call. With source "event" the adapter emits
// structured-output.complete itself; otherwise ("text") the engine parses the
// final turn's text.
type CombinedStructuredOutput interface {
	SupportsCombinedToolsAndSchema(modelOptions map[string]any) bool
	CombinedStructuredOutputSource(modelOptions map[string]any) string
}

type structuredState struct {
	schema          json.RawMessage // strict, as sent to the provider
	original        json.RawMessage
	nw              *nullWidening
	combined        bool
	eventSource     bool
	data            any
	raw             string
	have            bool
	startEmitted    bool
	completeEmitted bool
	messageID       string
}

func newStructuredState(opts *Options) *structuredState {
	if opts.OutputSchema == nil {
		return nil
	}
	s := &structuredState{original: opts.OutputSchema}
	s.schema, s.nw = strictSchema(opts.OutputSchema)
	if c, ok := opts.Adapter.(CombinedStructuredOutput); ok && c.SupportsCombinedToolsAndSchema(opts.ModelOptions) {
		s.combined = true
		s.eventSource = c.CombinedStructuredOutputSource(opts.ModelOptions) == "event"
	}
	return s
}

func (s *structuredState) normalize(v any) any {
	out, _ := undoWidening(v, s.nw)
	return out
}

// completeValue reads {object, raw} from a structured-output.complete value.
func completeValue(raw json.RawMessage) (object any, text string, ok bool) {
	var v struct {
		Object any    `json:"object"`
		Raw    string `json:"raw"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return nil, "", false
	}
	return v.Object, v.Raw, true
}

// structuredModelChunk handles structured-output concerns of a model-turn
// chunk on the combined path; it returns the chunk to pass on.
func (r *run) structuredModelChunk(raw *agui.Event) (agui.Event, error) {
	s := r.so
	out := *raw
	if s == nil || !s.combined {
		return out, nil
	}
	if raw.Type == agui.Custom && raw.Name == StructuredOutputStart {
		s.startEmitted = true
		var v struct {
			MessageID string `json:"messageId"`
		}
		if json.Unmarshal(raw.Value, &v) == nil && v.MessageID != "" {
			s.messageID = v.MessageID
		}
	}
	if s.eventSource && raw.Type == agui.Custom && raw.Name == StructuredOutputComplete {
		if obj, text, ok := completeValue(raw.Value); ok {
			s.data, s.raw, s.have = s.normalize(obj), text, true
			s.completeEmitted = true
			out.Value = withObject(raw.Value, s.data)
		}
	}
	if !s.eventSource && !s.startEmitted && raw.Type == agui.TextMessageStart {
		s.startEmitted = true
		id := raw.MessageID
		if id == "" {
			id = newID("msg")
		}
		s.messageID = id
		if err := r.pipe(startEvent(id)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// ensureStructuredStart emits structured-output.start once, before the
// structured text or error.
func (r *run) ensureStructuredStart() error {
	s := r.so
	if s.startEmitted {
		return nil
	}
	s.startEmitted = true
	if s.messageID == "" {
		s.messageID = newID("msg")
	}
	return r.pipe(startEvent(s.messageID))
}

func startEvent(id string) agui.Event {
	v, _ := marshalCompact(map[string]any{"messageId": id})
	return agui.Event{Type: agui.Custom, Name: StructuredOutputStart, Value: v, Timestamp: now()}
}

func withObject(value json.RawMessage, object any) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(value, &m) != nil {
		return value
	}
	m["object"] = object
	b, err := marshalCompact(m)
	if err != nil {
		return value
	}
	return b
}

// harvestCombined parses the final turn's text on the combined path.
func (r *run) harvestCombined() error {
	s := r.so
	if s.eventSource {
		if !s.have {
			r.fail(&RunError{Message: "missing structured result", Code: CodeStructuredMissing})
		}
	} else if len(r.accumulated) == 0 {
		r.fail(&RunError{Message: "missing structured result", Code: CodeStructuredMissing})
	} else {
		var v any
		if err := json.Unmarshal(r.accumulated, &v); err != nil {
			r.fail(&RunError{Message: parseFailedMessage(string(r.accumulated)), Code: CodeStructuredParse})
		} else {
			s.data, s.raw, s.have = s.normalize(v), string(r.accumulated), true
		}
	}
	if err := r.ensureStructuredStart(); err != nil {
		return err
	}
	if s.have && r.failure == nil && !s.completeEmitted {
		val := map[string]any{"object": s.data, "raw": s.raw}
		if s.messageID != "" {
			val["messageId"] = s.messageID
		}
		b, _ := marshalCompact(val)
		if err := r.pipe(agui.Event{Type: agui.Custom, Name: StructuredOutputComplete, Value: b, Timestamp: now()}); err != nil {
			return err
		}
	}
	if r.failure != nil {
		return r.pipeFailure()
	}
	return nil
}

func parseFailedMessage(text string) string {
	detail := text
	if rs := []rune(text); len(rs) > 200 {
		detail = string(rs[:200]) + "..."
	}
	return "Failed to parse structured output as JSON. Content: " + detail
}

// structuredFinalization is path A: a separate structured-output call in
// phase structuredOutput (docs/engine.md §7).
func (r *run) structuredFinalization() error {
	schema, err := r.structuredConfig()
	if err != nil {
		return err
	}
	req := r.buildRequest()
	req.Tools = nil
	stream := r.guardStream(r.adapterLabel(), func() iter.Seq2[agui.Event, error] {
		if st, ok := r.opts.Adapter.(StructuredOutputStreamer); ok {
			return st.StructuredOutputStream(r.runCtx, req, schema)
		}
		return r.fallbackStructured(req, schema)
	})
	runErrorYielded := false
	for chunk, err := range stream {
		if err != nil {
			if r.cancelled() {
				return nil
			}
			return err
		}
		if r.cancelled() {
			break
		}
		runErrorYielded = runErrorYielded || chunk.Type == agui.RunError
		if err := r.structuredChunk(chunk); err != nil {
			return err
		}
		if r.failure != nil {
			break
		}
	}
	if r.cancelled() {
		return nil
	}
	if !r.so.have {
		r.fail(&RunError{Message: "missing structured result", Code: CodeStructuredMissing})
	}
	if r.failure == nil || runErrorYielded {
		return nil
	}
	if err := r.ensureStructuredStart(); err != nil {
		return err
	}
	return r.pipeFailure()
}

// structuredConfig runs OnStructuredOutputConfig, then OnConfig, for the
// finalization call and applies the result; schema is the one to send.
// The call gets no tools, yet the run's tools stay as they were.
func (r *run) structuredConfig() (schema json.RawMessage, err error) {
	r.mctx.Phase = PhaseStructuredOutput
	base := r.currentConfig()
	soCfg := StructuredOutputConfig{Config: base, OutputSchema: r.so.schema}
	soCfg.Tools = nil
	for _, m := range r.mws {
		if m.OnStructuredOutputConfig == nil {
			continue
		}
		if err := r.callHook(m, "onStructuredOutputConfig", func() error { return m.OnStructuredOutputConfig(r.mctx, &soCfg) }); err != nil {
			return nil, err
		}
	}
	cfg := soCfg.Config
	cfg.Tools = base.Tools
	if cfg, err = r.pipeConfig(cfg); err != nil {
		return nil, err
	}
	if err := r.applyConfig(cfg); err != nil {
		return nil, err
	}
	return soCfg.OutputSchema, nil
}

// structuredChunk notes what a finalization chunk says (the start, the
// message id, the result, usage, a failure) and passes it on.
func (r *run) structuredChunk(chunk agui.Event) error {
	s := r.so
	if chunk.Type == agui.Custom && chunk.Name == StructuredOutputStart {
		s.startEmitted = true
	}
	isText := chunk.Type == agui.TextMessageStart || chunk.Type == agui.TextMessageContent || chunk.Type == agui.TextMessageEnd
	if s.messageID == "" && isText && chunk.MessageID != "" {
		s.messageID = chunk.MessageID
	}
	if isText || chunk.Type == agui.RunError {
		if err := r.ensureStructuredStart(); err != nil {
			return err
		}
	}
	switch {
	case chunk.Type == agui.Custom && chunk.Name == StructuredOutputComplete:
		if obj, text, ok := completeValue(chunk.Value); ok {
			s.data, s.raw, s.have = s.normalize(obj), text, true
			chunk.Value = withObject(chunk.Value, s.data)
		}
	case chunk.Type == agui.RunFinished && chunk.Usage != nil:
		if err := r.runOnUsage(*chunk.Usage); err != nil {
			return err
		}
	case chunk.Type == agui.RunError:
		msg := chunk.Message
		if msg == "" && chunk.Error != nil {
			msg = chunk.Error.Message
		}
		r.fail(&RunError{Message: msg, Code: chunk.Code})
	}
	return r.pipe(chunk)
}

// pipeFailure sends the RUN_ERROR of the run's failure.
func (r *run) pipeFailure() error {
	return r.pipe(agui.Event{Type: agui.RunError, Timestamp: now(), Message: r.failure.Message, Code: r.failure.Code})
}

// fallbackStructured wraps a one-shot StructuredOutput call in the event
// lifecycle a streaming adapter would produce.
func (r *run) fallbackStructured(req *Request, schema json.RawMessage) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		id := newID("fallback")
		runID := r.opts.RunID
		if runID == "" {
			runID = id
		}
		model := r.mctx.Model
		if !yield(agui.Event{Type: agui.RunStarted, RunID: runID, ThreadID: r.threadID, Model: model, Timestamp: now()}, nil) {
			return
		}
		so, ok := r.opts.Adapter.(StructuredOutputAdapter)
		var res *StructuredResult
		var err error
		if !ok {
			err = fmt.Errorf("adapter %q does not support structured output", r.opts.Adapter.Name())
		} else {
			res, err = so.StructuredOutput(r.runCtx, req, schema)
		}
		if err != nil {
			yield(agui.Event{Type: agui.RunError, RunID: runID, ThreadID: r.threadID, Model: model, Timestamp: now(),
				Message: err.Error(), Error: &agui.ErrorInfo{Message: err.Error()}}, nil)
			return
		}
		val, _ := marshalCompact(map[string]any{"object": res.Data, "raw": res.RawText})
		for _, ev := range []agui.Event{
			{Type: agui.TextMessageStart, MessageID: id, Role: "assistant", Model: model, Timestamp: now()},
			{Type: agui.TextMessageContent, MessageID: id, Delta: res.RawText, Model: model, Timestamp: now()},
			{Type: agui.TextMessageEnd, MessageID: id, Model: model, Timestamp: now()},
			{Type: agui.Custom, Name: StructuredOutputComplete, Value: val, Model: model, Timestamp: now()},
			{Type: agui.RunFinished, RunID: runID, ThreadID: r.threadID, Model: model, Timestamp: now(), FinishReason: agui.FinishStop, Usage: res.Usage},
		} {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// structuredMessage is the history entry of a successful structured run.
func (r *run) structuredMessage() json.RawMessage {
	s := r.so
	if s == nil || !s.have {
		return nil
	}
	raw := s.raw
	if raw == "" {
		b, _ := marshalCompact(s.data)
		raw = string(b)
	}
	b, _ := marshalCompact(map[string]any{"type": "structured-output", "status": "complete", "data": s.data, "partial": s.data, "raw": raw})
	return b
}

// Structured runs the chat to a structured answer of type T: the agent
// loop, then a structured-output call whose result is validated against
// the schema (generated from T when opts.OutputSchema is nil) and decoded.
// Failures are *RunError with the structured-output codes.
func Structured[T any](ctx context.Context, opts Options) (T, error) {
	var zero T
	if opts.OutputSchema == nil {
		s, err := jsonschema.For[T](nil)
		if err != nil {
			return zero, fmt.Errorf("chat: output schema for %T: %w", zero, err)
		}
		opts.OutputSchema, _ = json.Marshal(s)
	}
	var object json.RawMessage
	for ev, err := range Stream(ctx, opts) {
		if err != nil {
			return zero, err
		}
		switch {
		case ev.Type == agui.RunError:
			return zero, &RunError{Message: ev.Message, Code: ev.Code}
		case ev.Type == agui.Custom && ev.Name == StructuredOutputComplete:
			var v struct {
				Object json.RawMessage `json:"object"`
			}
			if err := json.Unmarshal(ev.Value, &v); err == nil {
				object = v.Object
			}
		}
	}
	if object == nil {
		if ctx.Err() != nil {
			return zero, context.Cause(ctx)
		}
		return zero, &RunError{Message: "missing structured result", Code: CodeStructuredMissing}
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(opts.OutputSchema, &schema); err == nil {
		if resolved, err := schema.Resolve(nil); err == nil {
			var inst any
			_ = json.Unmarshal(object, &inst)
			if err := resolved.Validate(inst); err != nil {
				return zero, &RunError{Message: err.Error(), Code: CodeStructuredValidation}
			}
		}
	}
	var out T
	if err := json.Unmarshal(object, &out); err != nil {
		return zero, &RunError{Message: fmt.Sprintf("structured output does not decode into %T: %v", zero, err), Code: CodeStructuredValidation}
	}
	return out, nil
}
