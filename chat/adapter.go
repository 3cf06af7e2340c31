package chat

import (
	"context"
	"encoding/json"
	"iter"

	"github.com/goai-sdk/goai/agui"
)

// Adapter streams one model turn. ChatStream yields adapter chunks: AG-UI
// events with the TanStack extras at the top level (Model, FinishReason,
// Usage, Content, Args, ToolName, Index, Input). A provider failure is a
// RUN_ERROR chunk, not an error; an error from the iterator is a thrown
// failure that ends the run with onError.
type Adapter interface {
	Name() string
	Model() string
	ChatStream(ctx context.Context, req *Request) iter.Seq2[agui.Event, error]
}

// StructuredOutputAdapter produces a final structured answer in one call.
type StructuredOutputAdapter interface {
	StructuredOutput(ctx context.Context, req *Request, schema json.RawMessage) (*StructuredResult, error)
}

// StructuredResult is what StructuredOutput returns.
type StructuredResult struct {
	Data    any
	RawText string
	Usage   *agui.TokenUsage
}

// CapabilityRequirer is implemented by adapters that need capabilities
// (a harness needs a sandbox).
type CapabilityRequirer interface {
	Requires() []CapabilityKey
}

// Request is what an adapter receives for one model turn.
type Request struct {
	Model         string
	Messages      []agui.ModelMessage
	Tools         []ToolSpec
	Metadata      map[string]any
	ModelOptions  map[string]any
	SystemPrompts []SystemPrompt
	Logger        *Logger
	ThreadID      string
	RunID         string // the caller's run id override, "" if none
	ParentRunID   string
	Capabilities  *Context
	Approvals     map[string]bool
	OutputSchema  json.RawMessage // only on the native combined structured path
	// Attach asks the adapter to re-read the work an earlier host started
	// for this run rather than start it (Options.Attach, first call only).
	Attach bool
}

// ToolSpec is a tool as advertised to the model.
type ToolSpec struct {
	Name         string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Metadata     map[string]any
}

// Strategy decides whether the agent loop runs another iteration.
type Strategy func(LoopState) bool

// MaxIterations allows at most n model calls.
func MaxIterations(n int) Strategy {
	return func(s LoopState) bool { return s.IterationCount < n }
}

// UntilFinishReason stops once the last turn finished with one of reasons.
// It always allows the first iteration.
func UntilFinishReason(reasons ...string) Strategy {
	return func(s LoopState) bool {
		if s.IterationCount == 0 {
			return true
		}
		for _, r := range reasons {
			if s.FinishReason == r {
				return false
			}
		}
		return true
	}
}

// CombineStrategies continues only while every strategy does.
func CombineStrategies(ss ...Strategy) Strategy {
	return func(s LoopState) bool {
		ok := true
		for _, st := range ss {
			if !st(s) {
				ok = false
			}
		}
		return ok
	}
}
