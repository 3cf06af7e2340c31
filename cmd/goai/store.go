package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/postgres"
	"github.com/goai-sdk/goai/durable/sqlite"
	"github.com/goai-sdk/goai/server"
)

// openStore opens the run store named by spec: sqlite:PATH (the embedded
// default), postgres://... for many replicas, memory, or none.
func openStore(ctx context.Context, spec string) (durable.Store, func(), error) {
	switch {
	case spec == "" || spec == "none":
		return nil, func() {}, nil
	case spec == "memory":
		// Durable runs within the process: a client that goes away finds
		// its run again, a restart loses every run. It also measures what
		// durability costs apart from a database (bench/README.md).
		return durable.NewMemory(nil), func() {}, nil
	case strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://"):
		st, err := postgres.Open(ctx, spec, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("opening Postgres store %s: %w", redactURL(spec), err)
		}
		return st, func() { _ = st.Shutdown() }, nil
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		// Runs hold conversations: a directory goai creates is the
		// owner's alone (0700), and so is the database (0600).
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, nil, fmt.Errorf("creating the store directory: %w", err)
		}
		opts, err := sqliteOptions()
		if err != nil {
			return nil, nil, err
		}
		st, err := sqlite.Open(path, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("opening SQLite store %s: %w", path, err)
		}
		return st, func() { _ = st.Shutdown() }, nil
	}
	return nil, nil, fmt.Errorf("unknown store %q: use sqlite:PATH, postgres://..., memory or none", spec)
}

// maxCommitGap bounds GOAI_COMMIT_GAP: every write waits up to the gap, so
// more than this would be a latency no stream should pay.
const maxCommitGap = 100 * time.Millisecond

// defaultCommitGap is GOAI_COMMIT_GAP unless set. With a hundred streams
// of a token every 10 or 50 ms it took commits from about 8 writes to 28
// (10 ms) and cut the server's CPU per event by a tenth, for 1 to 2 ms of
// median token latency (p99 6.5 ms against 4.5); a lone stream
// never waits (sqlite.Options.CommitGap), and an unpaced one commits
// full groups, which do not wait either (bench/README.md, seventeenth
// pass).
const defaultCommitGap = 2 * time.Millisecond

// defaultCommitGapMax is GOAI_COMMIT_GAP_MAX unless set: with a hundred
// streams of a token every 50 ms, commits of about 9 writes at 2 ms, the
// gap grows to 5 ms and they carry about 14; the server's CPU per event
// falls by about a tenth, and the token p99 rises from about 4.5 to 7.5 ms
// (bench/README.md, twenty-first pass). At 10 ms pacing commits already
// carry more than enough, and the gap stays at GOAI_COMMIT_GAP.
const defaultCommitGapMax = 5 * time.Millisecond

// sqliteOptions reads the SQLite store's tuning from the environment:
// GOAI_WAL_LIMIT, GOAI_COMMIT_GAP and GOAI_COMMIT_GAP_MAX.
func sqliteOptions() (*sqlite.Options, error) {
	walLimit, err := envSize("GOAI_WAL_LIMIT")
	if err != nil {
		return nil, err
	}
	gap, err := envDuration("GOAI_COMMIT_GAP", defaultCommitGap)
	if err != nil {
		return nil, err
	}
	if gap < 0 || gap > maxCommitGap {
		return nil, fmt.Errorf("GOAI_COMMIT_GAP: %v is out of range (0 to %v)", gap, maxCommitGap)
	}
	defMax := max(defaultCommitGapMax, gap)
	if gap == 0 {
		defMax = 0 // no gap means none
	}
	gapMax, err := envDuration("GOAI_COMMIT_GAP_MAX", defMax)
	if err != nil {
		return nil, err
	}
	if gapMax < gap || gapMax > maxCommitGap {
		return nil, fmt.Errorf("GOAI_COMMIT_GAP_MAX: %v is out of range (GOAI_COMMIT_GAP, %v, to %v)", gapMax, gap, maxCommitGap)
	}
	// One process has the file: a second goai serve on it fails at once
	// (several replicas share Postgres), and the store's readers may trust
	// its cache of recent entries.
	return &sqlite.Options{WALLimit: walLimit, CommitGap: gap, CommitGapMax: gapMax, OneProcess: true}, nil
}

// redactURL hides a password in a store URL for logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Recovery defaults for goai serve, overridable from the environment:
// GOAI_LEASE (how long a silent producer keeps its run; its heartbeat is a
// fifth of it) and GOAI_DETACHED_TTL (how long a detached run may run on
// before the reaper cancels it; 0 disables the reaper).
const (
	defaultDetachedTTL = 30 * time.Minute
)

// startRecovery wires crash recovery for a durable store: h's producers
// heartbeat every lease/5, and a sweeper, run at once and every lease/3,
// ends runs whose producer is gone (RUN_ERROR producer-lost, closed log,
// failed record) and cancels detached runs past their TTL. Every replica
// sharing the store runs one; claims make each recovery happen once. The
// returned func stops the sweeper and waits for it.
func startRecovery(ctx context.Context, h *server.Handler, store durable.Store, logger *slog.Logger, releaseSandbox func(context.Context, durable.RunRecord) error) (func(), error) {
	if store == nil {
		return func() {}, nil
	}
	lease, err := envDuration("GOAI_LEASE", server.DefaultLease)
	if err != nil {
		return nil, err
	}
	ttl, err := envDuration("GOAI_DETACHED_TTL", defaultDetachedTTL)
	if err != nil {
		return nil, err
	}
	if lease <= 0 {
		return nil, fmt.Errorf("GOAI_LEASE must be positive")
	}
	h.SetHeartbeat(max(lease/5, time.Millisecond))
	rc := &server.Recovery{
		Store:       store,
		Lease:       lease,
		DetachedTTL: ttl,
		Logger:      logger,
		// Destroys the sandbox of a run whose producer died (nil without
		// sandboxes; see serve_reclaim.go).
		ReleaseSandbox: releaseSandbox,
		// Drives on a coding agent's run from its journal (the agent
		// outlived its producer); other runs end as producer-lost.
		Redrive: h.Redrive,
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { rc.Run(ctx) })
	return func() { cancel(); wg.Wait() }, nil
}

func envDuration(key string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(key)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return d, nil
}

// envSize reads a size in bytes from the environment: a number with an
// optional KiB, MiB or GiB suffix, or "none" (no limit: -1). Unset is 0,
// the default.
func envSize(key string) (int64, error) {
	v := strings.TrimSpace(os.Getenv(key))
	switch v {
	case "":
		return 0, nil
	case "none":
		return -1, nil
	}
	unit := int64(1)
	for suffix, u := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if n, ok := strings.CutSuffix(v, suffix); ok {
			v, unit = strings.TrimSpace(n), u
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%s: %q is not a size (a positive number of bytes, KiB, MiB or GiB, or none)", key, os.Getenv(key))
	}
	return n * unit, nil
}

// startRetention prunes, every hour (or every keep/2 when shorter), the
// logs closed and the run records finished more than keep ago (0: keep
// everything). The returned func stops it and waits.
func startRetention(ctx context.Context, store durable.Store, keep time.Duration, logger *slog.Logger) func() {
	p, ok := store.(durable.Pruner)
	if !ok || keep <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { durable.KeepClosed(ctx, p, keep, min(time.Hour, max(keep/2, time.Second)), logger) })
	return func() { cancel(); wg.Wait() }
}
