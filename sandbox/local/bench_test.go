package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
)

// BenchmarkNativeLatency measures the time from a file write to the
// sandbox-scoped hook seeing the event, through WatchWorkspace (inotify),
// the coalescer and the Dispatcher. Reported: p50-ms and p99-ms over all
// samples.
func BenchmarkNativeLatency(b *testing.B) {
	for _, tc := range []struct {
		name     string
		coalesce time.Duration
	}{{"coalesce=50ms", 0}, {"coalesce=off", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			p := local.New(local.Options{BaseDir: b.TempDir()})
			h, err := p.Create(context.Background(), sandbox.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Destroy(context.Background())
			dir := h.(*local.Handle).HostDir()
			seen := make(chan time.Time, 16)
			d := sandbox.NewDispatcher(context.Background(), sandbox.DispatcherOptions{Hooks: sandbox.Hooks{
				OnFile: func(context.Context, chat.FileEvent) error { seen <- time.Now(); return nil },
			}})
			w, err := sandbox.WatchWorkspace(context.Background(), h, sandbox.WatchOptions{Coalesce: tc.coalesce, OnEvent: func(ev sandbox.WatchEvent) {
				d.Dispatch(sandbox.NewFileContent(h, "", "", ev, nil))
			}})
			if err != nil {
				b.Fatal(err)
			}
			var lat []time.Duration
			b.ResetTimer()
			for i := range b.N {
				f := filepath.Join(dir, fmt.Sprintf("f%d.txt", i))
				start := time.Now()
				if err := os.WriteFile(f, []byte("hello"), 0o644); err != nil {
					b.Fatal(err)
				}
				select {
				case t := <-seen:
					lat = append(lat, t.Sub(start))
				case <-time.After(5 * time.Second):
					b.Fatal("no event")
				}
				// Drain extra events (uncoalesced create+change).
				for drained := false; !drained; {
					select {
					case <-seen:
					case <-time.After(time.Millisecond):
						drained = true
					}
				}
			}
			b.StopTimer()
			w.Stop()
			d.Close()
			slices.Sort(lat)
			pct := func(q float64) float64 {
				return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkDiff10k measures FileContent.Diff for a file in a
// 10,000-file git repository: a modified tracked file (one git diff) and a
// new untracked file (git diff, check-ignore, the tracked-ness probe and
// the synthesized patch).
func BenchmarkDiff10k(b *testing.B) {
	dir := b.TempDir()
	for d := range 100 {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%03d", d))
		os.MkdirAll(sub, 0o755)
		for f := range 100 {
			os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.go", f)), []byte("package x\n\nfunc F() {}\n"), 0o644)
		}
	}
	git := func(args ...string) {
		c := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@t", "-c", "user.name=t"}, args...)...)
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "init")
	os.WriteFile(filepath.Join(dir, "pkg050/f050.go"), []byte("package x\n\nfunc F() { println() }\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "pkg050/new.go"), []byte("package x\n\nfunc G() {}\n"), 0o644)
	keep := false
	p := local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep})
	h, _ := p.Create(context.Background(), sandbox.CreateOptions{})
	ctx := context.Background()
	base := sandbox.Baseline(ctx, h, "/workspace", nil)
	for _, tc := range []struct{ name, rel string }{{"tracked", "pkg050/f050.go"}, {"untracked", "pkg050/new.go"}} {
		b.Run(tc.name, func(b *testing.B) {
			e := sandbox.NewFileContent(h, "/workspace", base, sandbox.WatchEvent{Type: sandbox.FileChange, Path: "/workspace/" + tc.rel}, nil)
			if d := e.Diff(ctx); d == "" {
				b.Fatal("empty diff")
			}
			b.ResetTimer()
			for range b.N {
				e.Diff(ctx)
			}
		})
	}
}

// BenchmarkSnapshotRestore10k snapshots a 10,000-file workspace (100
// directories of 100 small files) and restores it into a new sandbox. The
// first snapshot stores the blobs; later ones find them stored.
func BenchmarkSnapshotRestore10k(b *testing.B) {
	base := b.TempDir()
	p := local.New(local.Options{BaseDir: base})
	ctx := context.Background()
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Destroy(ctx)
	dir := h.(*local.Handle).HostDir()
	for i := range 100 {
		sub := filepath.Join(dir, fmt.Sprint(i))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 100 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("%d.txt", j)), fmt.Appendf(nil, "file %d %d\n", i, j), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	sn := h.(sandbox.Snapshotter)
	for b.Loop() {
		snap, err := sn.Snapshot(ctx, "bench")
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
		b.StartTimer()
	}
}
