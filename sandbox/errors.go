package sandbox

import (
	"errors"
	"fmt"
)

// ErrUnsupported is matched (errors.Is) by every *UnsupportedCapabilityError.
var ErrUnsupported = errors.New("sandbox: unsupported capability")

// ErrOutsideRoot is matched by a *PathError for a path that resolves
// outside the sandbox root, lexically or through a symlink.
var ErrOutsideRoot = errors.New("path resolves outside the sandbox root")

// ErrSetupFailed is matched by a *SetupError.
var ErrSetupFailed = errors.New("setup step failed")

// UnsupportedCapabilityError is returned when an optional method is called
// on a provider that lacks the capability. It never silently does nothing.
type UnsupportedCapabilityError struct {
	Provider   string
	Capability string
}

func (e *UnsupportedCapabilityError) Error() string {
	return fmt.Sprintf("Sandbox provider %q does not support the %q capability.", e.Provider, e.Capability)
}

// Is reports ErrUnsupported.
func (e *UnsupportedCapabilityError) Is(target error) bool { return target == ErrUnsupported }

// PathError reports a path that a provider refused.
type PathError struct {
	Provider string
	Path     string
	Root     string
	Err      error
}

func (e *PathError) Error() string {
	return fmt.Sprintf("%s: path %q resolves outside the sandbox root %q", e.Provider, e.Path, e.Root)
}

func (e *PathError) Unwrap() error { return e.Err }

// SetupError is a failed bootstrap setup step.
type SetupError struct {
	Command  string
	ExitCode int
	// Output is the tail (last 1500 characters) of the step's output.
	Output string
}

func (e *SetupError) Error() string {
	msg := fmt.Sprintf("setup step failed: %s (exit %d)", e.Command, e.ExitCode)
	if e.Output != "" {
		msg += "\n" + e.Output
	}
	return msg
}

func (e *SetupError) Is(target error) bool { return target == ErrSetupFailed }

// CommandError reports a workspace command (such as git clone) that exited
// non-zero.
type CommandError struct {
	Command  string
	ExitCode int
	Stderr   string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("sandbox: %s exited %d: %s", e.Command, e.ExitCode, e.Stderr)
}
