package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
	"github.com/goai-sdk/goai/sandbox/sandboxtest"
)

// acting is a model that acts in the run's sandbox before each answer:
// act gets the call's context and the run's sandbox handle (nil without
// WithSandbox); a nil act does nothing.
func acting(act func(ctx context.Context, h sandbox.Handle), turns ...[]agui.Event) *chattest.ActingAdapter {
	a := &chattest.ActingAdapter{Adapter: chattest.NewAdapter(turns...)}
	if act != nil {
		a.Act = func(ctx context.Context, req *chat.Request) {
			h, _ := sandbox.HandleCapability.GetOptional(req.Capabilities)
			act(ctx, h)
		}
	}
	return a
}

// harness is an adapter that needs a sandbox, as harness adapters do.
type harness struct{ *chattest.ActingAdapter }

func (harness) Requires() []chat.CapabilityKey { return []chat.CapabilityKey{sandbox.HandleCapability} }

// env is one test's sandbox setting: a local-process provider on a temp
// directory and a recorded debug logger.
type env struct {
	t        *testing.T
	provider *local.Provider
	log      *slog.Logger
	rec      *sandboxtest.LogRecorder
}

func newEnv(t *testing.T) *env {
	t.Helper()
	lg, rec := sandboxtest.NewLogger()
	return &env{t: t, provider: local.New(local.Options{BaseDir: t.TempDir()}), log: lg, rec: rec}
}

