package chat

import "errors"

// Attacher is implemented by adapters whose work can outlive the host that
// started it: a coding agent that writes a journal inside its sandbox keeps
// working when the server driving it dies. A successor re-runs such a run
// with Options.Attach set, and the adapter re-reads the work in flight (from
// its start) instead of starting it again. Adapters that call a model
// directly cannot: a second call would produce a different answer.
type Attacher interface {
	// CanAttach reports whether this adapter, as configured, leaves work a
	// successor can attach to.
	CanAttach() bool
}

// CanAttach reports whether a run of opts could be taken over after its
// host died: its adapter is an Attacher that can attach.
func CanAttach(opts *Options) bool {
	a, ok := opts.Adapter.(Attacher)
	return ok && a.CanAttach()
}

// ErrCannotAttach is Check's error for Options.Attach with an adapter that
// leaves nothing to attach to.
var ErrCannotAttach = errors.New("chat: Options.Attach needs an adapter that can attach to work in flight (chat.Attacher)")
