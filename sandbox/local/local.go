// Package local is the local-process sandbox provider: commands run as host
// processes on a host directory, optionally isolated with bubblewrap.
//
// Every path is confined to the workspace directory: a path that escapes it
// lexically ("..") or through a symlink is rejected with a
// *sandbox.PathError matching sandbox.ErrOutsideRoot. Each command runs in
// its own process group, and Destroy kills every group the handle started.
// The filesystem implements sandbox.NativeWatcher with inotify (fsnotify).
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
)

// Name is the provider name.
const Name = "local-process"

// Isolation selects how commands are confined.
type Isolation int

const (
	// IsolationNone runs commands as plain host processes.
	IsolationNone Isolation = iota
	// IsolationBubblewrap runs every command under bwrap: only /usr, /bin,
	// /lib* and a minimal /etc of the host, read-only; a private /tmp; the
	// workspace as the only writable bind; no network (unless
	// Options.Network); every namespace unshared, every capability
	// dropped, and an unprivileged uid in a user namespace where the
	// kernel allows one; a scrubbed environment; --die-with-parent (but
	// for a command spawned with ExecOptions.Detach). It
	// holds when goai runs as root.
	IsolationBubblewrap
)

func (i Isolation) String() string {
	if i == IsolationBubblewrap {
		return "bubblewrap"
	}
	return "none"
}

// Options configures the provider.
type Options struct {
	// Dir is the workspace directory. When empty, each sandbox gets a new
	// directory under BaseDir.
	Dir string
	// BaseDir defaults to $TMPDIR/goai-sandboxes.
	BaseDir string
	// SnapshotDir holds snapshots (blobs and manifests); default
	// BaseDir/.snapshots.
	SnapshotDir string
	// RemoveOnDestroy defaults to Dir == "".
	RemoveOnDestroy *bool
	// ScrubEnv names host variables removed from every command's
	// environment (IsolationNone; a bubblewrapped command inherits
	// nothing from the host but LANG).
	ScrubEnv  []string
	Isolation Isolation
	// BwrapPath defaults to "bwrap" on $PATH.
	BwrapPath string
	// Network lets bubblewrapped commands use the host network; by
	// default they have none.
	Network bool
	// ReadOnlyBinds are further host paths bubblewrapped commands see,
	// read-only, at the same path (for example a toolchain under /opt).
	ReadOnlyBinds []string
	// MaxOutputBytes caps what Exec buffers per stream when
	// ExecOptions.MaxOutputBytes is zero; zero means
	// sandbox.DefaultMaxOutputBytes.
	MaxOutputBytes int64
	Logger         *slog.Logger
}

// Provider is the local-process provider.
type Provider struct {
	opts   Options
	logger *slog.Logger

	probe usernsProbe

	mu   sync.Mutex
	regs map[string]*registry // process groups per workspace directory
}

// registry tracks the process groups started in one workspace, shared by
// every handle for that directory.
type registry struct {
	mu     sync.Mutex
	groups map[int]struct{}
}

func (r *registry) add(pgid int) {
	r.mu.Lock()
	r.groups[pgid] = struct{}{}
	r.mu.Unlock()
}

// live returns the groups that still have a member, forgetting the rest.
func (r *registry) live() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for g := range r.groups {
		if groupAlive(g) {
			out = append(out, g)
		} else {
			delete(r.groups, g)
		}
	}
	return out
}

// killAll sends SIGTERM to every group, waits up to 5 s, then SIGKILLs the
// survivors and waits 5 s more.
func (r *registry) killAll(logger *slog.Logger) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		groups := r.live()
		if len(groups) == 0 {
			return
		}
		for _, g := range groups {
			_ = syscall.Kill(-g, sig)
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && len(r.live()) > 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if left := r.live(); len(left) > 0 {
		logger.Warn("local: process groups survived SIGKILL", "category", chat.CatErrors, "groups", left)
	}
}

// New returns a provider.
func New(opts Options) *Provider {
	l := opts.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &Provider{opts: opts, logger: l, regs: map[string]*registry{}}
}

func (p *Provider) Name() string { return Name }

// Capabilities: Snapshots is reported only for providers that make their
// own directories (Options.Dir empty): a fixed directory is the user's
// workspace, which Ensure should not copy away after every setup (Snapshot
// and Fork still work when called).
func (p *Provider) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		FS: true, Exec: true, Env: true, BackgroundProcesses: true, WritableStdin: true,
		KillableProcesses: true, DurableFilesystem: true, NativeWatch: true,
		Snapshots: p.opts.Dir == "", Fork: true,
	}
}

func (p *Provider) removeOnDestroy() bool {
	if p.opts.RemoveOnDestroy != nil {
		return *p.opts.RemoveOnDestroy
	}
	return p.opts.Dir == ""
}

