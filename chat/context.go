package chat

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/goai-sdk/goai/agui"
)

// Context is the per-run context every hook receives. It is a
// context.Context that is cancelled when the run is aborted, by the caller
// or by a middleware, so hooks can pass it to anything that takes one.
//
// Its fields describe the run at the moment the hook is called; hooks must
// treat them as read-only.
type Context struct {
	ctx context.Context

	RequestID   string
	StreamID    string
	RunID       string
	ParentRunID string
	ThreadID    string

	Phase      Phase
	Iteration  int
	ChunkIndex int

	Provider string
	Model    string

	SystemPrompts []SystemPrompt
	ToolNames     []string
	Metadata      map[string]any
	ModelOptions  map[string]any
	MessageCount  int
	HasTools      bool

	CurrentMessageID string
	Messages         []agui.ModelMessage

	// UserContext is the caller's opaque Options.UserContext.
	UserContext any

	run *run
}

// AccumulatedContent is the text the current model turn has produced so far.
func (c *Context) AccumulatedContent() string { return string(c.run.accumulated) }

// Deadline implements context.Context.
func (c *Context) Deadline() (time.Time, bool) { return c.ctx.Deadline() }

// Done implements context.Context.
func (c *Context) Done() <-chan struct{} { return c.ctx.Done() }

// Err implements context.Context.
func (c *Context) Err() error { return c.ctx.Err() }

// Value implements context.Context.
func (c *Context) Value(key any) any { return c.ctx.Value(key) }

// Abort stops the run at its next check; OnAbort receives reason.
func (c *Context) Abort(reason string) { c.run.abort(reason) }

// Defer registers work to run after the terminal hook. It never blocks
// the stream; its error is ignored.
func (c *Context) Defer(fn func(ctx context.Context) error) {
	c.run.deferMu.Lock()
	c.run.deferred = append(c.run.deferred, fn)
	c.run.deferMu.Unlock()
}

// CreateID returns "<prefix>-<ms>-<random>".
func (c *Context) CreateID(prefix string) string { return newID(prefix) }

// Logger returns the run's debug logger.
func (c *Context) Logger() *Logger { return c.run.log }

// Provide stores a capability value for this run. A second Provide of the
// same capability replaces the first and logs a warning.
func (c *Context) Provide(key CapabilityKey, v any) {
	c.run.capMu.Lock()
	defer c.run.capMu.Unlock()
	if _, dup := c.run.caps[key]; dup {
		c.run.log.Warn(fmt.Sprintf("Capability %q provided twice; the last value wins.", key.Name()))
	}
	c.run.caps[key] = v
}

// Lookup returns a capability value and whether it was provided.
func (c *Context) Lookup(key CapabilityKey) (any, bool) {
	c.run.capMu.Lock()
	defer c.run.capMu.Unlock()
	v, ok := c.run.caps[key]
	return v, ok
}

// Context returns the run's context.Context (c itself).
func (c *Context) Context() context.Context { return c }

var _ context.Context = (*Context)(nil)

// CapabilityKey identifies a capability. Create one with NewCapability.
type CapabilityKey interface {
	Name() string
	capability()
}

// Capability is a typed capability handle: its identity is the key used in
// Requires/Provides, Get and Provide are typed accessors.
type Capability[T any] struct{ name string }

// NewCapability returns a new capability handle. Each call is a distinct
// capability; the name is for diagnostics.
func NewCapability[T any](name string) *Capability[T] { return &Capability[T]{name: name} }

// Name returns the capability's diagnostic name.
func (k *Capability[T]) Name() string { return k.name }
func (k *Capability[T]) capability()  {}

// CapabilityMissingError is returned by Get when nothing provided the capability.
type CapabilityMissingError struct{ Name string }

func (e *CapabilityMissingError) Error() string {
	return fmt.Sprintf("Capability %q was requested but never provided. Add a middleware that provides it.", e.Name)
}

// Get returns the capability's value for the run.
func (k *Capability[T]) Get(c *Context) (T, error) {
	v, ok := c.Lookup(k)
	if !ok {
		var zero T
		return zero, &CapabilityMissingError{Name: k.name}
	}
	return v.(T), nil
}

// GetOptional returns the value and whether it was provided.
func (k *Capability[T]) GetOptional(c *Context) (T, bool) {
	v, ok := c.Lookup(k)
	if !ok {
		var zero T
		return zero, false
	}
	t, ok := v.(T)
	return t, ok
}

// Provide stores the value for the run.
func (k *Capability[T]) Provide(c *Context, v T) { c.Provide(k, v) }

const idAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

// newID returns "<prefix>-<ms>-<7 base36 chars>", the reference's id shape.
func newID(prefix string) string {
	var b [7]byte
	for i := range b {
		b[i] = idAlphabet[rand.IntN(len(idAlphabet))]
	}
	return prefix + "-" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "-" + string(b[:])
}
