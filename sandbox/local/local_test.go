package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
	"github.com/goai-sdk/goai/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func requireBwrap(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap missing: run scripts/setup-sandbox.sh")
	}
}

func TestConformancePlain(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Provider {
		return local.New(local.Options{BaseDir: t.TempDir()})
	})
}

func TestConformanceBubblewrap(t *testing.T) {
	requireBwrap(t)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Provider {
		return local.New(local.Options{BaseDir: t.TempDir(), Isolation: local.IsolationBubblewrap})
	})
}

func create(t *testing.T, opts local.Options) (*local.Provider, *local.Handle) {
	t.Helper()
	if opts.BaseDir == "" && opts.Dir == "" {
		opts.BaseDir = t.TempDir()
	}
	p := local.New(opts)
	h, err := p.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Destroy(context.Background()) })
	return p, h.(*local.Handle)
}

func TestItem38LocalProcessBasics(t *testing.T) {
	ctx := context.Background()
	p, h := create(t, local.Options{})
	res, err := h.Exec(ctx, "echo hello", sandbox.ExecOptions{})
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "hello") {
		t.Fatalf("%+v %v", res, err)
	}
	if res, _ := h.Exec(ctx, "exit 7", sandbox.ExecOptions{}); res.ExitCode != 7 {
		t.Fatalf("exit %d", res.ExitCode)
	}
	_, err = h.FS().ReadFile(ctx, "/workspace/../../etc/passwd")
	var pe *sandbox.PathError
	if !errors.As(err, &pe) || !errors.Is(err, sandbox.ErrOutsideRoot) ||
		err.Error() != fmt.Sprintf("local-process: path %q resolves outside the sandbox root %q", "/workspace/../../etc/passwd", h.HostDir()) {
		t.Fatalf("err %v", err)
	}
	if fi, err := h.FS().(sandbox.Lstater).Lstat(ctx, "/workspace/missing"); fi != nil || err != nil {
		t.Fatalf("lstat %+v %v", fi, err)
	}
	if rh, err := p.Resume(ctx, filepath.Join(t.TempDir(), "gone")); rh != nil || err != nil {
		t.Fatalf("resume %v %v", rh, err)
	}
	if rh, err := p.Resume(ctx, h.ID()); rh == nil || err != nil {
		t.Fatalf("resume existing %v %v", rh, err)
	}
	// Any other absolute path is re-rooted into the workspace.
	if err := h.FS().WriteFile(ctx, "/tmp/x", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.HostDir(), "tmp/x")); err != nil {
		t.Fatal(err)
	}
	// A signal-killed command reports 128+signal.
	if res, _ := h.Exec(ctx, "kill -9 $$", sandbox.ExecOptions{}); res.ExitCode != 137 {
		t.Fatalf("killed exit %d", res.ExitCode)
	}
}

func alive(pid int) bool {
	// A zombie still answers kill(0); check /proc state too.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z" && syscall.Kill(pid, 0) == nil
}

