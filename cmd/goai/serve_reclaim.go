package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"sync"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/docker"
)

// sweepInterval is how often goai serve looks for sandbox containers no
// run knows about (the leftovers of a crashed server).
const sweepInterval = 10 * time.Minute

// dockerOwner labels the containers of the server using dataDir, so a
// sweep leaves other servers on the same daemon alone.
func dockerOwner(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	sum := sha256.Sum256([]byte(abs))
	return "goai-" + hex.EncodeToString(sum[:8])
}

// releaseSandbox is server.Recovery.ReleaseSandbox for goai serve: the
// sandbox of a run whose producer died (reclaimed or expired) is destroyed
// through its thread's definition (docs/sandbox.md §9). It is nil
// when serve runs without sandboxes.
func (a *agent) releaseSandbox() func(ctx context.Context, rec durable.RunRecord) error {
	if a == nil {
		return nil
	}
	return func(ctx context.Context, rec durable.RunRecord) error {
		sb, err := a.sandboxFor(rec.ThreadID)
		if err != nil {
			return err
		}
		out, err := sb.ReclaimRun(ctx, rec, nil)
		a.logger.Info("sandbox reclaimed", "category", chat.CatSandbox, "runId", rec.RunID, "threadId", rec.ThreadID, "outcome", string(out))
		return err
	}
}

// startSweeper starts, for the docker sandbox, a sweeper that removes at
// start-up and then every sweepInterval the containers of this server
// (dockerOwner) that no thread's sandbox records. The returned func stops
// it and waits.
func (a *agent) startSweeper(ctx context.Context) func() {
	if a == nil || a.kind != "docker" {
		return func() {}
	}
	p, err := docker.New(docker.Options{Image: a.image, Owner: dockerOwner(a.dataDir), Logger: a.logger})
	if err != nil {
		a.logger.Warn("docker sweeper not started", "category", chat.CatErrors, "error", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer p.Close()
		p.RunSweeper(ctx, sweepInterval, docker.SweepOptions{Known: a.knownContainer})
	})
	return func() { cancel(); wg.Wait() }
}

// knownContainer reports whether a thread's sandbox records the container.
func (a *agent) knownContainer(ctx context.Context, key, id string) (bool, error) {
	a.mu.Lock()
	sbs := make([]*sandbox.Sandbox, 0, len(a.sandboxes))
	for _, sb := range a.sandboxes {
		sbs = append(sbs, sb)
	}
	a.mu.Unlock()
	for _, sb := range sbs {
		rec, err := sb.Record(ctx, key, nil)
		if err != nil {
			return false, err
		}
		if rec != nil && rec.ProviderSandboxID == id {
			return true, nil
		}
	}
	return false, nil
}
