package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/harness"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
)

// journalSweepInterval is how often goai serve sweeps coding agents'
// journals.
const journalSweepInterval = time.Hour

// startJournalSweeper deletes, at start-up and then hourly, the journal
// files coding agents left in the workspaces (harnessJournalDir) that no
// one will read again: those of runs that are over (cancelled, failed, or
// whose agent was lost) and old orphans. A running run's journal is kept
// for a successor. The returned func stops it and waits.
func (a *agent) startJournalSweeper(ctx context.Context, runs durable.RunStore) func() {
	if a == nil || runs == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(journalSweepInterval)
		defer t.Stop()
		for {
			a.sweepJournals(ctx, runs)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

func (a *agent) sweepJournals(ctx context.Context, runs durable.RunStore) {
	over := func(ctx context.Context, runID string) (bool, bool, error) {
		rec, err := runs.Get(ctx, runID)
		if errors.Is(err, durable.ErrRunNotFound) {
			return false, false, nil
		}
		if err != nil {
			return false, false, err
		}
		return rec.Status.Terminal(), true, nil
	}
	dirs := []string{a.shared}
	if a.shared == "" {
		dirs, _ = filepath.Glob(filepath.Join(a.dataDir, "workspaces", "*"))
	}
	keep := false
	for _, dir := range dirs {
		if ctx.Err() != nil {
			return
		}
		if _, err := os.Stat(filepath.Join(dir, harnessJournalDir)); err != nil {
			continue
		}
		// The workspaces are directories of this host whatever sandbox the
		// agents run in, so the sweep runs its few commands (stat, rm) there.
		h, err := local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep}).Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			a.logger.Warn("journal sweep: open the workspace", "category", chat.CatErrors, "dir", dir, "error", err)
			continue
		}
		rep, err := harness.SweepJournals(ctx, h, harnessJournalDir, harness.SweepOptions{Cwd: h.WorkspaceRoot(), Over: over})
		_ = h.Destroy(context.WithoutCancel(ctx))
		if err != nil {
			a.logger.Warn("journal sweep failed", "category", chat.CatErrors, "dir", dir, "error", err)
			continue
		}
		if len(rep.Deleted) > 0 {
			a.logger.Info("journal sweep: deleted the journals of runs that are over", "category", chat.CatSandbox, "dir", dir, "runs", rep.Deleted)
		}
	}
}
