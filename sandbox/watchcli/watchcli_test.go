package watchcli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/sandbox/watchcli"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuf) events(t *testing.T) []watchcli.Event {
	t.Helper()
	var out []watchcli.Event
	for _, line := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if line == "" {
			continue
		}
		var e watchcli.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// start runs Main in the background; stop cancels it and returns its code.
func start(t *testing.T, args ...string) (out, errOut *syncBuf, stop func() int) {
	t.Helper()
	out, errOut = &syncBuf{}, &syncBuf{}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- watchcli.Main(ctx, args, out, errOut) }()
	// Main says when its seed is done; changes before that are not events.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(errOut.String(), "goai watch: watching ") {
		select {
		case c := <-code:
			t.Fatalf("Main exited %d before watching: %s", c, errOut)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("Main never started watching: %s", errOut)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return out, errOut, func() int {
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(time.Minute):
			t.Fatal("Main did not stop")
			return -1
		}
	}
}

func waitLines(out *syncBuf, n int) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && strings.Count(out.String(), "\n") < n {
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatchNativeJSONLines(t *testing.T) {
	dir := t.TempDir()
	out, errOut, stop := start(t, dir)
	before := time.Now().UnixMilli()
	os.MkdirAll(filepath.Join(dir, "src", "node_modules"), 0o755)
	os.WriteFile(filepath.Join(dir, "src", "a.go"), []byte("package a\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "src", "node_modules", "x.js"), []byte("x"), 0o644)
	waitLines(out, 1)
	time.Sleep(100 * time.Millisecond)
	os.Remove(filepath.Join(dir, "src", "a.go"))
	waitLines(out, 2)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	evs := out.events(t)
	if len(evs) != 2 || evs[0].Type != "create" || evs[0].Path != "src/a.go" || evs[1].Type != "delete" || evs[0].Diff != nil {
		t.Fatalf("events %s", out)
	}
	if evs[0].Timestamp < before || evs[0].Timestamp > time.Now().UnixMilli() {
		t.Fatalf("timestamp %d", evs[0].Timestamp)
	}
	if strings.Contains(out.String(), `"diff"`) {
		t.Fatal("diff without --diff")
	}
}

func TestWatchPollWithDiff(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@t", "-c", "user.name=t"}, args...)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, b)
		}
	}
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, "t.txt"), []byte("one\n"), 0o644)
	git("add", "t.txt")
	git("commit", "-qm", "init")
	out, errOut, stop := start(t, "--poll", "--interval", "50ms", "--diff", dir)
	os.WriteFile(filepath.Join(dir, "t.txt"), []byte("two\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "n.txt"), []byte("new"), 0o644)
	waitLines(out, 2)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got := map[string]watchcli.Event{}
	for _, e := range out.events(t) {
		got[e.Path] = e
	}
	if e := got["t.txt"]; e.Type != "change" || e.Diff == nil || !strings.Contains(*e.Diff, "-one\n+two\n") {
		t.Fatalf("t.txt %+v", e)
	}
	if e := got["n.txt"]; e.Type != "create" || e.Diff == nil || !strings.Contains(*e.Diff, "+new\n\\ No newline at end of file") {
		t.Fatalf("n.txt %+v", e)
	}
}

func TestWatchUsage(t *testing.T) {
	ctx := context.Background()
	var out, errOut bytes.Buffer
	for _, args := range [][]string{{}, {"a", "b"}, {"--bogus", "x"}, {"--interval", "0s", "x"}} {
		errOut.Reset()
		if code := watchcli.Main(ctx, args, &out, &errOut); code != 2 {
			t.Fatalf("%v: exit %d", args, code)
		}
	}
	if code := watchcli.Main(ctx, []string{filepath.Join(t.TempDir(), "missing")}, &out, &errOut); code != 1 {
		t.Fatalf("missing dir: exit %d", code)
	}
	// Flags may follow DIR.
	dir := t.TempDir()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if code := watchcli.Main(cctx, []string{dir, "--coalesce", "0"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}
