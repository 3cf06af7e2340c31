// Package docker is a sandbox provider that runs each sandbox in its own
// Docker container, driven through the Engine API
// (github.com/moby/moby/client), never the CLI.
//
// Create starts a container from Options.Image with a keep-alive command,
// every capability dropped (CapDrop ALL; Options.CapAdd gives some back),
// no-new-privileges, no network (NetworkMode "none" unless
// Options.NetworkMode says otherwise), an init process (docker-init) as
// PID 1, the resource limits of Options (memory, CPUs, and a process limit
// of DefaultPidsLimit unless set) and the label
// io.goai.sandbox=1. The workspace is the container directory
// Options.Workdir (default /workspace), created with mkdir -p; with
// Options.HostDir it is a bind mount of that host directory instead. The
// handle ID is the container ID, and Destroy force-removes the container
// (with its anonymous volumes), which ends every process in it.
//
// Every command runs as a Docker exec of sh -c. The environment is a fixed
// PATH and HOME, then the handle environment, then the per-call one; it is
// passed per exec and never put in the container config, so secrets given
// to Create (CreateOptions.Env) do not show in docker inspect and are not
// logged. Each exec carries a private marker variable, so Kill and a
// cancelled Exec signal every process of that command (the shell and
// whatever it started) from inside the container; SIGTERM is followed by
// SIGKILL after 200 ms for anything still alive.
//
// The filesystem is implemented over exec as well: each operation is one
// small shell script that first resolves the path in the container
// (symlinks included) and refuses, with a *sandbox.PathError matching
// sandbox.ErrOutsideRoot, a path that resolves outside the workspace. Paths
// are virtual as with local-process: /workspace and /workspace/x map to the
// workdir, any other absolute path /x to workdir/x, and a relative path is
// joined to the workdir. File contents travel raw on the exec streams
// (stdin for writes, stdout for reads).
//
// There is no native watching (Capabilities.NativeWatch is false), so
// sandbox.WatchWorkspace polls with `find … -printf`: the image needs GNU
// find (busybox find has no -printf), and git for file diffs.
// scripts/setup-docker.sh builds such an image from host files.
//
// Differences from TanStack AI's docker provider: create.Env is applied per
// exec rather than baked into the container; the container has no network
// by default (so no ports, no host gateway); Destroy removes the container
// at once instead of stopping it for 5 s first; WritableStdin is true
// (the Go client half-closes the hijacked connection, which ends stdin
// without ending stdout); snapshots and forks are named
// goai-sandbox-snapshot:…, and a container commit is taken with the
// container paused; Sweep removes the containers of a crashed server.
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
)

// Name is the provider name.
const Name = "docker"

// Labels of the containers the provider creates: Label on every one,
// KeyLabel with the sandbox key (CreateOptions.ID), OwnerLabel with
// Options.Owner when set.
const (
	Label      = "io.goai.sandbox"
	KeyLabel   = "io.goai.sandbox.key"
	OwnerLabel = "io.goai.sandbox.owner"
)

// DefaultPidsLimit is the container's process limit when
// Options.PidsLimit is zero: a fork bomb stops there.
const DefaultPidsLimit = 1024

// DefaultKeepAlive is the container command when Options.KeepAlive is empty.
var DefaultKeepAlive = []string{"sh", "-c", "tail -f /dev/null"}

// Options configures the provider.
type Options struct {
	// Image is the image each sandbox runs (required). It is pulled when
	// missing locally.
	Image string
	// Workdir is the container directory the virtual /workspace maps to;
	// default /workspace.
	Workdir string
	// HostDir, when set, is bind-mounted read-write at Workdir.
	HostDir string
	// KeepAlive is the container's command; default DefaultKeepAlive.
	KeepAlive []string
	// NetworkMode defaults to "none": the container has no network.
	NetworkMode string
	// ExtraHosts are added to the container's /etc/hosts, as
	// "name:address" (the address "host-gateway" is the host).
	ExtraHosts []string
	// Memory is the memory limit in bytes (0: none).
	Memory int64
	// CPUs is the CPU limit, e.g. 0.5 (0: none).
	CPUs float64
	// PidsLimit limits the number of processes; 0 means
	// DefaultPidsLimit, a negative value no limit.
	PidsLimit int64
	// Owner, when set, labels this provider's containers so that Sweep
	// leaves other servers' containers on a shared daemon alone (for
	// example the server's data directory).
	Owner string
	// CapAdd lists capabilities given back to the container; by default
	// it has none (CapDrop ALL), and no-new-privileges is always set.
	CapAdd []string
	// MaxOutputBytes caps what Exec buffers per stream when
	// ExecOptions.MaxOutputBytes is zero; zero means
	// sandbox.DefaultMaxOutputBytes.
	MaxOutputBytes int64
	// NoInit turns off the container's init process (docker-init). By
	// default PID 1 is an init that reaps the orphans of killed commands,
	// which would otherwise stay zombies under the keep-alive command.
	NoInit bool
	// RemoveOnDestroy defaults to true; false only stops the container.
	RemoveOnDestroy *bool
	// Client is the Engine API client; by default one is made from the
	// environment (DOCKER_HOST etc.) with API version negotiation and no
	// keep-alive connections.
	Client *client.Client
	Logger *slog.Logger
}

