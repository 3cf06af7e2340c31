package docker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/docker"
	"github.com/goai-sdk/goai/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// image returns the test image, skipping the test when no engine is set up.
func image(t testing.TB) string {
	t.Helper()
	if os.Getenv("GOAI_TEST_DOCKER") == "" {
		t.Skip("GOAI_TEST_DOCKER is not set: Docker tests skipped; run `eval \"$(scripts/setup-docker.sh)\"` to start dockerd and build the test image")
	}
	if img := os.Getenv("GOAI_TEST_DOCKER_IMAGE"); img != "" {
		return img
	}
	return "goai-sandbox-test:1"
}

func newProvider(t testing.TB, opts docker.Options) *docker.Provider {
	t.Helper()
	if opts.Image == "" {
		opts.Image = image(t)
	}
	if opts.Memory == 0 {
		opts.Memory = 256 << 20
		opts.CPUs = 1
		opts.PidsLimit = 200
	}
	p, err := docker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func create(t testing.TB, p *docker.Provider) *docker.Handle {
	t.Helper()
	h, err := p.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Destroy(context.Background()); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	return h.(*docker.Handle)
}

func mustExec(t testing.TB, h sandbox.Handle, cmd string) string {
	t.Helper()
	res, err := h.Exec(context.Background(), cmd, sandbox.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec %q: %+v %v", cmd, res, err)
	}
	return res.Stdout
}

// inspect returns the container's state, or nil when it is gone.
func inspect(t *testing.T, id string) *client.ContainerInspectResult {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	res, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	cli.Close()
	return &res
}

func TestNewValidates(t *testing.T) {
	if _, err := docker.New(docker.Options{}); err == nil {
		t.Error("no image accepted")
	}
	if _, err := docker.New(docker.Options{Image: "x", Workdir: "rel"}); err == nil {
		t.Error("relative workdir accepted")
	}
}

func TestConformance(t *testing.T) {
	img := image(t)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Provider {
		return newProvider(t, docker.Options{Image: img})
	})
}