// define defines a sandbox on the env's provider; id defaults to repo-agent.
func (e *env) define(def sandbox.Definition) *sandbox.Sandbox {
	e.t.Helper()
	if def.ID == "" {
		def.ID = "repo-agent"
	}
	if def.Provider == nil {
		def.Provider = e.provider
	}
	s, err := sandbox.Define(def)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// opts returns chat options for one run with every debug category on.
func (e *env) opts(a chat.Adapter, mws ...*chat.Middleware) chat.Options {
	return chat.Options{
		Adapter: a, Messages: chattest.User("go"), Middleware: mws,
		ThreadID: "thread-1", RunID: "run-1",
		Debug: chat.DebugAll(e.log),
	}
}

// gitRepo is a workspace at root holding a git repository whose baseline
// commit tracks README.md ("old\n").
func gitRepo(root string) *sandbox.Workspace {
	return &sandbox.Workspace{Root: root, Setup: sandbox.Serial(
		"printf 'old\\n' > README.md && git init -q && git add -A && " +
			"git -c user.email=t@example.com -c user.name=t -c commit.gpgsign=false commit -qm init")}
}

func mustRun(t *testing.T, opts chat.Options) []agui.Event {
	t.Helper()
	evs, err := chattest.Collect(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// custom is one CUSTOM event of a stream.
type custom struct {
	Index int // position in the stream
	Name  string
	Value map[string]any
}

// customs returns the sandbox.file and sandbox.file.diff events in order.
func customs(t *testing.T, evs []agui.Event) []custom {
	t.Helper()
	var out []custom
	for i, ev := range evs {
		if ev.Type != agui.Custom || !strings.HasPrefix(ev.Name, "sandbox.file") {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal(ev.Value, &v); err != nil {
			t.Fatalf("%s value %s: %v", ev.Name, ev.Value, err)
		}
		out = append(out, custom{Index: i, Name: ev.Name, Value: v})
	}
	return out
}

// fileEvents renders the sandbox.file events as "type path".
func fileEvents(cs []custom) []string {
	var out []string
	for _, c := range cs {
		if c.Name == "sandbox.file" {
			out = append(out, c.Value["type"].(string)+" "+c.Value["path"].(string))
		}
	}
	return out
}

// lines is a goroutine-safe log of strings.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) add(s string) {
	l.mu.Lock()
	l.l = append(l.l, s)
	l.mu.Unlock()
}

func (l *lines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.l)
}

func writeFile(t *testing.T, ctx context.Context, h sandbox.Handle, name, content string) {
	t.Helper()
	if h == nil {
		t.Error("no sandbox handle in the adapter request")
		return
	}
	if err := h.FS().MkdirAll(ctx, filepath.Dir(name)); err != nil {
		t.Error(err)
	}
	if err := h.FS().WriteFile(ctx, name, []byte(content), 0o644); err != nil {
		t.Error(err)
	}
}

func hostDir(h sandbox.Handle) string {
	if f, ok := h.(*faultHandle); ok {
		h = f.Handle
	}
	return h.(*local.Handle).HostDir()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ---- fault injection around the local provider ----

// faultProvider wraps a provider: its handles can fail `git rev-parse`
// (the baseline) or return an error from the native watch's Stop.
type faultProvider struct {
	sandbox.Provider
	baselineErr error
	stopErr     error
}

func (p *faultProvider) Create(ctx context.Context, o sandbox.CreateOptions) (sandbox.Handle, error) {
	h, err := p.Provider.Create(ctx, o)
	if err != nil {
		return nil, err
	}
	return &faultHandle{Handle: h, p: p}, nil
}

func (p *faultProvider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	h, err := p.Provider.Resume(ctx, id)
	if err != nil || h == nil {
		return nil, err
	}
	return &faultHandle{Handle: h, p: p}, nil
}

type faultHandle struct {
	sandbox.Handle
	p *faultProvider
}

func (h *faultHandle) Exec(ctx context.Context, cmd string, o sandbox.ExecOptions) (sandbox.ExecResult, error) {
	if h.p.baselineErr != nil && strings.HasPrefix(cmd, "git rev-parse") {
		return sandbox.ExecResult{}, h.p.baselineErr
	}
	return h.Handle.Exec(ctx, cmd, o)
}

func (h *faultHandle) FS() sandbox.FS { return faultFS{h.Handle.FS(), h.p} }

type faultFS struct {
	sandbox.FS
	p *faultProvider
}

func (f faultFS) Lstat(ctx context.Context, name string) (*sandbox.FileInfo, error) {
	return f.FS.(sandbox.Lstater).Lstat(ctx, name)
}

func (f faultFS) Watch(ctx context.Context, root string, o sandbox.NativeWatchOptions, fn func(sandbox.RawEvent)) (sandbox.Subscription, error) {
	sub, err := f.FS.(sandbox.NativeWatcher).Watch(ctx, root, o, fn)
	if err != nil {
		return nil, err
	}
	return faultSub{sub, f.p.stopErr}, nil
}

type faultSub struct {
	sandbox.Subscription
	err error
}

func (s faultSub) Stop() error {
	if err := s.Subscription.Stop(); err != nil {
		return err
	}
	return s.err
}

// failingRuns is a run store whose Update fails.
type failingRuns struct{ durable.RunStore }

func (failingRuns) Update(context.Context, string, durable.RunPatch) error {
	return errors.New("store down")
}

// The native watcher does not debounce (as upstream): under load a single
// write can surface as its create (or change) plus a later change with the
// same content. Tests therefore compare creates only, or compact repeats.

// creates keeps the "create ..." entries of "type path" strings.
func creates(evs []string) []string {
	var out []string
	for _, e := range evs {
		if strings.HasPrefix(e, "create ") {
			out = append(out, e)
		}
	}
	return out
}

// compact drops entries equal to the one before.
func compact(l []string) []string { return slices.Compact(slices.Clone(l)) }

// checkDiffs checks that every sandbox.file has exactly one
// sandbox.file.diff for its path after it, and returns the diff count.
func checkDiffs(t *testing.T, cs []custom) int {
	t.Helper()
	pending := map[string]int{}
	diffs := 0
	for _, c := range cs {
		p := c.Value["path"].(string)
		if c.Name == "sandbox.file" {
			pending[p]++
			continue
		}
		diffs++
		if pending[p] == 0 {
			t.Errorf("sandbox.file.diff for %s at %d with no sandbox.file before it", p, c.Index)
			continue
		}
		pending[p]--
	}
	for p, n := range pending {
		if n != 0 {
			t.Errorf("%d sandbox.file events for %s without a diff", n, p)
		}
	}
	return diffs
}
