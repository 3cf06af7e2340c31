package durable

import (
	"context"
	"log/slog"
	"time"
)

// KeepClosed runs retention for p until ctx is done: every interval it
// prunes the logs closed more than keep ago. Errors are logged and retried
// at the next tick. A nil logger means slog.Default().
func KeepClosed(ctx context.Context, p Pruner, keep, interval time.Duration, logger *slog.Logger) {
	if logger == nil {
		logger = slog.Default()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := p.Prune(ctx, time.Now().Add(-keep))
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("durable: pruning closed logs failed", "err", err)
		case n > 0:
			logger.Debug("durable: pruned closed logs", "logs", n)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