// Create makes (or adopts) the workspace directory. It ignores opts except
// Env, which seeds the handle environment.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	if p.opts.Isolation == IsolationBubblewrap {
		if _, err := exec.LookPath(p.bwrap()); err != nil {
			return nil, fmt.Errorf("local: bubblewrap isolation: %w (run scripts/setup-sandbox.sh)", err)
		}
	}
	dir := p.opts.Dir
	if dir == "" {
		base := p.BaseDir()
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		dir = filepath.Join(base, hex.EncodeToString(b))
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("local: create workspace: %w", err)
	}
	h, err := p.newHandle(dir)
	if err != nil {
		return nil, err
	}
	if len(opts.Env) > 0 {
		_ = h.SetEnv(opts.Env)
	}
	return h, nil
}

// Resume returns a handle for an existing directory, (nil, nil) if it is gone.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	fi, err := os.Stat(id)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("local: resume: %w", err)
	}
	if !fi.IsDir() {
		return nil, nil
	}
	return p.newHandle(id)
}

// Destroy kills the processes of any live handle for id and removes the
// directory when RemoveOnDestroy.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	p.mu.Lock()
	reg := p.regs[id]
	delete(p.regs, id)
	p.mu.Unlock()
	if reg != nil {
		reg.killAll(p.logger)
	}
	if p.removeOnDestroy() {
		return removeAll(ctx, id, p.logger)
	}
	return nil
}

func (p *Provider) bwrap() string {
	if p.opts.BwrapPath != "" {
		return p.opts.BwrapPath
	}
	return "bwrap"
}

func (p *Provider) newHandle(dir string) (*Handle, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	p.mu.Lock()
	reg := p.regs[dir]
	if reg == nil {
		reg = &registry{groups: map[int]struct{}{}}
		p.regs[dir] = reg
	}
	p.mu.Unlock()
	h := &Handle{p: p, root: dir, realRoot: real, env: map[string]string{}, reg: reg}
	h.fs = &FS{h: h}
	return h, nil
}

// Handle is a local-process sandbox.
type Handle struct {
	p        *Provider
	root     string // host directory
	realRoot string // root with symlinks resolved
	fs       *FS

	reg *registry

	mu        sync.Mutex
	env       map[string]string
	destroyed bool
}

func (h *Handle) ID() string                         { return h.root }
func (h *Handle) Provider() string                   { return Name }
func (h *Handle) WorkspaceRoot() string              { return sandbox.DefaultRoot }
func (h *Handle) Capabilities() sandbox.Capabilities { return h.p.Capabilities() }
func (h *Handle) FS() sandbox.FS                     { return h.fs }

// HostDir is the host directory of the workspace.
func (h *Handle) HostDir() string { return h.root }

// Isolation is the isolation mode commands run under.
func (h *Handle) Isolation() Isolation { return h.p.opts.Isolation }

func (h *Handle) SetEnv(vars map[string]string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, v := range vars {
		h.env[k] = v
	}
	return nil
}

// Destroy kills every process group the handle started (SIGTERM, then
// SIGKILL after 5 s), then removes the directory when RemoveOnDestroy,
// retrying while it is busy. It kills children even when the directory is
// kept.
func (h *Handle) Destroy(ctx context.Context) error {
	h.mu.Lock()
	h.destroyed = true
	h.mu.Unlock()
	h.reg.killAll(h.p.logger)
	h.p.mu.Lock()
	if h.p.regs[h.root] == h.reg {
		delete(h.p.regs, h.root)
	}
	h.p.mu.Unlock()
	if h.p.removeOnDestroy() {
		return removeAll(ctx, h.root, h.p.logger)
	}
	return nil
}

// groupAlive reports whether process group g has a member that is not a
// zombie. (Orphans are reparented to an init that may reap them late, and
// kill(-g, 0) succeeds for zombies.)
func groupAlive(g int) bool {
	if syscall.Kill(-g, 0) != nil {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if pg, err := strconv.Atoi(f[2]); err == nil && pg == g {
			return true
		}
	}
	return false
}

func removeAll(ctx context.Context, dir string, logger *slog.Logger) error {
	var err error
	for attempt := 1; attempt <= 10; attempt++ {
		err = os.RemoveAll(dir)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.EPERM) &&
			!errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.ENOTEMPTY) {
			return fmt.Errorf("local: remove workspace: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("local: remove workspace: %w", ctx.Err())
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
	logger.Warn("local: workspace still busy after retries", "category", chat.CatErrors, "dir", dir, "error", err)
	return nil
}

var (
	_ sandbox.Provider         = (*Provider)(nil)
	_ sandbox.SnapshotRestorer = (*Provider)(nil)
	_ sandbox.Snapshotter      = (*Handle)(nil)
	_ sandbox.Forker           = (*Handle)(nil)
	_ sandbox.Handle           = (*Handle)(nil)
	_ sandbox.FS               = (*FS)(nil)
	_ sandbox.Lstater          = (*FS)(nil)
	_ sandbox.NativeWatcher    = (*FS)(nil)
)

// BaseDir is the directory new sandboxes are created in.
func (p *Provider) BaseDir() string {
	if p.opts.BaseDir != "" {
		return p.opts.BaseDir
	}
	return filepath.Join(os.TempDir(), "goai-sandboxes")
}