// The container gets no network, the configured limits and the label;
// secrets given to Create reach commands but not the container config.
func TestContainerConfig(t *testing.T) {
	p := newProvider(t, docker.Options{})
	h, err := p.Create(context.Background(), sandbox.CreateOptions{Env: map[string]string{"GOAI_SECRET": "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Destroy(context.Background())
	if got := mustExec(t, h, `printf %s "$GOAI_SECRET"`); got != "s3cret" {
		t.Errorf("secret in exec env: %q", got)
	}
	// Only the loopback interface exists.
	if got := mustExec(t, h, "ls /sys/class/net | tr '\\n' ' '"); strings.TrimSpace(got) != "lo" {
		t.Errorf("interfaces %q, want only lo", got)
	}
	res := inspect(t, h.ID())
	if res == nil {
		t.Fatal("container not found")
	}
	c := res.Container
	if c.HostConfig.NetworkMode != "none" || c.HostConfig.Memory != 256<<20 || c.HostConfig.NanoCPUs != 1e9 ||
		c.HostConfig.PidsLimit == nil || *c.HostConfig.PidsLimit != 200 {
		t.Errorf("host config: network %q memory %d cpus %d pids %v", c.HostConfig.NetworkMode, c.HostConfig.Memory, c.HostConfig.NanoCPUs, c.HostConfig.PidsLimit)
	}
	if c.HostConfig.Init == nil || !*c.HostConfig.Init {
		t.Error("no init process")
	}
	if !slices.Equal(c.HostConfig.CapDrop, []string{"ALL"}) || len(c.HostConfig.CapAdd) != 0 || !slices.Contains(c.HostConfig.SecurityOpt, "no-new-privileges") {
		t.Errorf("capabilities: drop %v add %v security %v", c.HostConfig.CapDrop, c.HostConfig.CapAdd, c.HostConfig.SecurityOpt)
	}
	// Inside, the command holds no capability: it cannot mount, and
	// setuid binaries give nothing (no-new-privileges).
	if got := mustExec(t, h, "grep -E 'CapEff|CapBnd|NoNewPrivs' /proc/self/status | tr -s '\t ' ' '"); !strings.Contains(got, "CapEff: 0000000000000000") ||
		!strings.Contains(got, "CapBnd: 0000000000000000") || !strings.Contains(got, "NoNewPrivs: 1") {
		t.Errorf("process status: %q", got)
	}
	if res, err := h.Exec(context.Background(), "mount -t tmpfs none /mnt && echo MOUNTED", sandbox.ExecOptions{}); err != nil || strings.Contains(res.Stdout, "MOUNTED") {
		t.Errorf("mount inside the container: %+v %v", res, err)
	}
	if c.Config.Labels[docker.Label] != "1" {
		t.Errorf("labels %v", c.Config.Labels)
	}
	if strings.Contains(string(res.Raw), "s3cret") {
		t.Error("the secret is in the container config")
	}
}

func TestResumeAndDestroy(t *testing.T) {
	p := newProvider(t, docker.Options{})
	ctx := context.Background()
	h := create(t, p)
	if err := h.FS().WriteFile(ctx, "/workspace/keep.txt", []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	rh, err := p.Resume(ctx, h.ID())
	if err != nil || rh == nil {
		t.Fatalf("resume: %v %v", rh, err)
	}
	if b, err := rh.FS().ReadFile(ctx, "keep.txt"); err != nil || string(b) != "kept" {
		t.Errorf("resumed read %q %v", b, err)
	}
	if fi, err := rh.FS().(sandbox.Lstater).Lstat(ctx, "keep.txt"); err != nil || fi.Mode.Perm() != 0o600 {
		t.Errorf("perm: %+v %v", fi, err)
	}
	if err := p.Destroy(ctx, h.ID()); err != nil {
		t.Fatal(err)
	}
	if inspect(t, h.ID()) != nil {
		t.Error("container survived Destroy")
	}
	if rh, err := p.Resume(ctx, h.ID()); rh != nil || err != nil {
		t.Errorf("resume after destroy: %v %v", rh, err)
	}
	if err := p.Destroy(ctx, h.ID()); err != nil {
		t.Errorf("second destroy: %v", err)
	}
	if _, err := h.Exec(ctx, "true", sandbox.ExecOptions{}); err == nil {
		t.Error("exec on a removed container succeeded")
	}
}

// A missing file is fs.ErrNotExist; binary content and large payloads
// round-trip through the exec streams.
func TestFSBinaryAndMissing(t *testing.T) {
	h := create(t, newProvider(t, docker.Options{}))
	ctx := context.Background()
	if _, err := h.FS().ReadFile(ctx, "nope"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing read: %v", err)
	}
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := h.FS().WriteFile(ctx, "/workspace/bin/blob", data, 0); err != nil {
		t.Fatal(err)
	}
	got, err := h.FS().ReadFile(ctx, "/workspace/bin/blob")
	if err != nil || !slices.Equal(got, data) {
		t.Fatalf("round trip: %d bytes, %v", len(got), err)
	}
	if err := h.FS().WriteFile(ctx, "/workspace/empty", nil, 0); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, h, "wc -c < empty"); strings.TrimSpace(got) != "0" {
		t.Errorf("empty file size %q", got)
	}
	if err := h.FS().Rename(ctx, "/workspace/nope", "/workspace/x"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rename missing: %v", err)
	}
}

// Kill with an explicit signal, and cancelling Spawn's context, end every
// process of the command; Stdin streams into the command.
func TestSpawnStdinKillCancel(t *testing.T) {
	h := create(t, newProvider(t, docker.Options{}))
	ctx := context.Background()
	p, err := h.Spawn(ctx, "while read l; do echo \"got $l\"; done; echo end", sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(p.Stdin(), "a")
	fmt.Fprintln(p.Stdin(), "b")
	p.Stdin().Close()
	out, _ := io.ReadAll(p.Stdout())
	if string(out) != "got a\ngot b\nend\n" {
		t.Errorf("stdout %q", out)
	}
	if code, err := p.Wait(ctx); code != 0 || err != nil {
		t.Errorf("wait %d %v", code, err)
	}

	// Every wait below is on an event (a line of output, the end of the
	// command, the processes gone), bounded only by a generous deadline
	// that a loaded machine never reaches.
	wait := func(p sandbox.Process, what string) int {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		code, err := p.Wait(wctx)
		if err != nil {
			t.Fatalf("%s: wait: %v", what, err)
		}
		return code
	}
	started := func(p sandbox.Process) {
		t.Helper()
		line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
		if err != nil || line != "started\n" {
			t.Fatalf("start line %q: %v", line, err)
		}
	}

	p, err = h.Spawn(ctx, "trap '' TERM; echo started; sleep 30", sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	started(p)
	if err := p.Kill(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := wait(p, "after SIGKILL"); code == 0 {
		t.Errorf("after SIGKILL: exit %d", code)
	}

	// A Kill right after Spawn, possibly before the daemon has started the
	// process, still ends it.
	for range 3 {
		p, err = h.Spawn(ctx, "sleep 30", sandbox.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Kill(nil); err != nil {
			t.Fatal(err)
		}
		wait(p, "immediate kill")
	}

	sctx, scancel := context.WithCancel(ctx)
	p, err = h.Spawn(sctx, "sleep 30 & echo started; sleep 30; wait", sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	started(p)
	scancel()
	wait(p, "cancelled spawn")
	// No sleep is left, not even a zombie (docker-init reaps orphans).
	deadline := time.Now().Add(time.Minute)
	for {
		got := strings.TrimSpace(mustExec(t, h, "ps -o stat,comm | grep -c sleep || true"))
		if got == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s sleep processes left: %s", got, mustExec(t, h, "ps -o pid,ppid,stat,comm"))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// HostDir mounts a host directory as the workspace.
func TestHostDirMount(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/host.txt", []byte("from host"), 0o644)
	h := create(t, newProvider(t, docker.Options{HostDir: dir}))
	if got := mustExec(t, h, "cat host.txt && echo inside > made.txt"); got != "from host" {
		t.Errorf("cat %q", got)
	}
	if b, err := os.ReadFile(dir + "/made.txt"); err != nil || string(b) != "inside\n" {
		t.Errorf("host sees %q %v", b, err)
	}
}

// A tool that writes files inside the container during a WithSandbox run
// puts sandbox.file events and git diffs against the baseline on the
// stream; the poll watcher runs find in the container.
func TestWithSandboxToolWritesStreamFileEventsAndDiffs(t *testing.T) {
	p := newProvider(t, docker.Options{})
	def := sandbox.Definition{
		ID:         "docker-agent",
		Provider:   p,
		FileEvents: sandbox.FileEventsWithDiff,
		Lifecycle:  sandbox.Lifecycle{DestroyOnComplete: true},
		Workspace: &sandbox.Workspace{Setup: sandbox.Serial(
			"printf 'old\\n' > README.md && git init -q && git add -A && " +
				"git -c user.email=t@example.com -c user.name=t commit -qm init")},
	}
	s, err := sandbox.Define(def)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var containerID string
	type in struct{}
	tool := chat.NewTool("edit", "edits files", func(ctx context.Context, _ in) (string, error) {
		call, _ := chat.ToolCallFrom(ctx)
		h, err := sandbox.HandleCapability.Get(call.Run)
		if err != nil {
			return "", err
		}
		mu.Lock()
		containerID = h.ID()
		mu.Unlock()
		if err := h.FS().WriteFile(ctx, "/workspace/README.md", []byte("new\n"), 0); err != nil {
			return "", err
		}
		res, err := h.Exec(ctx, "mkdir -p src && printf 'package main\\n' > src/main.go", sandbox.ExecOptions{})
		if err != nil || res.ExitCode != 0 {
			return "", fmt.Errorf("exec: %+v %w", res, err)
		}
		time.Sleep(1500 * time.Millisecond) // two poll intervals
		return "ok", nil
	})
	a := chattest.NewAdapter(chattest.ToolTurn("call-1", "edit", `{}`), chattest.TextTurn("m", "done", agui.FinishStop))
	evs, err := chattest.Collect(t, chat.Options{
		Adapter: a, Messages: chattest.User("go"),
		Middleware: []*chat.Middleware{sandbox.WithSandbox(s, sandbox.Options{})},
		Tools:      []*chat.Tool{tool},
		ThreadID:   "thread-docker", RunID: "run-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	diffs := map[string]string{}
	for _, ev := range evs {
		if ev.Type != agui.Custom {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal(ev.Value, &v); err != nil {
			t.Fatalf("%s value %s: %v", ev.Name, ev.Value, err)
		}
		switch ev.Name {
		case "sandbox.file":
			files[v["path"].(string)] = v["type"].(string)
		case "sandbox.file.diff":
			diffs[v["path"].(string)] = v["diff"].(string)
		}
	}
	want := map[string]string{"/workspace/README.md": "change", "/workspace/src/main.go": "create"}
	for p, typ := range want {
		if files[p] != typ {
			t.Errorf("sandbox.file %s = %q, want %q (all %v)", p, files[p], typ, files)
		}
	}
	if d := diffs["/workspace/README.md"]; !strings.Contains(d, "diff --git a/README.md b/README.md") || !strings.Contains(d, "-old\n+new\n") {
		t.Errorf("README diff %q", d)
	}
	if d := diffs["/workspace/src/main.go"]; !strings.Contains(d, "--- /dev/null") || !strings.Contains(d, "+package main") {
		t.Errorf("new file diff %q", d)
	}
	mu.Lock()
	id := containerID
	mu.Unlock()
	if id == "" {
		t.Fatal("the tool never ran")
	}
	if inspect(t, id) != nil {
		t.Error("DestroyOnComplete left the container")
	}
}

// A custom Workdir is where the virtual /workspace lives; an absolute
// path outside it is re-rooted under it, as on local-process.
func TestWorkdir(t *testing.T) {
	h := create(t, newProvider(t, docker.Options{Workdir: "/srv/ws"}))
	ctx := context.Background()
	if got := mustExec(t, h, "pwd"); got != "/srv/ws\n" {
		t.Errorf("pwd %q", got)
	}
	if err := h.FS().WriteFile(ctx, "/workspace/a.txt", []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	if err := h.FS().WriteFile(ctx, "/tmp/b.txt", []byte("b"), 0); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, h, "cat /srv/ws/a.txt /srv/ws/tmp/b.txt; test -e /tmp/b.txt || echo ' not in /tmp'"); got != "ab not in /tmp\n" {
		t.Errorf("got %q", got)
	}
	res, err := h.Exec(ctx, "pwd", sandbox.ExecOptions{Dir: "/workspace/tmp"})
	if err != nil || res.Stdout != "/srv/ws/tmp\n" {
		t.Errorf("dir: %+v %v", res, err)
	}
}

// Sweep removes this owner's containers whose sandbox is unknown and
// leaves known ones and other owners' alone.
func TestSweepRemovesUnknownContainers(t *testing.T) {
	ctx := context.Background()
	owner := "sweep-test-" + fmt.Sprint(time.Now().UnixNano())
	p := newProvider(t, docker.Options{Owner: owner})
	other := newProvider(t, docker.Options{Owner: owner + "-other"})
	mk := func(p *docker.Provider, key string) sandbox.Handle {
		h, err := p.Create(ctx, sandbox.CreateOptions{ID: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Destroy(context.Background()) })
		return h
	}
	known, unknown, foreign := mk(p, "key-known"), mk(p, "key-lost"), mk(other, "key-lost")
	var asked []string
	removed, err := p.Sweep(ctx, docker.SweepOptions{MinAge: -1, Known: func(_ context.Context, key, id string) (bool, error) {
		asked = append(asked, key)
		return key == "key-known", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{unknown.ID()}) {
		t.Fatalf("removed %v, want only %s (asked about %v)", removed, unknown.ID(), asked)
	}
	if inspect(t, unknown.ID()) != nil {
		t.Fatal("the unknown container is still there")
	}
	if inspect(t, known.ID()) == nil || inspect(t, foreign.ID()) == nil {
		t.Fatal("a known or foreign container was removed")
	}
	// Young containers are spared by default.
	removed, err = p.Sweep(ctx, docker.SweepOptions{Known: func(context.Context, string, string) (bool, error) { return false, nil }})
	if err != nil || len(removed) != 0 {
		t.Fatalf("default MinAge swept %v (%v)", removed, err)
	}
}

// With NetworkMode "host" a command reaches a server on the host's
// loopback (a coding agent calling a model there); ExtraHosts land in the
// container's configuration. The default (none) reaches nothing.
func TestNetworkModeHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("reached-the-host")) }))
	defer srv.Close()
	// busybox nc, not wget: the test image's static wget cannot resolve.
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	host, port, _ := strings.Cut(hostPort, ":")
	get := `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 ` + host + " " + port + " 2>&1; echo \" exit=$?\""
	for _, tc := range []struct {
		mode  string
		reach bool
	}{{"", false}, {"host", true}} {
		p := newProvider(t, docker.Options{NetworkMode: tc.mode, ExtraHosts: []string{"host.docker.internal:host-gateway"}})
		h, err := p.Create(context.Background(), sandbox.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := mustExec(t, h, get)
		if reached := strings.Contains(got, "reached-the-host"); reached != tc.reach {
			t.Errorf("network %q: reached the host = %v (%q), want %v", tc.mode, reached, got, tc.reach)
		}
		if res := inspect(t, h.ID()); res == nil || !slices.Equal(res.Container.HostConfig.ExtraHosts, []string{"host.docker.internal:host-gateway"}) {
			t.Errorf("network %q: extra hosts not configured", tc.mode)
		}
		_ = h.Destroy(context.Background())
	}
}
