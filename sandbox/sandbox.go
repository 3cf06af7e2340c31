package sandbox

import (
	"context"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// DefaultRoot is the virtual workspace root every provider maps.
const DefaultRoot = "/workspace"

// RootRelative maps a virtual path to the path below the workspace root
// that every provider gives it: DefaultRoot is "", DefaultRoot/x is x, any
// other absolute path /x is re-rooted to x, and a relative path is kept. A
// provider joins the result to its root and checks that the join stays
// inside (a relative path may climb out with "..").
func RootRelative(p string) string {
	switch {
	case p == DefaultRoot:
		return ""
	case strings.HasPrefix(p, DefaultRoot+"/"):
		return p[len(DefaultRoot)+1:]
	case strings.HasPrefix(p, "/"):
		return p[1:]
	}
	return p
}

// Capabilities lists what a provider supports. Every provider sets every
// flag; Exec is always true.
type Capabilities struct {
	FS                  bool `json:"fs"`
	Exec                bool `json:"exec"`
	Env                 bool `json:"env"`
	Ports               bool `json:"ports"`
	BackgroundProcesses bool `json:"backgroundProcesses"`
	WritableStdin       bool `json:"writableStdin"`
	KillableProcesses   bool `json:"killableProcesses"`
	Snapshots           bool `json:"snapshots"`
	NetworkPolicy       bool `json:"networkPolicy"`
	DurableFilesystem   bool `json:"durableFilesystem"`
	Fork                bool `json:"fork"`
	// NativeWatch reports that the handle's FS implements [NativeWatcher]
	// and WatchWorkspace may use it instead of polling.
	NativeWatch bool `json:"nativeWatch"`
}

// ExecOptions configures Exec and Spawn.
type ExecOptions struct {
	// Dir is the working directory, a virtual path; empty means the
	// workspace root.
	Dir string
	// Env is merged over the handle environment.
	Env map[string]string
	// MaxOutputBytes caps how much of each stream (stdout, stderr) Exec
	// buffers; the rest is read and discarded, so the command still runs
	// to completion, and ExecResult says what was cut. Zero means the
	// provider's default (DefaultMaxOutputBytes unless configured);
	// UnlimitedOutput (negative) keeps everything. Spawn ignores it: a
	// spawned command's output is streamed, not buffered.
	MaxOutputBytes int64
	// Detach lets a spawned command outlive the process that started it
	// (a coding agent that must keep working when its server dies):
	// sandboxes that tie commands to their caller's life (bubblewrap's
	// --die-with-parent) do not for this one. The command must end by
	// itself, or be ended through the sandbox (a file it watches).
	Detach bool
}

// ExecResult is the buffered outcome of Exec.
type ExecResult struct {
	Stdout   string
	Stderr   string
	ExitCode int
	// Truncated reports that output went past ExecOptions.MaxOutputBytes:
	// Stdout and Stderr then hold only the first MaxOutputBytes of their
	// stream (a UTF-8 sequence cut by the cap is left out), and
	// StdoutDropped and StderrDropped count the bytes discarded.
	Truncated     bool
	StdoutDropped int64
	StderrDropped int64
}

// Handle is a live sandbox.
type Handle interface {
	// ID is what Provider.Resume takes.
	ID() string
	// Provider is the provider name, e.g. "local-process".
	Provider() string
	// WorkspaceRoot is the virtual root of the workspace (usually /workspace).
	WorkspaceRoot() string
	Capabilities() Capabilities
	FS() FS
	// Exec runs a shell command (sh -c) to completion and buffers its output.
	// A non-zero exit is not an error; err reports only failures to run.
	// Cancelling ctx kills the command.
	Exec(ctx context.Context, cmd string, opts ExecOptions) (ExecResult, error)
	// Spawn starts a shell command and streams its output.
	Spawn(ctx context.Context, cmd string, opts ExecOptions) (Process, error)
	// SetEnv merges vars into the handle environment.
	SetEnv(vars map[string]string) error
	// Destroy kills the sandbox's processes and releases it.
	Destroy(ctx context.Context) error
}

// Process is a spawned command.
type Process interface {
	PID() int
	// Stdin is the process's standard input; it is nil when the provider
	// lacks WritableStdin.
	Stdin() io.WriteCloser
	// Stdout and Stderr stream the output, decoded as UTF-8: a rune split
	// across reads is never split in the output and a truncated sequence
	// at EOF becomes U+FFFD. See [Chunks].
	Stdout() io.Reader
	Stderr() io.Reader
	// Wait waits for the process to exit and returns its exit code.
	Wait(ctx context.Context) (int, error)
	// Kill signals the process (its process group where the provider can).
	Kill(sig os.Signal) error
}

// EntryType is the type of a directory entry.
type EntryType string

const (
	EntryFile    EntryType = "file"
	EntryDir     EntryType = "dir"
	EntrySymlink EntryType = "symlink"
	EntryOther   EntryType = "other"
)

// DirEntry is one item returned by FS.ReadDir.
type DirEntry struct {
	Name string
	Path string // virtual path
	Type EntryType
}

// FileInfo is what Lstat reports (symlinks are not followed).
type FileInfo struct {
	Type    EntryType
	Mode    fs.FileMode
	Size    int64
	ModTime time.Time
}

// FS is a sandbox filesystem addressed by virtual paths.
type FS interface {
	ReadFile(ctx context.Context, name string) ([]byte, error)
	WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error
	ReadDir(ctx context.Context, name string) ([]DirEntry, error)
	MkdirAll(ctx context.Context, name string) error
	RemoveAll(ctx context.Context, name string) error
	Rename(ctx context.Context, oldname, newname string) error
	Exists(ctx context.Context, name string) (bool, error)
}

// Lstater is implemented by FS values that can stat without following
// symlinks. Lstat returns (nil, nil) only for a confirmed-missing path.
type Lstater interface {
	Lstat(ctx context.Context, name string) (*FileInfo, error)
}

// RawOp is the kind of a raw native watch event. WatchWorkspace ignores it
// when classifying (it re-checks the filesystem), except for RawOverflow.
type RawOp uint8

const (
	RawCreate RawOp = iota + 1
	RawWrite
	RawRemove
	RawRename
	RawChmod
	// RawOverflow says events were lost; the consumer must rescan.
	RawOverflow
	// RawFailed says the native watch broke and will deliver nothing more;
	// Err says why. The consumer must fall back to polling.
	RawFailed
)

// RawEvent is one native watch notification.
type RawEvent struct {
	Op   RawOp
	Path string // virtual path; empty for RawOverflow and RawFailed
	Err  error
}

// NativeWatchOptions configures NativeWatcher.Watch.
type NativeWatchOptions struct {
	// Ignore lists directory names not to watch.
	Ignore []string
}

// NativeWatcher is implemented by FS values that can watch a tree natively.
// Watch watches root recursively and calls fn for each raw event, from a
// single goroutine. Directories created later are watched as they appear,
// and the files already inside them are reported as RawCreate.
type NativeWatcher interface {
	Watch(ctx context.Context, root string, opts NativeWatchOptions, fn func(RawEvent)) (Subscription, error)
}

// Subscription is a running native watch.
type Subscription interface {
	// Stop ends the watch; fn is not called after it returns.
	Stop() error
}

// CreateOptions is passed to Provider.Create.
type CreateOptions struct {
	// ID is the compound sandbox key. Providers that address sandboxes by
	// name use it; local-process ignores it.
	ID        string
	Workspace *Workspace
	// Env holds the resolved secrets.
	Env     map[string]string
	Adapter string
}

// Provider creates, resumes and destroys sandboxes.
type Provider interface {
	Name() string
	Capabilities() Capabilities
	Create(ctx context.Context, opts CreateOptions) (Handle, error)
	// Resume returns (nil, nil) when the sandbox is gone.
	Resume(ctx context.Context, id string) (Handle, error)
	Destroy(ctx context.Context, id string) error
}

// Snapshot identifies a provider snapshot.
type Snapshot struct {
	ID    string
	Label string
}

// Snapshotter is implemented by handles that can snapshot themselves.
type Snapshotter interface {
	Snapshot(ctx context.Context, label string) (Snapshot, error)
}

// Forker is implemented by handles that can copy themselves into a new,
// independent sandbox (a snapshot restored at once).
type Forker interface {
	Fork(ctx context.Context) (Handle, error)
}

// RestoreOptions is passed to SnapshotRestorer.RestoreSnapshot.
type RestoreOptions struct {
	SnapshotID string
	Workspace  *Workspace
	Env        map[string]string
}

// SnapshotRestorer is implemented by providers that can start a sandbox
// from a snapshot.
type SnapshotRestorer interface {
	RestoreSnapshot(ctx context.Context, opts RestoreOptions) (Handle, error)
}

// ForkBySnapshot is Fork for providers whose fork is a snapshot restored
// into a new sandbox: h is snapshotted (labelled "fork") and restored by r
// with env, the handle's environment.
func ForkBySnapshot(ctx context.Context, h Snapshotter, r SnapshotRestorer, env map[string]string) (Handle, error) {
	snap, err := h.Snapshot(ctx, "fork")
	if err != nil {
		return nil, err
	}
	return r.RestoreSnapshot(ctx, RestoreOptions{SnapshotID: snap.ID, Env: env})
}
