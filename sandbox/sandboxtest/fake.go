package sandboxtest

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/goai-sdk/goai/sandbox"
)

// FakeHandle is a scriptable in-memory sandbox.Handle for unit tests: an
// in-memory FS, a scripted Exec that records every command, and a native
// watch seam fed by Emit. Its FS implements sandbox.NativeWatcher (used only
// when Caps.NativeWatch is set). It counts every FS call.
type FakeHandle struct {
	IDValue string
	Name    string
	Root    string
	Caps    sandbox.Capabilities

	// ExecFunc answers Exec; nil answers exit 0 with no output.
	ExecFunc func(ctx context.Context, cmd string, opts sandbox.ExecOptions) (sandbox.ExecResult, error)
	// ExistsFunc, ReadFileFunc and ReadDirFunc override the in-memory FS.
	ExistsFunc   func(name string) (bool, error)
	ReadFileFunc func(name string) ([]byte, error)
	ReadDirFunc  func(name string) ([]sandbox.DirEntry, error)
	// WatchErr makes Watch fail.
	WatchErr error

	mu        sync.Mutex
	files     map[string][]byte
	execs     []string
	fsCalls   int
	envSets   []map[string]string
	env       map[string]string
	spawns    int
	destroyed int
	watchFn   func(sandbox.RawEvent)
}

// NewFakeHandle returns a fake with every capability except native watching.
func NewFakeHandle() *FakeHandle {
	return &FakeHandle{
		IDValue: "fake-1", Name: "fake", Root: sandbox.DefaultRoot,
		Caps:  sandbox.Capabilities{FS: true, Exec: true, Env: true},
		files: map[string][]byte{}, env: map[string]string{},
	}
}

func (f *FakeHandle) ID() string                         { return f.IDValue }
func (f *FakeHandle) Provider() string                   { return f.Name }
func (f *FakeHandle) WorkspaceRoot() string              { return f.Root }
func (f *FakeHandle) Capabilities() sandbox.Capabilities { return f.Caps }
func (f *FakeHandle) FS() sandbox.FS                     { return fakeFS{f} }

// Execs returns the commands run so far.
func (f *FakeHandle) Execs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.execs)
}

// FSCalls is the number of FS method calls so far.
func (f *FakeHandle) FSCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fsCalls
}

// EnvSets returns every SetEnv argument.
func (f *FakeHandle) EnvSets() []map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.envSets)
}

// Spawns counts Spawn calls.
func (f *FakeHandle) Spawns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spawns
}

// Destroyed counts Destroy calls.
func (f *FakeHandle) Destroyed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.destroyed
}

// SetFile writes a file without counting an FS call.
func (f *FakeHandle) SetFile(name, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[name] = []byte(content)
}

// RemoveFile deletes a file without counting an FS call.
func (f *FakeHandle) RemoveFile(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.files, name)
}

// Emit delivers a raw native event to the running watch, if any. It
// reports whether a watch was running.
func (f *FakeHandle) Emit(ev sandbox.RawEvent) bool {
	f.mu.Lock()
	fn := f.watchFn
	f.mu.Unlock()
	if fn == nil {
		return false
	}
	fn(ev)
	return true
}

func (f *FakeHandle) Exec(ctx context.Context, cmd string, opts sandbox.ExecOptions) (sandbox.ExecResult, error) {
	f.mu.Lock()
	f.execs = append(f.execs, cmd)
	fn := f.ExecFunc
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return sandbox.ExecResult{}, err
	}
	if fn == nil {
		return sandbox.ExecResult{}, nil
	}
	return fn(ctx, cmd, opts)
}

func (f *FakeHandle) Spawn(context.Context, string, sandbox.ExecOptions) (sandbox.Process, error) {
	f.mu.Lock()
	f.spawns++
	f.mu.Unlock()
	return nil, &sandbox.UnsupportedCapabilityError{Provider: f.Name, Capability: "backgroundProcesses"}
}

func (f *FakeHandle) SetEnv(vars map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := map[string]string{}
	for k, v := range vars {
		cp[k] = v
		f.env[k] = v
	}
	f.envSets = append(f.envSets, cp)
	return nil
}

func (f *FakeHandle) Destroy(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.destroyed++
	return nil
}

type fakeFS struct{ f *FakeHandle }

func (x fakeFS) count() {
	x.f.mu.Lock()
	x.f.fsCalls++
	x.f.mu.Unlock()
}

func (x fakeFS) ReadFile(_ context.Context, name string) ([]byte, error) {
	x.count()
	if x.f.ReadFileFunc != nil {
		return x.f.ReadFileFunc(name)
	}
	x.f.mu.Lock()
	defer x.f.mu.Unlock()
	b, ok := x.f.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(b), nil
}

func (x fakeFS) WriteFile(_ context.Context, name string, data []byte, _ fs.FileMode) error {
	x.count()
	x.f.mu.Lock()
	defer x.f.mu.Unlock()
	x.f.files[name] = slices.Clone(data)
	return nil
}

