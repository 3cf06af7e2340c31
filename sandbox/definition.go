package sandbox

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"
)

// SourceKind says where a workspace's files come from.
type SourceKind string

const (
	SourceNone  SourceKind = ""      // an empty workspace
	SourceLocal SourceKind = "local" // a host directory copied in
	SourceGit   SourceKind = "git"   // a git repository cloned in
)

// GitAuth authenticates a clone. The token is passed to git only through
// the environment, never in argv.
type GitAuth struct {
	Username string // default "x-access-token"
	Token    string
}

// Source is a workspace source.
type Source struct {
	Kind SourceKind
	// Path is the host directory for SourceLocal.
	Path string
	// URL, Ref, Auth and Depth configure SourceGit. Depth 0 means 1; a
	// negative Depth means the full history.
	URL   string
	Ref   string
	Auth  *GitAuth
	Depth int
}

// GitHubRepo returns a git source for "owner/repo".
func GitHubRepo(repo, ref string) Source {
	return Source{Kind: SourceGit, URL: "https://github.com/" + repo + ".git", Ref: ref}
}

// SetupStep is one bootstrap step: a single serial command, or a group of
// commands run concurrently.
type SetupStep struct {
	Commands []string
	Parallel bool
}

// Serial returns one serial step per command.
func Serial(cmds ...string) []SetupStep {
	steps := make([]SetupStep, len(cmds))
	for i, c := range cmds {
		steps[i] = SetupStep{Commands: []string{c}}
	}
	return steps
}

// Parallel returns one step running cmds concurrently.
func Parallel(cmds ...string) SetupStep { return SetupStep{Commands: cmds, Parallel: true} }

// Secrets maps environment names to secret values. Its String, LogValue,
// Format and MarshalJSON methods redact the values, so secrets are never
// logged or serialized; they are also left out of the sandbox key.
type Secrets map[string]string

const redacted = "[REDACTED]"

func (s Secrets) redact() map[string]string {
	m := make(map[string]string, len(s))
	for k := range s {
		m[k] = redacted
	}
	return m
}

func (s Secrets) String() string                { return fmt.Sprint(s.redact()) }
func (s Secrets) GoString() string              { return "sandbox.Secrets" + fmt.Sprint(s.redact()) }
func (s Secrets) LogValue() slog.Value          { return slog.AnyValue(s.redact()) }
func (s Secrets) MarshalJSON() ([]byte, error)  { return json.Marshal(s.redact()) }
func (s Secrets) Format(f fmt.State, verb rune) { fmt.Fprint(f, s.String()) }

// Names returns the secret names, sorted.
func (s Secrets) Names() []string { return slices.Sorted(maps.Keys(s)) }

// Workspace describes what a new sandbox contains.
type Workspace struct {
	// Root is the virtual workspace root; default /workspace.
	Root   string
	Source Source
	Setup  []SetupStep
	// Env is plain environment, part of the sandbox key.
	Env map[string]string
	// Secrets are set into the handle environment on create, resume and
	// restore; they are not part of the key.
	Secrets      Secrets
	Scripts      map[string]string
	Instructions string
	// PackageManager overrides lockfile detection.
	PackageManager string
}

func (w *Workspace) root() string {
	if w == nil || w.Root == "" {
		return DefaultRoot
	}
	return w.Root
}

// Reuse says how long a sandbox lives.
type Reuse int

const (
	ReusePerThread Reuse = iota // one sandbox per thread (the default)
	ReusePerRun                 // one sandbox per run
)

// SnapshotPolicy says when a provider snapshot is taken.
type SnapshotPolicy string

const (
	SnapshotDefault    SnapshotPolicy = ""            // after-setup when the provider supports snapshots
	SnapshotAfterSetup SnapshotPolicy = "after-setup" // after bootstrap
	SnapshotAfterRun   SnapshotPolicy = "after-run"   // by the middleware after each run
	SnapshotNone       SnapshotPolicy = "none"
)

// Lifecycle configures reuse and teardown.
type Lifecycle struct {
	Reuse             Reuse
	Snapshot          SnapshotPolicy
	DestroyOnComplete bool
	// SnapshotMaxAge: a record older than this is re-created, not
	// resumed. Zero means no limit.
	SnapshotMaxAge time.Duration
}

// FileEvents turns the workspace watcher and diffs on or off.
type FileEvents int

const (
	FileEventsOn       FileEvents = iota // watch, no diffs (the default)
	FileEventsOff                        // no watcher, no events
	FileEventsWithDiff                   // watch and emit a diff per event
)

// Enabled reports whether a watcher runs.
func (f FileEvents) Enabled() bool { return f != FileEventsOff }

// Diff reports whether diffs are emitted.
func (f FileEvents) Diff() bool { return f == FileEventsWithDiff }

// Definition is a sandbox definition (defineSandbox). It is inert: nothing
// is created until Ensure.
type Definition struct {
	ID         string
	Provider   Provider
	Workspace  *Workspace
	Lifecycle  Lifecycle
	Hooks      Hooks
	FileEvents FileEvents
	Logger     *slog.Logger
}

// Root is the workspace root the watcher and git use.
func (d *Definition) Root() string { return d.Workspace.root() }