// pidOf starts `sleep` through the handle and returns the host pid.
func backgroundSleep(t *testing.T, h *local.Handle, marker string) int {
	t.Helper()
	res, err := h.Exec(context.Background(), "sleep 300 >/dev/null 2>&1 & echo $!", sandbox.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	var pid int
	fmt.Sscan(res.Stdout, &pid)
	if !alive(pid) {
		t.Fatalf("sleep %d not running", pid)
	}
	return pid
}

func TestItem39DestroyKillsChildren(t *testing.T) {
	ctx := context.Background()
	keep := false
	dir := t.TempDir()
	_, h := create(t, local.Options{Dir: dir, RemoveOnDestroy: &keep})
	pid := backgroundSleep(t, h, "a")
	sp, err := h.Spawn(ctx, "sleep 300", sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if alive(pid) || alive(sp.PID()) {
		t.Fatal("child survived destroy")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal("directory removed despite RemoveOnDestroy=false")
	}
	if _, err := h.Exec(ctx, "true", sandbox.ExecOptions{}); !errors.Is(err, local.ErrDestroyed) {
		t.Fatalf("exec after destroy: %v", err)
	}

	// With removal, the directory goes even while a child has it as cwd.
	_, h2 := create(t, local.Options{})
	pid2 := backgroundSleep(t, h2, "b")
	if err := h2.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if alive(pid2) {
		t.Fatal("child survived")
	}
	if _, err := os.Stat(h2.HostDir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dir still there: %v", err)
	}

	// provider.Destroy(id) kills the handle's processes too.
	p3, h3 := create(t, local.Options{})
	pid3 := backgroundSleep(t, h3, "c")
	if err := p3.Destroy(ctx, h3.ID()); err != nil {
		t.Fatal(err)
	}
	if alive(pid3) {
		t.Fatal("provider.Destroy left a child running")
	}
}

func TestBubblewrapIsolation(t *testing.T) {
	requireBwrap(t)
	ctx := context.Background()
	_, h := create(t, local.Options{Isolation: local.IsolationBubblewrap})
	run := func(cmd string) sandbox.ExecResult {
		t.Helper()
		res, err := h.Exec(ctx, cmd, sandbox.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run("echo ok > inside.txt && cat inside.txt"); res.ExitCode != 0 || res.Stdout != "ok\n" {
		t.Fatalf("workspace not writable: %+v", res)
	}
	probe := fmt.Sprintf("/usr/goai-probe-%d", time.Now().UnixNano())
	defer os.Remove(probe)
	if res := run("touch " + probe); res.ExitCode == 0 {
		t.Fatal("host root is writable")
	}
	if _, err := os.Stat(probe); err == nil {
		t.Fatal("wrote to the host")
	}
	if res := run("echo $$"); strings.TrimSpace(res.Stdout) == "" || len(strings.TrimSpace(res.Stdout)) > 2 {
		t.Fatalf("not in a PID namespace: pid %q", res.Stdout)
	}
	if res := run("ls /proc | grep -c '^[0-9]'"); strings.TrimSpace(res.Stdout) > "5" && len(strings.TrimSpace(res.Stdout)) == 1 {
		t.Fatalf("sees host processes: %q", res.Stdout)
	}
	if res := run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"); strings.TrimSpace(res.Stdout) != "lo" {
		t.Fatalf("network namespace has interfaces %q", res.Stdout)
	}
	// No network: connecting to a host listener fails.
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	port := addr[strings.LastIndex(addr, ":")+1:]
	if res := run("bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + port + "' 2>/dev/null && echo connected"); strings.Contains(res.Stdout, "connected") {
		t.Fatal("network reachable inside bwrap")
	}
	// Killing a spawned command kills everything in its namespace.
	sp, err := h.Spawn(ctx, "sleep 3001 & sleep 3002; wait", sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	deadline := time.Now().Add(3 * time.Second)
	for len(pids) < 2 && time.Now().Before(deadline) {
		pids = nil
		for _, name := range []string{"sleep 3001", "sleep 3002"} {
			out, _ := exec.Command("pgrep", "-x", "-f", name).Output()
			for _, f := range strings.Fields(string(out)) {
				var p int
				fmt.Sscan(f, &p)
				pids = append(pids, p)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(pids) != 2 {
		t.Fatalf("sleeps not found: %v", pids)
	}
	if err := sp.Kill(nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := sp.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && (alive(pids[0]) || alive(pids[1])) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, p := range pids {
		if alive(p) {
			t.Fatalf("namespace process %d outlived the kill", p)
		}
	}
}

// ---- real inotify ----

type recorder struct {
	mu  sync.Mutex
	evs []sandbox.WatchEvent
}

func (r *recorder) add(e sandbox.WatchEvent) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

func (r *recorder) pairs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		out = append(out, string(e.Type)+" "+strings.TrimPrefix(e.Path, "/workspace/"))
	}
	return out
}

func settle(t *testing.T, r *recorder, n int) []string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && len(r.pairs()) < n {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond)
	return r.pairs()
}

func watch(t *testing.T, h sandbox.Handle, opts sandbox.WatchOptions, r *recorder) *sandbox.Watcher {
	t.Helper()
	opts.OnEvent = r.add
	w, err := sandbox.WatchWorkspace(context.Background(), h, opts)
	if err != nil {
		t.Fatal(err)
	}
	if w.Mode() != sandbox.WatchNative && opts.Mode != sandbox.WatchPoll {
		t.Fatalf("mode %v", w.Mode())
	}
	return w
}

func TestNativeNewDirectoryFilesCreatedBeforeWatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	_, h := create(t, local.Options{})
	var r recorder
	w := watch(t, h, sandbox.WatchOptions{}, &r)
	defer w.Stop()
	// One command: the directories and the files inside appear before the
	// watcher can add watches for the new directories.
	cmd := "mkdir -p a/b/c && for i in $(seq 1 50); do echo $i > a/b/c/f$i; done && mkdir -p x && echo y > x/y"
	if res, err := h.Exec(context.Background(), cmd, sandbox.ExecOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatal(res, err)
	}
	settle(t, &r, 51)
	// A tree moved in from outside: one raw event for its top directory;
	// every file inside is found by walking it.
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(outside, "tree", "p", "q"), 0o755)
	for i := range 20 {
		os.WriteFile(filepath.Join(outside, "tree", "p", "q", fmt.Sprintf("m%d", i)), []byte("x"), 0o644)
	}
	if err := os.Rename(filepath.Join(outside, "tree"), filepath.Join(h.HostDir(), "tree")); err != nil {
		t.Fatal(err)
	}
	got := settle(t, &r, 71)
	slices.Sort(got)
	var want []string
	for i := 1; i <= 50; i++ {
		want = append(want, fmt.Sprintf("create a/b/c/f%d", i))
	}
	want = append(want, "create x/y")
	for i := range 20 {
		want = append(want, fmt.Sprintf("create tree/p/q/m%d", i))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d events %v", len(got), got)
	}
}

func TestNativeRenamesAndMoves(t *testing.T) {
	defer goleak.VerifyNone(t)
	_, h := create(t, local.Options{})
	outside := t.TempDir()
	dir := h.HostDir()
	os.MkdirAll(filepath.Join(dir, "d/sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "d/sub/f"), []byte("1"), 0o644)
	os.WriteFile(filepath.Join(dir, "a"), []byte("1"), 0o644)
	os.WriteFile(filepath.Join(dir, "b"), []byte("1"), 0o644)
	os.WriteFile(filepath.Join(outside, "in"), []byte("1"), 0o644)
	var r recorder
	w := watch(t, h, sandbox.WatchOptions{}, &r)
	defer w.Stop()
	steps := []struct {
		do   func()
		want []string
	}{
		{func() { os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "a2")) }, []string{"delete a", "create a2"}},
		{func() { os.Rename(filepath.Join(dir, "a2"), filepath.Join(dir, "b")) }, []string{"delete a2", "change b"}}, // onto an existing file
		{func() { os.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "e")) }, []string{"delete d/sub/f", "create e/sub/f"}},
		{func() { os.Rename(filepath.Join(dir, "e"), filepath.Join(outside, "e")) }, []string{"delete e/sub/f"}},
		{func() { os.Rename(filepath.Join(outside, "in"), filepath.Join(dir, "in")) }, []string{"create in"}},
		{func() { os.WriteFile(filepath.Join(outside, "e/sub/f"), []byte("2"), 0o644) }, nil}, // moved-out tree is unwatched
	}
	for i, s := range steps {
		mark := len(r.pairs())
		s.do()
		got := settle(t, &r, mark+len(s.want))[mark:]
		if !slices.Equal(got, s.want) {
			t.Fatalf("step %d: got %v, want %v", i, got, s.want)
		}
	}
}

func TestNativeCoalescingOnInotify(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name     string
		coalesce time.Duration
		gap      time.Duration
		wantMin  int
		wantMax  int
	}{
		// The window never closes by itself: Sync delivers what it holds,
		// so the outcome does not depend on how fast the machine is.
		{"coalesced", time.Hour, 4 * time.Millisecond, 1, 1},
		{"off", -1, 25 * time.Millisecond, 2, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, h := create(t, local.Options{})
			var r recorder
			w := watch(t, h, sandbox.WatchOptions{Coalesce: tc.coalesce}, &r)
			defer w.Stop()
			settle := settle
			if tc.coalesce > 0 {
				settle = func(t *testing.T, r *recorder, _ int) []string {
					if err := w.Sync(context.Background()); err != nil {
						t.Fatal(err)
					}
					return r.pairs()
				}
			}
			f := filepath.Join(h.HostDir(), "saved.txt")
			// One save of a new file: create + write (+ chmod) raw events.
			os.WriteFile(f, []byte("hello"), 0o644)
			got := settle(t, &r, 1)
			if len(got) < tc.wantMin || len(got) > tc.wantMax || got[0] != "create saved.txt" {
				t.Fatalf("save: %v", got)
			}
			// A burst of writes to one file within the window. Without
			// coalescing the writes are
			// spaced so the kernel cannot merge the queued events.
			mark := len(got)
			fh, _ := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
			for range 5 {
				fh.WriteString("x")
				time.Sleep(tc.gap)
			}
			fh.Close()
			got = settle(t, &r, mark+1)[mark:]
			if tc.coalesce >= 0 && !slices.Equal(got, []string{"change saved.txt"}) {
				t.Fatalf("burst: %v", got)
			}
			if tc.coalesce < 0 && len(got) < 2 {
				t.Fatalf("uncoalesced burst: %v", got)
			}
			w.Stop()
		})
	}
}

