package chat

import (
	"context"
	"encoding/json"
	"time"

	"github.com/goai-sdk/goai/agui"
)

// Phase is where the run is when a hook fires.
type Phase string

const (
	PhaseInit             Phase = "init"
	PhaseBeforeModel      Phase = "beforeModel"
	PhaseModelStream      Phase = "modelStream"
	PhaseAfterModel       Phase = "afterModel"
	PhaseBeforeTools      Phase = "beforeTools"
	PhaseAfterTools       Phase = "afterTools"
	PhaseStructuredOutput Phase = "structuredOutput"
)

// Middleware observes and shapes one chat run. Every hook is optional; a nil
// hook is skipped. Hooks run in the order the middleware appear in
// Options.Middleware, with the composition of each hook documented on its
// field. A hook that returns an error or panics fails the run (onError),
// except the terminal and sandbox hooks, whose failures are logged and
// isolated. A panic (in a hook, a tool, the adapter or a strategy) is
// recovered: its stack is logged under CatErrors and the run's stream ends
// with a *RunError of code CodeInternal wrapping a *PanicError.
//
// A Middleware value may serve many runs at once; keep per-run state in a
// private capability provided in Setup (see "Per-run state" in the package
// documentation).
type Middleware struct {
	Name string

	// Requires, OptionalRequires and Provides declare capabilities. Every
	// Requires must be in the union of all Provides (checked before the run
	// starts); a Provides not provided during Setup fails the run.
	Requires         []CapabilityKey
	OptionalRequires []CapabilityKey
	Provides         []CapabilityKey

	// Setup runs first, once, sequentially.
	Setup func(c *Context) error
	// OnConfig runs at init and before every model call (and at the
	// structured-output boundary). Piped: each middleware edits the config
	// the previous one left.
	OnConfig func(c *Context, cfg *Config) error
	// OnStructuredOutputConfig runs at the structured-output boundary before
	// OnConfig. Piped.
	OnStructuredOutputConfig func(c *Context, cfg *StructuredOutputConfig) error
	// OnStart runs once after the initial OnConfig. Sequential.
	OnStart func(c *Context) error
	// OnIteration runs at the start of every agent-loop iteration. Sequential.
	OnIteration func(c *Context, info IterationInfo) error
	// OnShouldContinue votes on another iteration; the votes are ANDed and
	// the first false stops the asking.
	OnShouldContinue func(c *Context, state LoopState) (bool, error)
	// OnChunk sees every chunk. Piped per chunk: return Pass, Replace or
	// Drop. A dropped chunk is never seen by later middleware. The event is
	// the hook's own copy, valid until it returns: changing it in place
	// changes nothing for later middleware or the client; return Replace to
	// change a chunk.
	OnChunk func(c *Context, ev *agui.Event) (ChunkAction, error)
	// ChunkTypes, if set, limits OnChunk to chunks of these types: the
	// others pass this middleware by, and no copy is made for it. Every
	// chunk of a run passes every OnChunk hook, so a hook that cares about
	// a few types (a RUN_FINISHED, tool calls) should say which.
	ChunkTypes []agui.EventType
	// OnBeforeToolCall may transform arguments, skip the call with a result,
	// or abort the run. First-win: the first non-zero decision stands and
	// later middleware are not asked.
	OnBeforeToolCall func(c *Context, call *ToolCallHook) (ToolDecision, error)
	// OnAfterToolCall runs after every tool execution. Sequential.
	OnAfterToolCall func(c *Context, info AfterToolCallInfo) error
	// OnToolPhaseComplete runs after a batch of tool calls. Sequential.
	OnToolPhaseComplete func(c *Context, info ToolPhaseInfo) error
	// OnUsage runs once per RUN_FINISHED that carries usage. Sequential.
	OnUsage func(c *Context, usage agui.TokenUsage) error
	// OnFinish, OnAbort and OnError are the terminal hooks: exactly one of
	// them fires per run, and none when the run pauses on an interrupt.
	// Sequential. An OnFinish error surfaces after every OnFinish has run;
	// OnAbort and OnError errors are logged and swallowed.
	OnFinish func(c *Context, info FinishInfo) error
	OnAbort  func(c *Context, info AbortInfo) error
	OnError  func(c *Context, info ErrorInfo) error
	// OnInterruptBoundary may request generic interrupts at the boundaries
	// beforeModel, afterModel, beforeTools and afterTools. Requests from all
	// middleware are concatenated into one batch.
	OnInterruptBoundary func(c *Context) ([]InterruptRequest, error)
	// OnInterruptResolution receives the resolutions of generic interrupts
	// on resume; the most restrictive tool policy wins.
	OnInterruptResolution func(c *Context, res []InterruptResolution) (ToolResume, error)

	// Sandbox hooks fire for every file a sandbox reports during the run.
	Sandbox SandboxHooks
}

