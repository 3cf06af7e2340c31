package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool is a function the model may call. A Tool with a nil Execute is a
// client tool: the run pauses and the client runs it.
type Tool struct {
	Name        string
	Description string
	// InputSchema and OutputSchema are JSON Schemas. They are sent to the
	// model as given; arguments are validated against InputSchema only when
	// the tool was built with NewTool (or ValidateInput is set).
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// Execute runs a server tool. args is the JSON object the model sent
	// (after middleware transforms). The result may be any JSON-encodable
	// value, a string, or []agui.ContentPart for multimodal output.
	Execute func(ctx context.Context, args json.RawMessage) (any, error)
	// NeedsApproval pauses the run for a human decision before Execute.
	NeedsApproval bool
	// NeedsApprovalFor, when set, decides per call from its arguments
	// whether the call pauses for approval (a command policy, say); a call
	// needs approval when NeedsApproval is set or NeedsApprovalFor says so.
	NeedsApprovalFor func(args json.RawMessage) bool
	ApprovalSchema   json.RawMessage
	// Lazy tools are withheld from the model until discovered.
	Lazy     bool
	Metadata map[string]any
	// ValidateInput validates arguments against InputSchema before Execute.
	ValidateInput bool

	// resolved caches the compiled InputSchema; a Tool is shared by
	// concurrent runs, so it is set atomically (a lost race compiles twice).
	resolved atomic.Pointer[jsonschema.Resolved]
}

// NewTool builds a server tool from a typed Go function. The input and
// output JSON Schemas are generated from In and Out, and the model's
// arguments are validated against the input schema before fn runs.
func NewTool[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) *Tool {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("chat.NewTool(%q): input schema: %v", name, err))
	}
	t := &Tool{Name: name, Description: description, ValidateInput: true}
	t.InputSchema, _ = json.Marshal(in)
	if out, err := jsonschema.For[Out](nil); err == nil {
		t.OutputSchema, _ = json.Marshal(out)
	}
	t.Execute = func(ctx context.Context, args json.RawMessage) (any, error) {
		var v In
		if err := json.Unmarshal(args, &v); err != nil {
			return nil, fmt.Errorf("decoding arguments: %w", err)
		}
		return fn(ctx, v)
	}
	return t
}

// approvalNeeded reports whether a call with these arguments (the raw
// JSON the model sent) pauses for approval.
func (t *Tool) approvalNeeded(args string) bool {
	if t.NeedsApproval {
		return true
	}
	if t.NeedsApprovalFor == nil {
		return false
	}
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	input, ok := parseArgs(args)
	return ok && t.NeedsApprovalFor(input)
}

// NewClientTool declares a tool the client executes. The run pauses with an
// interrupt when the model calls it.
func NewClientTool[In any](name, description string) *Tool {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("chat.NewClientTool(%q): input schema: %v", name, err))
	}
	t := &Tool{Name: name, Description: description}
	t.InputSchema, _ = json.Marshal(in)
	return t
}

// validate checks args (a JSON object) against the input schema.
func (t *Tool) validate(args json.RawMessage) error {
	if !t.ValidateInput || len(t.InputSchema) == 0 {
		return nil
	}
	resolved := t.resolved.Load()
	if resolved == nil {
		var s jsonschema.Schema
		if err := json.Unmarshal(t.InputSchema, &s); err != nil {
			return fmt.Errorf("invalid input schema: %w", err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			return fmt.Errorf("invalid input schema: %w", err)
		}
		t.resolved.Store(r)
		resolved = r
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return err
	}
	return resolved.Validate(v)
}

// validateJSON checks a JSON value against a JSON Schema.
func validateJSON(schema, value json.RawMessage) error {
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("invalid schema: %w", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return fmt.Errorf("invalid schema: %w", err)
	}
	var v any
	if len(value) == 0 {
		value = json.RawMessage("null")
	}
	if err := json.Unmarshal(value, &v); err != nil {
		return err
	}
	return r.Validate(v)
}

// DuplicateToolNameError reports two tools with one name.
type DuplicateToolNameError struct{ Name string }

func (e *DuplicateToolNameError) Error() string {
	return fmt.Sprintf("DuplicateToolNameError: duplicate tool name %q: every tool passed to chat must have a unique name", e.Name)
}

func checkUniqueTools(tools []*Tool) error {
	seen := make(map[string]bool, len(tools))
	for _, t := range tools {
		if t == nil {
			return fmt.Errorf("chat: nil tool")
		}
		if strings.TrimSpace(t.Name) == "" {
			return fmt.Errorf("chat: tool with an empty name")
		}
		if seen[t.Name] {
			return &DuplicateToolNameError{Name: t.Name}
		}
		seen[t.Name] = true
	}
	return nil
}

type toolCallKey struct{}

// ToolCall describes the running tool call to Execute through its context.
type ToolCall struct {
	ID string
	// UserContext is the caller's Options.UserContext.
	UserContext any
	// Run is the run's middleware context (read-only for tools).
	Run  *Context
	emit func(name string, value map[string]any)
}

// EmitCustomEvent streams a CUSTOM event while the tool runs; the call id is
// added to value as toolCallId.
func (tc *ToolCall) EmitCustomEvent(name string, value map[string]any) {
	if tc != nil && tc.emit != nil {
		tc.emit(name, value)
	}
}

// ToolCallFrom returns the tool call running in ctx.
func ToolCallFrom(ctx context.Context) (*ToolCall, bool) {
	tc, ok := ctx.Value(toolCallKey{}).(*ToolCall)
	return tc, ok
}
