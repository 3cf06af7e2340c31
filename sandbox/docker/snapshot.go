package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
)

// SnapshotRepository is the image repository snapshots are committed to.
const SnapshotRepository = "goai-sandbox-snapshot"

var labelChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// Snapshot commits the container to the image
// goai-sandbox-snapshot:<container id[:12]>-<label>-<random>, which is the
// snapshot id. It is the container's whole filesystem (unlike the local
// provider, nothing is left out), but not its environment: the handle
// environment, where the secrets live, is passed per exec and never
// committed. With Options.HostDir the workspace is a bind mount, which a
// commit does not contain: Snapshot then fails.
func (h *Handle) Snapshot(ctx context.Context, label string) (sandbox.Snapshot, error) {
	if h.p.opts.HostDir != "" {
		return sandbox.Snapshot{}, &sandbox.UnsupportedCapabilityError{Provider: Name, Capability: "snapshots"}
	}
	tag := labelChars.ReplaceAllString(label, "_")
	if tag == "" {
		tag = "snap"
	}
	id := h.id
	if len(id) > 12 {
		id = id[:12]
	}
	tag = id + "-" + tag
	if len(tag) > 100 {
		tag = tag[:100]
	}
	ref := SnapshotRepository + ":" + tag + "-" + randomID()[:8]
	if _, err := h.p.cli.ContainerCommit(ctx, h.id, client.ContainerCommitOptions{
		Reference: ref,
		Comment:   "goai sandbox snapshot " + label,
	}); err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("docker: snapshot: %w", err)
	}
	return sandbox.Snapshot{ID: ref, Label: label}, nil
}

// RestoreSnapshot starts a new container from a snapshot image.
func (p *Provider) RestoreSnapshot(ctx context.Context, opts sandbox.RestoreOptions) (sandbox.Handle, error) {
	if !strings.HasPrefix(opts.SnapshotID, SnapshotRepository+":") {
		return nil, fmt.Errorf("docker: restore: %q is not a goai snapshot", opts.SnapshotID)
	}
	if _, err := p.cli.ImageInspect(ctx, opts.SnapshotID); err != nil {
		return nil, fmt.Errorf("docker: restore: snapshot %s: %w", opts.SnapshotID, err)
	}
	return p.createFrom(ctx, opts.SnapshotID, "", opts.Env)
}

// DeleteSnapshot removes a snapshot image.
func (p *Provider) DeleteSnapshot(ctx context.Context, id string) error {
	if !strings.HasPrefix(id, SnapshotRepository+":") {
		return fmt.Errorf("docker: delete snapshot: %q is not a goai snapshot", id)
	}
	if _, err := p.cli.ImageRemove(ctx, id, client.ImageRemoveOptions{PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: delete snapshot: %w", err)
	}
	return nil
}

// Fork commits the container and starts a new one from the commit.
func (h *Handle) Fork(ctx context.Context) (sandbox.Handle, error) {
	h.mu.Lock()
	env := maps.Clone(h.env)
	h.mu.Unlock()
	return sandbox.ForkBySnapshot(ctx, h, h.p, env)
}

// SweepOptions configures Sweep.
type SweepOptions struct {
	// Known reports whether a container still belongs to a sandbox the
	// caller knows about, given its sandbox key (the io.goai.sandbox.key
	// label, "" for containers made without one) and its ID. Required.
	Known func(ctx context.Context, key, containerID string) (bool, error)
	// MinAge spares containers younger than this (default 10 minutes; a
	// negative value spares none): a sandbox being created has its
	// container before its record.
	MinAge time.Duration
}

// Sweep removes the containers of this provider (its Options.Owner, or
// every goai sandbox container when Owner is empty) that Known does not
// know: the leftovers of a crashed server. It returns the IDs removed.
func (p *Provider) Sweep(ctx context.Context, opts SweepOptions) ([]string, error) {
	if opts.Known == nil {
		return nil, errors.New("docker: SweepOptions.Known is required")
	}
	minAge := opts.MinAge
	if minAge == 0 {
		minAge = 10 * time.Minute
	}
	f := client.Filters{}
	f.Add("label", Label+"=1")
	if p.opts.Owner != "" {
		f.Add("label", OwnerLabel+"="+p.opts.Owner)
	}
	res, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: sweep: list containers: %w", err)
	}
	var removed []string
	var errs []error
	for _, c := range res.Items {
		if minAge > 0 && time.Since(time.Unix(c.Created, 0)) < minAge {
			continue
		}
		known, err := opts.Known(ctx, c.Labels[KeyLabel], c.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("docker: sweep: %s: %w", c.ID, err))
			continue
		}
		if known {
			continue
		}
		if err := p.Destroy(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		p.logger.Info("docker: swept an unknown sandbox container", "category", chat.CatSandbox, "container", c.ID, "key", c.Labels[KeyLabel])
		removed = append(removed, c.ID)
	}
	return removed, errors.Join(errs...)
}

// RunSweeper sweeps at once and then every interval until ctx ends,
// logging what it removed and any failure. It returns when ctx is done.
func (p *Provider) RunSweeper(ctx context.Context, interval time.Duration, opts SweepOptions) {
	if interval <= 0 {
		interval = 10 * time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := p.Sweep(ctx, opts); err != nil && ctx.Err() == nil {
			p.logger.Warn("docker: sweep failed", "category", chat.CatErrors, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var (
	_ sandbox.SnapshotRestorer = (*Provider)(nil)
	_ sandbox.Snapshotter      = (*Handle)(nil)
	_ sandbox.Forker           = (*Handle)(nil)
)
