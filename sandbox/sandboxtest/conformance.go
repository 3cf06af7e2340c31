// Package sandboxtest holds the provider conformance suite and test
// doubles (a scriptable fake handle and provider, a recording slog handler).
package sandboxtest

import (
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/sandbox"
)

// Run runs the provider conformance suite. newProvider returns a fresh
// provider for each subtest; sandboxes it creates are destroyed by the
// suite.
func Run(t *testing.T, newProvider func(t *testing.T) sandbox.Provider) {
	t.Run("Capabilities", func(t *testing.T) { testCapabilities(t, newHandle(t, newProvider)) })
	t.Run("Exec", func(t *testing.T) { testExec(t, newHandle(t, newProvider)) })
	t.Run("ExecOutputCap", func(t *testing.T) { testExecOutputCap(t, newHandle(t, newProvider)) })
	t.Run("Spawn", func(t *testing.T) { testSpawn(t, newHandle(t, newProvider)) })
	t.Run("Kill", func(t *testing.T) { testKill(t, newHandle(t, newProvider)) })
	t.Run("FS", func(t *testing.T) { testFS(t, newHandle(t, newProvider)) })
	t.Run("Confinement", func(t *testing.T) { testConfinement(t, newHandle(t, newProvider)) })
	t.Run("Destroy", func(t *testing.T) { testDestroy(t, newProvider(t)) })
	t.Run("WatchNative", func(t *testing.T) { testWatch(t, newHandle(t, newProvider), sandbox.WatchNative) })
	t.Run("WatchPoll", func(t *testing.T) { testWatch(t, newHandle(t, newProvider), sandbox.WatchPoll) })
	t.Run("Diff", func(t *testing.T) { testDiff(t, newHandle(t, newProvider)) })
	t.Run("SnapshotRestore", func(t *testing.T) { testSnapshotRestore(t, newProvider(t)) })
	t.Run("Fork", func(t *testing.T) { testFork(t, newProvider(t)) })
	t.Run("EnsureRestoresSnapshot", func(t *testing.T) { testEnsureRestores(t, newProvider(t)) })
}