// Item 30 against a real handle: a path-only hook runs no process and
// reads no file.
type countingHandle struct {
	sandbox.Handle
	execs atomic.Int32
}

func (c *countingHandle) Exec(ctx context.Context, cmd string, o sandbox.ExecOptions) (sandbox.ExecResult, error) {
	c.execs.Add(1)
	return c.Handle.Exec(ctx, cmd, o)
}

func TestItem30PathOnlyHookOnRealWatcher(t *testing.T) {
	defer goleak.VerifyNone(t)
	_, lh := create(t, local.Options{})
	exec.Command("git", "-C", lh.HostDir(), "init", "-q").Run()
	h := &countingHandle{Handle: lh}
	base := sandbox.Baseline(context.Background(), h, "/workspace", nil) // one exec, before the watcher
	var seen atomic.Int32
	d := sandbox.NewDispatcher(context.Background(), sandbox.DispatcherOptions{Hooks: sandbox.Hooks{
		OnFile: func(_ context.Context, e chat.FileEvent) error {
			if e.Path != "" && e.Type != "" {
				seen.Add(1)
			}
			return nil
		},
	}})
	w, err := sandbox.WatchWorkspace(context.Background(), h, sandbox.WatchOptions{OnEvent: func(ev sandbox.WatchEvent) {
		d.Dispatch(sandbox.NewFileContent(h, "/workspace", base, ev, nil))
	}})
	if err != nil {
		t.Fatal(err)
	}
	execsBefore := h.execs.Load()
	os.WriteFile(filepath.Join(lh.HostDir(), "a.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(lh.HostDir(), "b.txt"), []byte("x"), 0o644)
	deadline := time.Now().Add(3 * time.Second)
	for seen.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	w.Stop()
	d.Close()
	if seen.Load() != 2 || h.execs.Load() != execsBefore {
		t.Fatalf("seen %d, execs during hooks %d", seen.Load(), h.execs.Load()-execsBefore)
	}
}

func TestNativeContextCancelReleasesInotify(t *testing.T) {
	defer goleak.VerifyNone(t) // retries until the fsnotify goroutines are gone
	_, h := create(t, local.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var r recorder
	if _, err := sandbox.WatchWorkspace(ctx, h, sandbox.WatchOptions{OnEvent: r.add}); err != nil {
		t.Fatal(err)
	}
	cancel() // no Stop: the context alone must release the watch
}

// TestBubblewrapHoldsAsRoot runs as whatever user the tests run as (root in
// CI and in containers): a bubblewrapped command has no capability, cannot
// make a read-only path writable, cannot read /etc/shadow, the home
// directory or a data directory outside its workspace, and inherits no host
// secret from the environment.
func TestBubblewrapHoldsAsRoot(t *testing.T) {
	requireBwrap(t)
	const secret = "sk-goai-test-secret-value-4242"
	t.Setenv("GOAI_SECRET", secret)
	t.Setenv("OPENAI_API_KEY", secret)
	dataDir := t.TempDir() // stands for the goai data directory (.goai)
	if err := os.WriteFile(filepath.Join(dataDir, "goai.db"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, h := create(t, local.Options{Isolation: local.IsolationBubblewrap})
	run := func(cmd string) sandbox.ExecResult {
		t.Helper()
		res, err := h.Exec(ctx, cmd, sandbox.ExecOptions{Env: map[string]string{"PASSED": "yes"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	if res := run("grep CapEff /proc/self/status"); !strings.Contains(res.Stdout, "0000000000000000") {
		t.Fatalf("capabilities kept: %q", res.Stdout)
	}
	if res := run("grep CapBnd /proc/self/status"); !strings.Contains(res.Stdout, "0000000000000000") {
		t.Fatalf("bounding set kept: %q", res.Stdout)
	}
	if os.Getuid() == 0 {
		if res := run("id -u"); strings.TrimSpace(res.Stdout) == "0" {
			// Allowed only where the kernel refuses user namespaces.
			if probe := exec.Command("bwrap", "--unshare-user", "--ro-bind", "/", "/", "true"); probe.Run() == nil {
				t.Fatalf("runs as uid 0 although user namespaces are available")
			}
		}
	}

	probe := fmt.Sprintf("/usr/goai-remount-probe-%d", time.Now().UnixNano())
	defer os.Remove(probe)
	res := run("mount --bind /usr /usr && mount -o remount,bind,rw /usr && touch " + probe + " && echo REMOUNTED")
	if strings.Contains(res.Stdout, "REMOUNTED") || res.ExitCode == 0 {
		t.Fatalf("remounted /usr writable: %+v", res)
	}
	if res := run("mount -t tmpfs none /usr/local 2>&1; echo rc=$?"); strings.Contains(res.Stdout, "rc=0") {
		t.Fatalf("mounted over /usr/local: %q", res.Stdout)
	}
	if _, err := os.Stat(probe); err == nil {
		t.Fatal("wrote to the host's /usr")
	}

	if res := run("cat /etc/shadow"); res.ExitCode == 0 || res.Stdout != "" {
		t.Fatalf("read /etc/shadow: %+v", res)
	}
	if home, err := os.UserHomeDir(); err == nil && home != "/" {
		if res := run("ls -A " + sandbox.Quote(home)); res.ExitCode == 0 && strings.TrimSpace(res.Stdout) != "" {
			t.Fatalf("sees the home directory %s: %q", home, res.Stdout)
		}
	}
	if res := run("cat " + sandbox.Quote(filepath.Join(dataDir, "goai.db"))); res.ExitCode == 0 || strings.Contains(res.Stdout, secret) {
		t.Fatalf("read the data directory: %+v", res)
	}
	for _, dir := range []string{"/root", "/var", "/run", "/home"} {
		if res := run("ls -A " + dir + " 2>/dev/null | head -1"); strings.TrimSpace(res.Stdout) != "" {
			t.Fatalf("host %s is visible: %q", dir, res.Stdout)
		}
	}

	res = run("env")
	if strings.Contains(res.Stdout, secret) || strings.Contains(res.Stdout, "GOAI_SECRET") || strings.Contains(res.Stdout, "OPENAI_API_KEY") {
		t.Fatalf("host secret leaked into the environment:\n%s", res.Stdout)
	}
	if !strings.Contains(res.Stdout, "PASSED=yes") || !strings.Contains(res.Stdout, "PATH=") {
		t.Fatalf("environment lacks PATH or the passed variable:\n%s", res.Stdout)
	}
	if res := run("cat /proc/1/environ | tr '\\000' '\\n'"); strings.Contains(res.Stdout, secret) {
		t.Fatal("host secret visible through /proc/1/environ")
	}
	// The workspace is still usable: git runs and writes there.
	if res := run("git init -q . && git config user.email a@b && git config user.name n && echo x > f && git add f && git commit -qm m && git rev-parse HEAD"); res.ExitCode != 0 {
		t.Fatalf("git in the workspace: %+v", res)
	}
}

// Local snapshots leave out .git, node_modules and .env* at any depth,
// redact the handle environment's secret values, and store each content
// once.
func TestSnapshotExclusionsAndRedaction(t *testing.T) {
	ctx := context.Background()
	p, h := create(t, local.Options{})
	const secret = "sk-live-0123456789"
	if err := h.SetEnv(map[string]string{"OPENAI_API_KEY": secret, "DEBUG": "1"}); err != nil {
		t.Fatal(err)
	}
	dir := h.HostDir()
	for name, content := range map[string]string{
		"keep.txt":              "token=" + secret + "\nDEBUG=1\n",
		"same-a.txt":            "same",
		"sub/same-b.txt":        "same",
		".git/config":           "[core]",
		"node_modules/x/i.js":   "x",
		".env":                  "K=" + secret,
		".env.local":            "K=2",
		"sub/.env.production":   "K=3",
		"sub/node_modules/y.js": "y",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := h.Snapshot(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	rh, err := p.RestoreSnapshot(ctx, sandbox.RestoreOptions{SnapshotID: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer rh.Destroy(ctx)
	rdir := rh.(*local.Handle).HostDir()
	var got []string
	filepath.WalkDir(rdir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(rdir, path)
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(got)
	if want := []string{"keep.txt", "same-a.txt", "sub/same-b.txt"}; !slices.Equal(got, want) {
		t.Fatalf("restored files %v, want %v", got, want)
	}
	b, _ := os.ReadFile(filepath.Join(rdir, "keep.txt"))
	if want := "token=" + strings.Repeat("\x00", len(secret)) + "\nDEBUG=1\n"; string(b) != want {
		t.Fatalf("keep.txt restored as %q, want %q", b, want)
	}
	blobs, err := os.ReadDir(filepath.Join(p.SnapshotDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blobs) != 2 { // keep.txt and "same", once
		t.Fatalf("%d blobs stored, want 2", len(blobs))
	}
	for _, bl := range blobs {
		data, _ := os.ReadFile(filepath.Join(p.SnapshotDir(), "blobs", bl.Name()))
		if strings.Contains(string(data), secret) {
			t.Fatal("a secret reached the snapshot store")
		}
	}
}
