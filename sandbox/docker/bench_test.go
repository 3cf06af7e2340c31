package docker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/docker"
)

// BenchmarkExec measures one buffered command (exec create, attach,
// demultiplex, inspect).
func BenchmarkExec(b *testing.B) {
	h := create(b, newProvider(b, docker.Options{}))
	ctx := context.Background()
	for b.Loop() {
		if res, err := h.Exec(ctx, "true", sandbox.ExecOptions{}); err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkFS measures the exec-backed filesystem: a 1 KiB write (on
// stdin) and read back, each one exec with the in-container path check.
func BenchmarkFS(b *testing.B) {
	h := create(b, newProvider(b, docker.Options{}))
	ctx := context.Background()
	data := []byte(strings.Repeat("x", 1024))
	b.Run("WriteFile", func(b *testing.B) {
		for b.Loop() {
			if err := h.FS().WriteFile(ctx, "/workspace/d/f.txt", data, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadFile", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.FS().ReadFile(ctx, "/workspace/d/f.txt"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPoll10k measures one watcher poll of a 10,000-file tree (100
// dirs x 100 files) in the container: the exact find command the poll
// watcher execs, its output shipped back; and the seeding poll of
// WatchWorkspace (find plus parsing) once.
func BenchmarkPoll10k(b *testing.B) {
	h := create(b, newProvider(b, docker.Options{}))
	ctx := context.Background()
	mustExec(b, h, `for d in $(seq 1 100); do mkdir -p t/d$d; (cd t/d$d && for f in $(seq 1 100); do : > f$f; done); done`)
	cmd := sandbox.FindCommand(sandbox.DefaultIgnore)
	var lines int
	for b.Loop() {
		res, err := h.Exec(ctx, cmd, sandbox.ExecOptions{})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res.Stderr, err)
		}
		lines = strings.Count(res.Stdout, "\n")
	}
	if lines != 10000 {
		b.Fatalf("%d files, want 10000", lines)
	}
	start := time.Now()
	w, err := sandbox.WatchWorkspace(ctx, h, sandbox.WatchOptions{Mode: sandbox.WatchPoll, Interval: time.Hour, OnEvent: func(sandbox.WatchEvent) {}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "seed-ms")
	w.Stop()
}

// BenchmarkSnapshotRestore10k commits a container whose workspace holds
// 10,000 files and starts a new container from the commit (restore), then
// removes both.
func BenchmarkSnapshotRestore10k(b *testing.B) {
	p := newProvider(b, docker.Options{})
	h := create(b, p)
	ctx := context.Background()
	mustExec(b, h, `mkdir -p d && cd d && i=0; while [ $i -lt 100 ]; do mkdir -p $i; j=0; while [ $j -lt 100 ]; do echo "file $i $j" > $i/$j.txt; j=$((j+1)); done; i=$((i+1)); done; find . -type f | wc -l`)
	for b.Loop() {
		snap, err := h.Snapshot(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		rh, err := p.RestoreSnapshot(ctx, sandbox.RestoreOptions{SnapshotID: snap.ID})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := rh.Destroy(ctx); err != nil {
			b.Fatal(err)
		}
		if err := p.DeleteSnapshot(ctx, snap.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