// SandboxHooks react to sandbox file events. OnFile fires first, then the
// typed hook. Errors and panics are logged and isolated.
type SandboxHooks struct {
	OnFile       func(c *Context, e FileEvent) error
	OnFileCreate func(c *Context, e FileEvent) error
	OnFileChange func(c *Context, e FileEvent) error
	OnFileDelete func(c *Context, e FileEvent) error
}

func (h SandboxHooks) empty() bool {
	return h.OnFile == nil && h.OnFileCreate == nil && h.OnFileChange == nil && h.OnFileDelete == nil
}

// FileEvent is one file created, changed or deleted in a sandbox. Before,
// After and Diff are lazy: a hook that reads only Type and Path costs nothing.
type FileEvent struct {
	Type      string // "create" | "change" | "delete"
	Path      string
	Timestamp int64 // ms
	Content   FileContent
}

// FileContent gives lazy, git-backed access to a file's content. None of
// its methods fail: failures are logged and read as "".
type FileContent interface {
	Before(ctx context.Context) string
	After(ctx context.Context) string
	Diff(ctx context.Context) string
}

// Before is the content at the session baseline ("" if new or not in git).
func (e FileEvent) Before(ctx context.Context) string {
	if e.Content == nil {
		return ""
	}
	return e.Content.Before(ctx)
}

// After is the current content ("" if deleted).
func (e FileEvent) After(ctx context.Context) string {
	if e.Content == nil {
		return ""
	}
	return e.Content.After(ctx)
}

// Diff is the unified patch against the baseline.
func (e FileEvent) Diff(ctx context.Context) string {
	if e.Content == nil {
		return ""
	}
	return e.Content.Diff(ctx)
}

// Config is what OnConfig may change.
type Config struct {
	Messages        []agui.ModelMessage
	SystemPrompts   []SystemPrompt
	Tools           []*Tool
	Resume          []ResumeItem
	Metadata        map[string]any
	ModelOptions    map[string]any
	ResumeToolState json.RawMessage
}

// StructuredOutputConfig is Config plus the JSON Schema sent to the provider.
type StructuredOutputConfig struct {
	Config
	OutputSchema json.RawMessage
}

