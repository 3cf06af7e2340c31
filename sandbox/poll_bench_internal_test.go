package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// hostExec is a minimal Handle for benchmarks: Exec runs sh -c in dir.
type hostExec struct {
	Handle
	dir string
}

func (h hostExec) Exec(ctx context.Context, cmd string, _ ExecOptions) (ExecResult, error) {
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.Dir = h.dir
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return ExecResult{}, err
	}
	return ExecResult{Stdout: out.String(), Stderr: errb.String(), ExitCode: c.ProcessState.ExitCode()}, nil
}

// BenchmarkPoll100k measures one poll tick over a 100,000-file tree (100
// dirs x 1,000 files): the find exec, parsing and the diff against the
// previous snapshot, next to the bare find it runs (output discarded).
// heap-MB is the live Go heap after the run with the snapshot retained.
func BenchmarkPoll100k(b *testing.B) {
	dir := b.TempDir()
	for d := range 100 {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%03d", d))
		os.MkdirAll(sub, 0o755)
		for f := range 1000 {
			os.WriteFile(filepath.Join(sub, fmt.Sprintf("file%04d.go", f)), []byte("package x\n"), 0o644)
		}
	}
	cmd := FindCommand(DefaultIgnore)
	b.Run("bare-find", func(b *testing.B) {
		for range b.N {
			c := exec.Command("sh", "-c", cmd+" > /dev/null")
			c.Dir = dir
			if err := c.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	touched := int64(0)
	for _, changed := range []bool{false, true} {
		name := "poll-unchanged"
		if changed {
			name = "poll-one-file-changed"
		}
		b.Run(name, func(b *testing.B) {
			events := 0
			p := newPollWatch(hostExec{dir: dir}, WatchOptions{Root: DefaultRoot, Ignore: DefaultIgnore, Logger: orDiscard(nil),
				OnEvent: func(WatchEvent) { events++ }})
			ctx := context.Background()
			p.seed(ctx)
			if p.prev == nil || p.prev.Len() != 100_000 {
				b.Fatal("bad seed")
			}
			f := filepath.Join(dir, "pkg050", "file0500.go")
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if changed {
					b.StopTimer()
					touched++
					mt := time.Unix(1_700_000_000+touched, 0)
					os.Chtimes(f, mt, mt)
					b.StartTimer()
				}
				p.tick(ctx)
			}
			b.StopTimer()
			if want := map[bool]int{false: 0, true: b.N}[changed]; events != want {
				b.Fatalf("%d events, want %d", events, want)
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
			runtime.KeepAlive(p)
		})
	}
}