// snapshotting returns p's handle and snapshot interfaces, skipping the
// test when p does not claim snapshots.
func snapshotting(t *testing.T, p sandbox.Provider) (sandbox.Handle, sandbox.Snapshotter, sandbox.SnapshotRestorer) {
	t.Helper()
	rr, ok := p.(sandbox.SnapshotRestorer)
	if !p.Capabilities().Snapshots || !ok {
		t.Skipf("provider %s has no snapshots", p.Name())
	}
	h, err := p.Create(context.Background(), sandbox.CreateOptions{ID: "conformance-snapshot"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	destroyLater(t, h)
	sn, ok := h.(sandbox.Snapshotter)
	if !ok {
		t.Fatal("Snapshots claimed but the handle is not a Snapshotter")
	}
	return h, sn, rr
}

func destroyLater(t *testing.T, h sandbox.Handle) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := h.Destroy(ctx); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
}

func readFile(t *testing.T, h sandbox.Handle, name string) string {
	t.Helper()
	b, err := h.FS().ReadFile(context.Background(), name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

// testSnapshotRestore: a snapshot is the workspace as it was; restoring it
// gives a new, independent sandbox.
func testSnapshotRestore(t *testing.T, p sandbox.Provider) {
	ctx := context.Background()
	h, sn, rr := snapshotting(t, p)
	root := h.WorkspaceRoot()
	mustExec(t, h, "mkdir -p sub/deep && printf one > a.txt && printf deep > sub/deep/b.txt && printf '#!/bin/sh\necho hi\n' > run.sh && chmod 755 run.sh")
	snap, err := sn.Snapshot(ctx, "conformance")
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if snap.ID == "" || snap.Label != "conformance" {
		t.Fatalf("snapshot %+v", snap)
	}
	mustExec(t, h, "printf changed > a.txt && rm sub/deep/b.txt")
	rh, err := rr.RestoreSnapshot(ctx, sandbox.RestoreOptions{SnapshotID: snap.ID, Env: map[string]string{"GOAI_RESTORED": "yes"}})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	destroyLater(t, rh)
	if rh.ID() == h.ID() {
		t.Fatal("restore returned the original sandbox")
	}
	if got := readFile(t, rh, root+"/a.txt"); got != "one" {
		t.Errorf("restored a.txt %q", got)
	}
	if got := readFile(t, rh, root+"/sub/deep/b.txt"); got != "deep" {
		t.Errorf("restored sub/deep/b.txt %q", got)
	}
	if got := mustExec(t, rh, `./run.sh; printf %s "$GOAI_RESTORED"`).Stdout; got != "hi\nyes" {
		t.Errorf("restored executable and env: %q", got)
	}
	// Independent: writes to the restored sandbox leave the original alone.
	mustExec(t, rh, "printf restored > a.txt")
	if got := readFile(t, h, root+"/a.txt"); got != "changed" {
		t.Errorf("original a.txt %q after a write to the restored one", got)
	}
	if _, err := rr.RestoreSnapshot(ctx, sandbox.RestoreOptions{SnapshotID: "no-such-snapshot"}); err == nil {
		t.Error("restoring an unknown snapshot succeeded")
	}
}

// testFork: Sandbox.Fork copies a thread's live sandbox for another thread,
// and Ensure of that thread resumes the copy.
func testFork(t *testing.T, p sandbox.Provider) {
	ctx := context.Background()
	if !p.Capabilities().Fork || !p.Capabilities().Snapshots {
		t.Skipf("provider %s cannot fork", p.Name())
	}
	s, err := sandbox.Define(sandbox.Definition{ID: "conformance-fork", Provider: p, Lifecycle: sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone}})
	if err != nil {
		t.Fatal(err)
	}
	from, to := sandbox.RunContext{ThreadID: "thread-a", RunID: "r1"}, sandbox.RunContext{ThreadID: "thread-b", RunID: "r2"}
	h, _, err := s.Ensure(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	destroyLater(t, h)
	root := h.WorkspaceRoot()
	mustExec(t, h, "printf base > f.txt")
	fh, err := s.Fork(ctx, from, to)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	destroyLater(t, fh)
	if fh.ID() == h.ID() || readFile(t, fh, root+"/f.txt") != "base" {
		t.Fatalf("fork: id %s (original %s)", fh.ID(), h.ID())
	}
	mustExec(t, fh, "printf forked > f.txt")
	if got := readFile(t, h, root+"/f.txt"); got != "base" {
		t.Errorf("the fork wrote into the original: %q", got)
	}
	again, outcome, err := s.Ensure(ctx, to)
	if err != nil || outcome != sandbox.OutcomeResumed || again.ID() != fh.ID() {
		t.Fatalf("ensure of the forked thread: %v %s %v", outcome, again, err)
	}
	if _, err := s.Fork(ctx, from, to); err == nil {
		t.Error("forking onto a thread that has a sandbox succeeded")
	}
}

// testEnsureRestores: ensure resumes, else restores the recorded snapshot
// (the after-setup one), else creates.
func testEnsureRestores(t *testing.T, p sandbox.Provider) {
	ctx := context.Background()
	if !p.Capabilities().Snapshots {
		t.Skipf("provider %s has no snapshots", p.Name())
	}
	s, err := sandbox.Define(sandbox.Definition{ID: "conformance-ensure", Provider: p,
		Workspace: &sandbox.Workspace{Setup: sandbox.Serial("printf set-up > setup.txt")}})
	if err != nil {
		t.Fatal(err)
	}
	rc := sandbox.RunContext{ThreadID: "thread-e", RunID: "r1"}
	h, outcome, err := s.Ensure(ctx, rc)
	if err != nil || outcome != sandbox.OutcomeCreated {
		t.Fatalf("first ensure: %s %v", outcome, err)
	}
	root := h.WorkspaceRoot()
	h2, outcome, err := s.Ensure(ctx, rc)
	if err != nil || outcome != sandbox.OutcomeResumed || h2.ID() != h.ID() {
		t.Fatalf("second ensure: %s %v", outcome, err)
	}
	// The sandbox goes away behind the store's back: ensure restores the
	// after-setup snapshot (no bootstrap: the setup does not run again).
	if err := p.Destroy(ctx, h.ID()); err != nil {
		t.Fatal(err)
	}
	h3, outcome, err := s.Ensure(ctx, rc)
	if err != nil || outcome != sandbox.OutcomeNativeRestored {
		t.Fatalf("ensure after the sandbox vanished: %s %v", outcome, err)
	}
	destroyLater(t, h3)
	if h3.ID() == h.ID() || readFile(t, h3, root+"/setup.txt") != "set-up" {
		t.Fatalf("restored sandbox %s lacks the setup's file", h3.ID())
	}
}

func newHandle(t *testing.T, newProvider func(t *testing.T) sandbox.Provider) sandbox.Handle {
	t.Helper()
	p := newProvider(t)
	h, err := p.Create(context.Background(), sandbox.CreateOptions{ID: "conformance"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := h.Destroy(ctx); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	return h
}

func mustExec(t *testing.T, h sandbox.Handle, cmd string) sandbox.ExecResult {
	t.Helper()
	res, err := h.Exec(context.Background(), cmd, sandbox.ExecOptions{})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d: %s", cmd, res.ExitCode, res.Stderr)
	}
	return res
}

func testCapabilities(t *testing.T, h sandbox.Handle) {
	caps := h.Capabilities()
	if !caps.Exec {
		t.Error("Exec must always be true")
	}
	if h.ID() == "" || h.Provider() == "" || h.WorkspaceRoot() == "" {
		t.Errorf("id %q provider %q root %q", h.ID(), h.Provider(), h.WorkspaceRoot())
	}
	if _, ok := h.FS().(sandbox.NativeWatcher); caps.NativeWatch && !ok {
		t.Error("NativeWatch set but the FS is not a NativeWatcher")
	}
}

func testExec(t *testing.T, h sandbox.Handle) {
	ctx := context.Background()
	res := mustExec(t, h, "echo hello; echo oops >&2")
	if !strings.Contains(res.Stdout, "hello") || !strings.Contains(res.Stderr, "oops") {
		t.Errorf("exec: %+v", res)
	}
	if res, err := h.Exec(ctx, "exit 7", sandbox.ExecOptions{}); err != nil || res.ExitCode != 7 {
		t.Errorf("exit 7: %+v %v", res, err)
	}
	// cwd defaults to the workspace root; Dir is a virtual path.
	mustExec(t, h, "mkdir -p sub && echo marker > sub/m.txt")
	res, err := h.Exec(ctx, "cat m.txt", sandbox.ExecOptions{Dir: h.WorkspaceRoot() + "/sub"})
	if err != nil || res.Stdout != "marker\n" {
		t.Errorf("cwd: %+v %v", res, err)
	}
	// Per-call env merges over the handle env.
	if err := h.SetEnv(map[string]string{"GOAI_A": "1", "GOAI_B": "x"}); err != nil {
		t.Fatal(err)
	}
	res, err = h.Exec(ctx, `printf '%s%s' "$GOAI_A" "$GOAI_B"`, sandbox.ExecOptions{Env: map[string]string{"GOAI_B": "2"}})
	if err != nil || res.Stdout != "12" {
		t.Errorf("env: %+v %v", res, err)
	}
	// Cancelling the context kills the command promptly.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := h.Exec(cctx, "sleep 30", sandbox.ExecOptions{}); err == nil {
		t.Error("cancelled exec returned no error")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("cancelled exec took %v", el)
	}
}

// testExecOutputCap: Exec keeps at most MaxOutputBytes of each stream,
// says what it cut, and a command printing far more than that neither
// fails nor makes the caller allocate its output.
func testExecOutputCap(t *testing.T, h sandbox.Handle) {
	ctx := context.Background()
	res, err := h.Exec(ctx, `head -c 3000 /dev/zero | tr '\000' a; printf '\342\202\254\342\202\254' >&2; exit 4`, sandbox.ExecOptions{MaxOutputBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 4 || res.Stdout != strings.Repeat("a", 1000) || !res.Truncated || res.StdoutDropped != 2000 {
		t.Fatalf("capped stdout: exit %d, %d bytes, truncated %v, dropped %d", res.ExitCode, len(res.Stdout), res.Truncated, res.StdoutDropped)
	}
	if res.Stderr != "€€" || res.StderrDropped != 0 {
		t.Fatalf("stderr %q dropped %d", res.Stderr, res.StderrDropped)
	}
	// A rune cut by the cap is left out, not half-kept.
	res, err = h.Exec(ctx, `printf 'ab\342\202\254'`, sandbox.ExecOptions{MaxOutputBytes: 4})
	if err != nil || res.Stdout != "ab" || !res.Truncated {
		t.Fatalf("cut rune: %q truncated %v err %v", res.Stdout, res.Truncated, err)
	}
	// The default cap, under a flood: 64 MiB printed, 1 MiB kept, and the
	// caller allocates nowhere near the flood.
	const flood = 64 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err = h.Exec(ctx, "head -c "+strconv.Itoa(flood)+" /dev/zero", sandbox.ExecOptions{})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || len(res.Stdout) != sandbox.DefaultMaxOutputBytes || !res.Truncated || res.StdoutDropped != flood-sandbox.DefaultMaxOutputBytes {
		t.Fatalf("flood: exit %d, kept %d, truncated %v, dropped %d", res.ExitCode, len(res.Stdout), res.Truncated, res.StdoutDropped)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > flood/2 {
		t.Fatalf("Exec allocated %d bytes for a %d-byte flood", grew, flood)
	}
	// Unlimited keeps everything.
	res, err = h.Exec(ctx, "head -c 1500000 /dev/zero", sandbox.ExecOptions{MaxOutputBytes: sandbox.UnlimitedOutput})
	if err != nil || len(res.Stdout) != 1500000 || res.Truncated {
		t.Fatalf("unlimited: kept %d truncated %v err %v", len(res.Stdout), res.Truncated, err)
	}
}

func testSpawn(t *testing.T, h sandbox.Handle) {
	if !h.Capabilities().BackgroundProcesses {
		_, err := h.Spawn(context.Background(), "true", sandbox.ExecOptions{})
		if !errors.Is(err, sandbox.ErrUnsupported) {
			t.Errorf("spawn without capability: %v", err)
		}
		return
	}
	ctx := context.Background()
	// "€" is e2 82 ac: split across writes, it must come out whole.
	p, err := h.Spawn(ctx, `printf '\342\202'; sleep 0.2; printf '\254\n'; printf 'err' >&2; exit 3`, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var chunks []string
	var stderr []byte
	var wg sync.WaitGroup
	wg.Go(func() { stderr, _ = io.ReadAll(p.Stderr()) })
	for c, err := range sandbox.Chunks(p.Stdout()) {
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(c) {
			t.Errorf("chunk %q is not valid UTF-8", c)
		}
		chunks = append(chunks, c)
	}
	wg.Wait()
	if got := strings.Join(chunks, ""); got != "€\n" {
		t.Errorf("stdout %q", got)
	}
	if string(stderr) != "err" {
		t.Errorf("stderr %q", stderr)
	}
	code, err := p.Wait(ctx)
	if err != nil || code != 3 {
		t.Errorf("wait: %d %v", code, err)
	}
	if !h.Capabilities().WritableStdin {
		return
	}
	p, err = h.Spawn(ctx, "cat", sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(p.Stdin(), "ping\n")
	p.Stdin().Close()
	out, _ := io.ReadAll(p.Stdout())
	if string(out) != "ping\n" {
		t.Errorf("stdin echo %q", out)
	}
	if code, err := p.Wait(ctx); code != 0 || err != nil {
		t.Errorf("cat: %d %v", code, err)
	}
}

func testKill(t *testing.T, h sandbox.Handle) {
	if !h.Capabilities().KillableProcesses || !h.Capabilities().BackgroundProcesses {
		t.Skip("provider cannot kill processes")
	}
	ctx := context.Background()
	p, err := h.Spawn(ctx, "sleep 30 & sleep 30; wait", sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := p.Kill(nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := p.Wait(wctx); err != nil {
		t.Fatalf("wait after kill: %v", err)
	}
	// The background child died with the group: stdout reaches EOF.
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, p.Stdout()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("a child outlived Kill (stdout still open)")
	}
	// Killing an exited process is not an error.
	if err := p.Kill(nil); err != nil {
		t.Errorf("second kill: %v", err)
	}
}

func testFS(t *testing.T, h sandbox.Handle) {
	ctx := context.Background()
	fs := h.FS()
	root := h.WorkspaceRoot()
	if err := fs.WriteFile(ctx, root+"/dir/a.txt", []byte("héllo"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(ctx, root+"/dir/a.txt")
	if err != nil || string(b) != "héllo" {
		t.Fatalf("read %q %v", b, err)
	}
	if got := mustExec(t, h, "cat dir/a.txt").Stdout; got != "héllo" {
		t.Errorf("exec sees %q", got)
	}
	if err := fs.MkdirAll(ctx, root+"/dir/sub/deeper"); err != nil {
		t.Fatal(err)
	}
	ents, err := fs.ReadDir(ctx, root+"/dir")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name+":"+string(e.Type))
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a.txt:file", "sub:dir"}) {
		t.Errorf("list %v", names)
	}
	if err := fs.Rename(ctx, root+"/dir/a.txt", root+"/dir/b.txt"); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{root + "/dir/a.txt": false, root + "/dir/b.txt": true, root + "/nope": false} {
		if ok, err := fs.Exists(ctx, p); err != nil || ok != want {
			t.Errorf("exists %s = %v %v", p, ok, err)
		}
	}
	if ls, ok := fs.(sandbox.Lstater); ok {
		if fi, err := ls.Lstat(ctx, root+"/missing"); fi != nil || err != nil {
			t.Errorf("lstat missing: %+v %v", fi, err)
		}
		if fi, err := ls.Lstat(ctx, root+"/dir/b.txt"); err != nil || fi == nil || fi.Type != sandbox.EntryFile || fi.Size != int64(len("héllo")) {
			t.Errorf("lstat file: %+v %v", fi, err)
		}
	}
	if err := fs.RemoveAll(ctx, root+"/dir"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := fs.Exists(ctx, root+"/dir"); ok {
		t.Error("dir survived RemoveAll")
	}
}

func testConfinement(t *testing.T, h sandbox.Handle) {
	ctx := context.Background()
	fs := h.FS()
	root := h.WorkspaceRoot()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, sandbox.ErrOutsideRoot) {
			t.Errorf("%s: want ErrOutsideRoot, got %v", what, err)
			return
		}
		var pe *sandbox.PathError
		if !errors.As(err, &pe) || pe.Path == "" || !strings.Contains(err.Error(), pe.Path) {
			t.Errorf("%s: error does not name the path: %v", what, err)
		}
	}
	_, err := fs.ReadFile(ctx, "../../../etc/passwd")
	check("relative ..", err)
	_, err = fs.ReadFile(ctx, root+"/../etc/passwd")
	check("absolute ..", err)
	check("write ..", fs.WriteFile(ctx, root+"/a/../../x", []byte("x"), 0o644))
	_, err = h.Exec(ctx, "true", sandbox.ExecOptions{Dir: root + "/../.."})
	check("exec dir ..", err)
	// Symlinks that escape.
	mustExec(t, h, "ln -s / escape && ln -s ../../../../../../tmp rel-escape && ln -s /nonexistent-goai dangling && mkdir in && ln -s in ok")
	_, err = fs.ReadFile(ctx, root+"/escape/etc/passwd")
	check("symlink read", err)
	check("symlink write", fs.WriteFile(ctx, root+"/rel-escape/goai-pwned", []byte("x"), 0o644))
	check("dangling symlink write", fs.WriteFile(ctx, root+"/dangling", []byte("x"), 0o644))
	_, err = fs.ReadDir(ctx, root+"/escape")
	check("symlink list", err)
	_, err = h.Exec(ctx, "true", sandbox.ExecOptions{Dir: root + "/escape"})
	check("symlink exec dir", err)
	// A symlink inside the root is fine, and the link itself can be removed.
	if err := fs.WriteFile(ctx, root+"/ok/f", []byte("x"), 0o644); err != nil {
		t.Errorf("in-root symlink: %v", err)
	}
	if err := fs.RemoveAll(ctx, root+"/escape"); err != nil {
		t.Errorf("remove the escaping link itself: %v", err)
	}
	if res := mustExec(t, h, "test -d /etc && echo yes"); res.Stdout != "yes\n" {
		t.Error("removing the link followed it")
	}
}

func testDestroy(t *testing.T, p sandbox.Provider) {
	ctx := context.Background()
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	caps := h.Capabilities()
	var procs []sandbox.Process
	if caps.BackgroundProcesses {
		for _, cmd := range []string{"sleep 300", "sleep 300 & sleep 300; wait"} {
			sp, err := h.Spawn(ctx, cmd, sandbox.ExecOptions{})
			if err != nil {
				t.Fatal(err)
			}
			procs = append(procs, sp)
		}
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := h.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	for _, sp := range procs {
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err := sp.Wait(wctx)
		cancel()
		if err != nil {
			t.Errorf("process survived destroy: %v", err)
		}
	}
	if el := time.Since(start); el > 12*time.Second {
		t.Errorf("destroy took %v", el)
	}
	if rh, err := p.Resume(ctx, h.ID()); err == nil && rh != nil {
		// Providers that keep the workspace may resume it; then it must work.
		if res, err := rh.Exec(ctx, "true", sandbox.ExecOptions{}); err != nil || res.ExitCode != 0 {
			t.Errorf("resumed handle: %+v %v", res, err)
		}
		rh.Destroy(ctx)
	}
}

type events struct {
	mu  sync.Mutex
	evs []sandbox.WatchEvent
}

func (e *events) add(ev sandbox.WatchEvent) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}

func (e *events) since(i int) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.evs[min(i, len(e.evs)):] {
		out = append(out, string(ev.Type)+" "+ev.Path)
	}
	return out
}

func (e *events) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.evs)
}

// expect waits until the events after mark equal want.
func (e *events) expect(t *testing.T, mark int, want []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if got := e.since(mark); len(got) >= len(want) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(within / 10) // catch extras
	if got := e.since(mark); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

func testWatch(t *testing.T, h sandbox.Handle, mode sandbox.WatchMode) {
	if mode == sandbox.WatchNative && !h.Capabilities().NativeWatch {
		t.Skip("no native watching")
	}
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	root := h.WorkspaceRoot()
	mustExec(t, h, "echo old > existing.txt && mkdir -p .git node_modules/x")
	var evs events
	w, err := sandbox.WatchWorkspace(ctx, h, sandbox.WatchOptions{Mode: mode, Interval: 50 * time.Millisecond, OnEvent: evs.add})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if w.Mode() != mode {
		t.Fatalf("mode %v, want %v", w.Mode(), mode)
	}
	wait := 2 * time.Second
	step := func(cmd string, want ...string) {
		t.Helper()
		mark := evs.len()
		mustExec(t, h, cmd)
		evs.expect(t, mark, want, wait)
	}
	step("echo a > a.txt", "create "+root+"/a.txt")
	step("sleep 0.01; echo more >> existing.txt", "change "+root+"/existing.txt")
	step("mkdir -p new/deep && echo x > new/deep/f.txt", "create "+root+"/new/deep/f.txt")
	step("echo x > .git/HEAD2 && echo y > node_modules/x/i.js")
	step("rm a.txt", "delete "+root+"/a.txt")
	if mode == sandbox.WatchNative {
		step("mv existing.txt moved.txt", "delete "+root+"/existing.txt", "create "+root+"/moved.txt")
		step("mv new gone-dir", "delete "+root+"/new/deep/f.txt", "create "+root+"/gone-dir/deep/f.txt")
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	mark := evs.len()
	mustExec(t, h, "echo late > late.txt")
	time.Sleep(150 * time.Millisecond)
	if got := evs.since(mark); len(got) != 0 {
		t.Errorf("events after Stop: %v", got)
	}
}

func testDiff(t *testing.T, h sandbox.Handle) {
	if res, err := h.Exec(context.Background(), "git --version", sandbox.ExecOptions{}); err != nil || res.ExitCode != 0 {
		t.Skip("git is not available in the sandbox")
	}
	ctx := context.Background()
	root := h.WorkspaceRoot()
	mustExec(t, h, `git init -q . && git config user.email t@t && git config user.name t &&
printf 'one\ntwo\n' > tracked.txt && echo secret > .env && echo .env > .gitignore && echo bye > doomed.txt &&
git add tracked.txt .gitignore doomed.txt && git commit -qm init`)
	base := sandbox.Baseline(ctx, h, root, nil)
	if len(base) != 40 {
		t.Fatalf("baseline %q", base)
	}
	mustExec(t, h, `printf 'one\nTWO\n' > tracked.txt && printf 'a\nb' > new.txt && echo leaked > .env && rm doomed.txt`)
	ev := func(typ sandbox.FileEventType, rel string) *sandbox.FileContent {
		return sandbox.NewFileContent(h, root, base, sandbox.WatchEvent{Type: typ, Path: root + "/" + rel, Timestamp: time.Now()}, nil)
	}
	tracked := ev(sandbox.FileChange, "tracked.txt")
	if d := tracked.Diff(ctx); !strings.Contains(d, "-two\n+TWO\n") || !strings.Contains(d, "diff --git a/tracked.txt b/tracked.txt") {
		t.Errorf("tracked diff %q", d)
	}
	if b, a := tracked.Before(ctx), tracked.After(ctx); b != "one\ntwo\n" || a != "one\nTWO\n" {
		t.Errorf("before %q after %q", b, a)
	}
	want := "diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n"
	if d := ev(sandbox.FileCreate, "new.txt").Diff(ctx); d != want {
		t.Errorf("untracked diff %q", d)
	}
	if d := ev(sandbox.FileChange, ".env").Diff(ctx); d != "" {
		t.Errorf("ignored file diff %q", d)
	}
	if d := ev(sandbox.FileDelete, "doomed.txt").Diff(ctx); !strings.Contains(d, "deleted file mode") || !strings.Contains(d, "-bye") {
		t.Errorf("delete diff %q", d)
	}
	if b := ev(sandbox.FileDelete, "doomed.txt").Before(ctx); b != "bye\n" {
		t.Errorf("deleted before %q", b)
	}
	// The baseline is fixed: a commit during the session does not move it.
	mustExec(t, h, `git add -A && git commit -qm mid && printf 'one\nTWO\nthree\n' > tracked.txt`)
	if d := tracked.Diff(ctx); !strings.Contains(d, "-two\n+TWO\n+three\n") {
		t.Errorf("cumulative diff %q", d)
	}
}