func (x fakeFS) ReadDir(_ context.Context, name string) ([]sandbox.DirEntry, error) {
	x.count()
	if x.f.ReadDirFunc != nil {
		return x.f.ReadDirFunc(name)
	}
	x.f.mu.Lock()
	defer x.f.mu.Unlock()
	prefix := strings.TrimRight(name, "/") + "/"
	seen := map[string]sandbox.EntryType{}
	for p := range x.f.files {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		first, _, nested := strings.Cut(rest, "/")
		if nested {
			seen[first] = sandbox.EntryDir
		} else if _, ok := seen[first]; !ok {
			seen[first] = sandbox.EntryFile
		}
	}
	var out []sandbox.DirEntry
	for n, t := range seen {
		out = append(out, sandbox.DirEntry{Name: n, Path: prefix + n, Type: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (x fakeFS) MkdirAll(context.Context, string) error { x.count(); return nil }

func (x fakeFS) RemoveAll(_ context.Context, name string) error {
	x.count()
	x.f.mu.Lock()
	defer x.f.mu.Unlock()
	for p := range x.f.files {
		if p == name || strings.HasPrefix(p, name+"/") {
			delete(x.f.files, p)
		}
	}
	return nil
}

func (x fakeFS) Rename(_ context.Context, o, n string) error {
	x.count()
	x.f.mu.Lock()
	defer x.f.mu.Unlock()
	b, ok := x.f.files[o]
	if !ok {
		return os.ErrNotExist
	}
	delete(x.f.files, o)
	x.f.files[n] = b
	return nil
}

func (x fakeFS) Exists(_ context.Context, name string) (bool, error) {
	x.count()
	if x.f.ExistsFunc != nil {
		return x.f.ExistsFunc(name)
	}
	x.f.mu.Lock()
	defer x.f.mu.Unlock()
	if _, ok := x.f.files[name]; ok {
		return true, nil
	}
	for p := range x.f.files {
		if strings.HasPrefix(p, name+"/") {
			return true, nil
		}
	}
	return false, nil
}

func (x fakeFS) Watch(_ context.Context, root string, _ sandbox.NativeWatchOptions, fn func(sandbox.RawEvent)) (sandbox.Subscription, error) {
	if x.f.WatchErr != nil {
		return nil, x.f.WatchErr
	}
	x.f.mu.Lock()
	x.f.watchFn = fn
	x.f.mu.Unlock()
	return fakeSub(x), nil
}

type fakeSub struct{ f *FakeHandle }

func (s fakeSub) Stop() error {
	s.f.mu.Lock()
	s.f.watchFn = nil
	s.f.mu.Unlock()
	return nil
}

// FakeProvider hands out FakeHandles and counts calls.
type FakeProvider struct {
	NameValue string
	Caps      sandbox.Capabilities
	// ResumeNil makes Resume report the sandbox gone.
	ResumeNil bool
	// NewHandle customizes created handles.
	NewHandle func(id string) *FakeHandle
	// DestroyErr fails Destroy.
	DestroyErr error

	mu                                   sync.Mutex
	n                                    int
	handles                              map[string]*FakeHandle
	Creates, Resumes, Restores, Destroys int
	CreateIDs                            []string
	DestroyCtxErrs                       []error
	snapshots                            int
}

func (p *FakeProvider) Name() string {
	if p.NameValue == "" {
		return "fake"
	}
	return p.NameValue
}

func (p *FakeProvider) Capabilities() sandbox.Capabilities { return p.Caps }

func (p *FakeProvider) newHandle() *FakeHandle {
	p.n++
	id := "fake-" + string(rune('0'+p.n%10)) + strings.Repeat("x", p.n/10)
	var h *FakeHandle
	if p.NewHandle != nil {
		h = p.NewHandle(id)
	} else {
		h = NewFakeHandle()
	}
	h.IDValue, h.Name = id, p.Name()
	h.Caps = p.Caps
	if p.handles == nil {
		p.handles = map[string]*FakeHandle{}
	}
	p.handles[id] = h
	return h
}

// Handle returns the handle with id.
func (p *FakeProvider) Handle(id string) *FakeHandle {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.handles[id]
}

func (p *FakeProvider) Create(_ context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Creates++
	p.CreateIDs = append(p.CreateIDs, opts.ID)
	h := p.newHandle()
	if len(opts.Env) > 0 {
		for k, v := range opts.Env {
			h.env[k] = v
		}
	}
	return &snapHandle{h, p}, nil
}

func (p *FakeProvider) Resume(_ context.Context, id string) (sandbox.Handle, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Resumes++
	h, ok := p.handles[id]
	if !ok || p.ResumeNil {
		return nil, nil
	}
	return &snapHandle{h, p}, nil
}

func (p *FakeProvider) RestoreSnapshot(_ context.Context, opts sandbox.RestoreOptions) (sandbox.Handle, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Restores++
	return &snapHandle{p.newHandle(), p}, nil
}

func (p *FakeProvider) Destroy(ctx context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Destroys++
	p.DestroyCtxErrs = append(p.DestroyCtxErrs, ctx.Err())
	return p.DestroyErr
}

// snapHandle adds Snapshot to a FakeHandle when the provider has snapshots.
type snapHandle struct {
	*FakeHandle
	p *FakeProvider
}

// Fake returns the underlying FakeHandle of a handle from FakeProvider.
func Fake(h sandbox.Handle) *FakeHandle {
	switch v := h.(type) {
	case *snapHandle:
		return v.FakeHandle
	case *FakeHandle:
		return v
	}
	return nil
}

func (s *snapHandle) Snapshot(context.Context, string) (sandbox.Snapshot, error) {
	if !s.p.Caps.Snapshots {
		return sandbox.Snapshot{}, &sandbox.UnsupportedCapabilityError{Provider: s.p.Name(), Capability: "snapshots"}
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.snapshots++
	return sandbox.Snapshot{ID: "snap-" + path.Base(s.IDValue)}, nil
}

var (
	_ sandbox.Handle           = (*FakeHandle)(nil)
	_ sandbox.NativeWatcher    = fakeFS{}
	_ sandbox.SnapshotRestorer = (*FakeProvider)(nil)
	_ sandbox.Snapshotter      = (*snapHandle)(nil)
	_                          = errors.New
	_                          = io.EOF
)