// Provider is the Docker provider.
type Provider struct {
	opts   Options
	cli    *client.Client
	own    bool // cli was made by New and is closed by Close
	logger *slog.Logger
}

// New returns a provider. It does not contact the daemon.
func New(opts Options) (*Provider, error) {
	if opts.Image == "" {
		return nil, errors.New("docker: Options.Image is required")
	}
	if opts.Workdir == "" {
		opts.Workdir = sandbox.DefaultRoot
	}
	if !path.IsAbs(opts.Workdir) {
		return nil, fmt.Errorf("docker: Workdir %q is not absolute", opts.Workdir)
	}
	opts.Workdir = path.Clean(opts.Workdir)
	if opts.NetworkMode == "" {
		opts.NetworkMode = "none"
	}
	p := &Provider{opts: opts, cli: opts.Client, logger: opts.Logger}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	if p.cli == nil {
		// No keep-alive: every request (three per command) dials the
		// socket afresh, so no idle connection goroutines outlive a call.
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		ops := []client.Opt{client.WithHTTPClient(hc), client.WithHost(client.DefaultDockerHost), client.FromEnv}
		if host := os.Getenv("DOCKER_HOST"); host == "" || strings.HasPrefix(host, "unix://") {
			ops = append(ops, client.WithScheme("http"))
		}
		cli, err := client.New(ops...)
		if err != nil {
			return nil, fmt.Errorf("docker: client: %w", err)
		}
		p.cli, p.own = cli, true
	}
	return p, nil
}

// Close releases the client if New made it.
func (p *Provider) Close() error {
	if p.own {
		return p.cli.Close()
	}
	return nil
}

func (p *Provider) Name() string { return Name }

func (p *Provider) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		FS: true, Exec: true, Env: true, BackgroundProcesses: true, WritableStdin: true,
		KillableProcesses: true, DurableFilesystem: true,
		Snapshots: p.opts.HostDir == "", Fork: p.opts.HostDir == "",
	}
}

func (p *Provider) removeOnDestroy() bool {
	return p.opts.RemoveOnDestroy == nil || *p.opts.RemoveOnDestroy
}

// Create starts a new container, labelled with opts.ID (the sandbox key,
// io.goai.sandbox.key) for Sweep. opts.Workspace is ignored; opts.Env
// seeds the handle environment.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	if err := p.ensureImage(ctx); err != nil {
		return nil, err
	}
	return p.createFrom(ctx, p.opts.Image, opts.ID, opts.Env)
}

// createFrom creates and starts a container from image.
func (p *Provider) createFrom(ctx context.Context, image, key string, env map[string]string) (sandbox.Handle, error) {
	cmd := p.opts.KeepAlive
	if len(cmd) == 0 {
		cmd = DefaultKeepAlive
	}
	initProc := !p.opts.NoInit
	hc := &container.HostConfig{
		Init:        &initProc,
		NetworkMode: container.NetworkMode(p.opts.NetworkMode),
		ExtraHosts:  p.opts.ExtraHosts,
		CapDrop:     []string{"ALL"},
		CapAdd:      p.opts.CapAdd,
		SecurityOpt: []string{"no-new-privileges"},
		Resources: container.Resources{
			Memory:   p.opts.Memory,
			NanoCPUs: int64(p.opts.CPUs * 1e9),
		},
	}
	pids := p.opts.PidsLimit
	if pids == 0 {
		pids = DefaultPidsLimit
	}
	if pids > 0 {
		hc.Resources.PidsLimit = &pids
	}
	if p.opts.HostDir != "" {
		hc.Binds = []string{p.opts.HostDir + ":" + p.opts.Workdir + ":rw"}
	}
	labels := map[string]string{Label: "1"}
	if key != "" {
		labels[KeyLabel] = key
	}
	if p.opts.Owner != "" {
		labels[OwnerLabel] = p.opts.Owner
	}
	res, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:      image,
			Cmd:        cmd,
			WorkingDir: p.opts.Workdir,
			Labels:     labels,
		},
		HostConfig: hc,
	})
	if err != nil {
		return nil, fmt.Errorf("docker: create container: %w", err)
	}
	h, err := p.start(ctx, res.ID, true)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		defer cancel()
		if _, rerr := p.cli.ContainerRemove(rctx, res.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); rerr != nil {
			p.logger.Warn("docker: remove after failed create failed", "category", chat.CatErrors, "container", res.ID, "error", rerr)
		}
		return nil, err
	}
	if len(env) > 0 {
		_ = h.SetEnv(env)
	}
	return h, nil
}

