package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
)

// The low-level watcher outside a chat run (the seed's watchWorkspace
// example): ensure the sandbox, watch it, do some work, stop.
func ExampleWatchWorkspace() {
	ctx := context.Background()
	base, _ := os.MkdirTemp("", "example-")
	defer os.RemoveAll(base)
	repo, _ := sandbox.Define(sandbox.Definition{ID: "repo-agent", Provider: local.New(local.Options{BaseDir: base})})
	rc := sandbox.RunContext{ThreadID: "thread-1", RunID: "run-1"}
	h, _, err := repo.Ensure(ctx, rc)
	if err != nil {
		panic(err)
	}
	defer repo.Destroy(ctx, rc)

	var mu sync.Mutex
	var lines []string
	w, _ := sandbox.WatchWorkspace(ctx, h, sandbox.WatchOptions{
		OnEvent: func(e sandbox.WatchEvent) {
			mu.Lock()
			lines = append(lines, fmt.Sprintf("%s %s", e.Type, e.Path))
			mu.Unlock()
		},
		Ignore: []string{".git", "node_modules"}, // the default
	})
	h.Exec(ctx, "echo hi > notes.txt && mkdir -p node_modules && echo x > node_modules/dep.js", sandbox.ExecOptions{})
	time.Sleep(200 * time.Millisecond)
	h.Exec(ctx, "rm notes.txt", sandbox.ExecOptions{})
	time.Sleep(200 * time.Millisecond)
	w.Stop()
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// create /workspace/notes.txt
	// delete /workspace/notes.txt
}

// Sandbox-scoped hooks reading diffs against the git baseline (the seed's
// onFileChange example), driven the way the WithSandbox middleware drives
// them: baseline, watcher, enriched events, dispatcher.
func Example_fileHooks() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example-repo-")
	defer os.RemoveAll(dir)
	git := func(args ...string) {
		exec.Command("git", append([]string{"-C", dir, "-c", "user.email=a@b", "-c", "user.name=a"}, args...)...).Run()
	}
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o644)
	git("add", "main.go")
	git("commit", "-qm", "init")

	keep := false
	def := sandbox.Definition{
		ID:       "repo-agent",
		Provider: local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep}),
		Hooks: sandbox.Hooks{
			OnFileChange: func(ctx context.Context, e chat.FileEvent) error {
				fmt.Printf("%s changed:\n%s", strings.TrimPrefix(e.Path, "/workspace/"), e.Diff(ctx))
				return nil
			},
			OnFileCreate: func(ctx context.Context, e chat.FileEvent) error {
				fmt.Printf("created %s (before %q, after %q)\n", strings.TrimPrefix(e.Path, "/workspace/"), e.Before(ctx), e.After(ctx))
				return nil
			},
		},
	}
	s, _ := sandbox.Define(def)
	h, _, _ := s.Ensure(ctx, sandbox.RunContext{ThreadID: "t"})
	baseSHA := sandbox.Baseline(ctx, h, def.Root(), nil)
	d := sandbox.NewDispatcher(ctx, sandbox.DispatcherOptions{Hooks: def.Hooks})
	w, _ := sandbox.WatchWorkspace(ctx, h, sandbox.WatchOptions{Root: def.Root(), OnEvent: func(ev sandbox.WatchEvent) {
		d.Dispatch(sandbox.NewFileContent(h, def.Root(), baseSHA, ev, nil))
	}})
	h.FS().WriteFile(ctx, "/workspace/main.go", []byte("package main\n\nfunc main() {}\n"), 0o644)
	time.Sleep(200 * time.Millisecond)
	h.FS().WriteFile(ctx, "/workspace/util.go", []byte("package main"), 0o644)
	time.Sleep(200 * time.Millisecond)
	w.Stop()
	d.Close()
	h.Destroy(ctx)
	// Output:
	// main.go changed:
	// diff --git a/main.go b/main.go
	// index 06ab7d0..38dd16d 100644
	// --- a/main.go
	// +++ b/main.go
	// @@ -1 +1,3 @@
	//  package main
	// +
	// +func main() {}
	// created util.go (before "", after "package main")
}