// SystemPrompt is one system prompt with optional provider metadata.
type SystemPrompt struct {
	Content  string         `json:"content"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// IterationInfo is passed to OnIteration.
type IterationInfo struct {
	Iteration int
	MessageID string
}

// LoopState is what strategies and OnShouldContinue decide on.
type LoopState struct {
	IterationCount        int
	Messages              []agui.ModelMessage
	FinishReason          string // "" when the last turn reported none
	ToolCallCount         int
	LastTurnToolCallCount int
}

// ChunkAction is an OnChunk result. The zero value passes the chunk on.
type ChunkAction struct {
	op     chunkOp
	events []agui.Event
}

type chunkOp uint8

const (
	opPass chunkOp = iota
	opReplace
	opDrop
)

// Pass passes the chunk on unchanged.
var Pass = ChunkAction{}

// Replace replaces the chunk with one or more events; each continues down
// the middleware chain.
func Replace(events ...agui.Event) ChunkAction { return ChunkAction{op: opReplace, events: events} }

// Drop removes the chunk: later middleware and the consumer never see it.
func Drop() ChunkAction { return ChunkAction{op: opDrop} }

// ToolCallHook describes a tool call about to run.
type ToolCallHook struct {
	ToolCall   agui.ToolCall
	Tool       *Tool
	Args       json.RawMessage
	ToolName   string
	ToolCallID string
}

// ToolDecision is an OnBeforeToolCall result. The zero value continues.
type ToolDecision struct {
	kind   decisionKind
	args   json.RawMessage
	result any
	reason string
}

type decisionKind uint8

const (
	decideContinue decisionKind = iota // the zero value: ask the next middleware
	decideTransform
	decideSkip
	decideAbort
)

// TransformArgs runs the tool with different arguments.
func TransformArgs(args json.RawMessage) ToolDecision {
	return ToolDecision{kind: decideTransform, args: args}
}

// Skip does not run the tool and uses result instead.
func Skip(result any) ToolDecision { return ToolDecision{kind: decideSkip, result: result} }

// AbortRun aborts the whole run with reason.
func AbortRun(reason string) ToolDecision { return ToolDecision{kind: decideAbort, reason: reason} }

// AfterToolCallInfo is passed to OnAfterToolCall.
type AfterToolCallInfo struct {
	ToolCall   agui.ToolCall
	Tool       *Tool
	ToolName   string
	ToolCallID string
	OK         bool
	Duration   time.Duration
	Result     any
	Err        error
}

// ToolResult is one result of a tool phase.
type ToolResult struct {
	ToolCallID string
	ToolName   string
	Result     any
	State      string // "output-error" for failures
	Duration   time.Duration
	Input      json.RawMessage
}

// PendingApproval is a call waiting for a human decision.
type PendingApproval struct {
	ToolCallID string
	ToolName   string
	Input      json.RawMessage
	ApprovalID string
}

// PendingClientCall is a call the client must run.
type PendingClientCall struct {
	ToolCallID string
	ToolName   string
	Input      json.RawMessage
}

// ToolPhaseInfo is passed to OnToolPhaseComplete.
type ToolPhaseInfo struct {
	ToolCalls            []agui.ToolCall
	Results              []ToolResult
	NeedsApproval        []PendingApproval
	NeedsClientExecution []PendingClientCall
}

// FinishInfo is passed to OnFinish.
type FinishInfo struct {
	FinishReason string // "" is null
	Duration     time.Duration
	Content      string
	Usage        *agui.TokenUsage
}

// AbortInfo is passed to OnAbort.
type AbortInfo struct {
	Reason          string
	Duration        time.Duration
	CancelRequested bool
}

// ErrorInfo is passed to OnError.
type ErrorInfo struct {
	Err      error
	Duration time.Duration
}

// InterruptRequest is a generic interrupt a middleware asks for.
//
// Definition names a registered InterruptDefinition (Options.Interrupts);
// its response schema validates the client's answer on resume. An empty
// Definition is ad hoc: any answer is accepted. Key tells requests of one
// definition apart.
type InterruptRequest struct {
	Definition string
	Key        string
	Reason     string
	Message    string
	Payload    any
	ExpiresAt  string // RFC 3339; an answer after it is rejected (expired)
	Metadata   map[string]any
}

// InterruptDefinition declares a kind of generic interrupt. Resumes are
// stateless: the client echoes the interrupt's continuation metadata, and
// the server checks it against the definition it still has.
type InterruptDefinition struct {
	ID             string
	ResponseSchema json.RawMessage // validates the answer; nil accepts any
	PayloadSchema  json.RawMessage // validates the request's payload; nil accepts any
}

// InterruptResolution is how a client answered a generic interrupt.
type InterruptResolution struct {
	InterruptID string
	Definition  string
	Key         string
	Status      string // "resolved" | "cancelled"
	Payload     json.RawMessage
	Metadata    map[string]any
}

// ToolResume is the policy for pending tool calls after generic interrupts
// resolve. The zero value is ToolResumeContinue.
type ToolResume string

const (
	ToolResumeContinue ToolResume = "continue" // pending tool calls run
	ToolResumeCancel   ToolResume = "cancel"   // every pending tool call is cancelled
	ToolResumeStop     ToolResume = "stop"     // the run ends at once
)

// ResumeItem answers one interrupt of the parent run.
type ResumeItem struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Metadata    map[string]any  `json:"metadata,omitempty"`
}

// CancelRequestedReason is the abort reason of an explicit cancel request.
const CancelRequestedReason = "tanstack-ai:cancel-requested"