func (p *Provider) ensureImage(ctx context.Context) error {
	_, err := p.cli.ImageInspect(ctx, p.opts.Image)
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: inspect image %s: %w", p.opts.Image, err)
	}
	p.logger.Debug("docker: pulling image", "category", chat.CatSandbox, "image", p.opts.Image)
	rc, err := p.cli.ImagePull(ctx, p.opts.Image, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("docker: pull %s: %w", p.opts.Image, err)
	}
	defer rc.Close()
	if err := rc.Wait(ctx); err != nil {
		return fmt.Errorf("docker: pull %s: %w", p.opts.Image, err)
	}
	return nil
}

// start starts the container (unless it is running) and prepares the
// workspace directory.
func (p *Provider) start(ctx context.Context, id string, fresh bool) (*Handle, error) {
	if _, err := p.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return nil, fmt.Errorf("docker: start container: %w", err)
	}
	h := &Handle{p: p, id: id, root: p.opts.Workdir, env: map[string]string{}}
	h.fs = &FS{h: h}
	var out strings.Builder
	var stderr strings.Builder
	code, err := h.run(ctx, []string{"sh", "-c", `mkdir -p -- "$1" && readlink -f -- "$1"`, "sh", h.root}, "/", nil, nil, &out, &stderr)
	if err != nil {
		return nil, fmt.Errorf("docker: prepare workspace: %w", err)
	}
	if code != 0 {
		return nil, fmt.Errorf("docker: prepare workspace %s: exit %d: %s", h.root, code, strings.TrimSpace(stderr.String()))
	}
	h.realRoot = strings.TrimSpace(out.String())
	if h.realRoot == "" {
		h.realRoot = h.root
	}
	return h, nil
}

// Resume returns a handle for an existing container, starting it if it is
// stopped. It returns (nil, nil) when the container is gone or cannot be
// started; other daemon errors are returned.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	res, err := p.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("docker: resume: %w", err)
	}
	if res.Container.State != nil && res.Container.State.Dead {
		return nil, nil
	}
	h, err := p.start(ctx, res.Container.ID, false)
	if err != nil {
		p.logger.Debug("docker: resume could not start the container", "category", chat.CatSandbox, "container", id, "error", err)
		return nil, nil
	}
	return h, nil
}

// Destroy removes (or, without RemoveOnDestroy, stops) the container. A
// container that is already gone is not an error.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	if !p.removeOnDestroy() {
		timeout := 5
		_, err := p.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("docker: stop container: %w", err)
		}
		return nil
	}
	_, err := p.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: remove container: %w", err)
	}
	return nil
}

// Handle is one container.
type Handle struct {
	p        *Provider
	id       string
	root     string // container workdir
	realRoot string // root with symlinks resolved in the container
	fs       *FS

	mu        sync.Mutex
	env       map[string]string
	destroyed bool
}

func (h *Handle) ID() string                         { return h.id }
func (h *Handle) Provider() string                   { return Name }
func (h *Handle) WorkspaceRoot() string              { return sandbox.DefaultRoot }
func (h *Handle) Capabilities() sandbox.Capabilities { return h.p.Capabilities() }
func (h *Handle) FS() sandbox.FS                     { return h.fs }

// ContainerID is the container's ID (the same as ID).
func (h *Handle) ContainerID() string { return h.id }

// Workdir is the container directory the virtual workspace root maps to.
func (h *Handle) Workdir() string { return h.root }

func (h *Handle) SetEnv(vars map[string]string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, v := range vars {
		h.env[k] = v
	}
	return nil
}

// Destroy removes the container (see Provider.Destroy); every process in
// it ends and its streams close.
func (h *Handle) Destroy(ctx context.Context) error {
	h.mu.Lock()
	h.destroyed = true
	h.mu.Unlock()
	return h.p.Destroy(ctx, h.id)
}

func (h *Handle) isDestroyed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.destroyed
}

// containerPath maps a virtual path to a container path inside the
// workdir, lexically.
func (h *Handle) containerPath(p string) (string, error) {
	rel := sandbox.RootRelative(p)
	c := path.Join(h.root, rel)
	if c != h.root && !strings.HasPrefix(c, strings.TrimSuffix(h.root, "/")+"/") {
		return "", h.outside(p)
	}
	return c, nil
}

func (h *Handle) outside(p string) error {
	return &sandbox.PathError{Provider: Name, Path: p, Root: h.root, Err: sandbox.ErrOutsideRoot}
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var (
	_ sandbox.Provider = (*Provider)(nil)
	_ sandbox.Handle   = (*Handle)(nil)
	_ sandbox.FS       = (*FS)(nil)
	_ sandbox.Lstater  = (*FS)(nil)
	_ io.WriteCloser   = (*stdinWriter)(nil)
)
