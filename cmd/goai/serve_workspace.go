package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/harness"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/docker"
	"github.com/goai-sdk/goai/sandbox/local"
	"github.com/goai-sdk/goai/server"
	"github.com/goai-sdk/goai/workspace"
)

// agentFlags are goai serve's agent settings: which sandbox the agent works
// in, where its workspace is, and which commands it may run.
type agentFlags struct {
	sandbox, workspace, policy, image, dockerNet *string
	noTools                                      *bool
}

func addAgentFlags(fs *flag.FlagSet) *agentFlags {
	return &agentFlags{
		sandbox:   fs.String("sandbox", os.Getenv("GOAI_SANDBOX"), "sandbox the agent works in: bwrap, local, docker or none (default: bwrap where it works, else local) (GOAI_SANDBOX)"),
		workspace: fs.String("workspace", os.Getenv("GOAI_WORKSPACE"), "workspace directory for every thread (default: one git repository per thread under the data directory) (GOAI_WORKSPACE)"),
		policy:    fs.String("policy", os.Getenv("GOAI_POLICY"), `command policy file, JSON {"commands":{"allow":[...],"ask":[...],"deny":[...]},"default":"ask"} (default: ask for every command) (GOAI_POLICY)`),
		image:     fs.String("docker-image", envOr("GOAI_DOCKER_IMAGE", "debian:bookworm-slim"), "image of the docker sandbox; it needs sh and git (GOAI_DOCKER_IMAGE)"),
		dockerNet: fs.String("docker-network", os.Getenv("GOAI_DOCKER_NETWORK"), "network of the docker sandbox: none, or a docker network (bridge, host, ...) for a coding agent that calls its model from inside (default none) (GOAI_DOCKER_NETWORK)"),
		noTools:   fs.Bool("no-tools", false, "plain chat: no sandbox and no workspace tools (same as GOAI_SANDBOX=none)"),
	}
}

// agent runs every chat in a per-thread sandbox with the workspace tools.
// A nil *agent is plain chat.
type agent struct {
	kind      string // "bwrap", "local" or "docker"
	dataDir   string // per-thread workspaces live in dataDir/workspaces
	shared    string // GOAI_WORKSPACE: one directory for every thread
	policy    *workspace.Policy
	tools     []*chat.Tool
	newProv   func(dir string) (sandbox.Provider, error)
	image     string // the docker image (kind "docker")
	dockerNet string // the docker sandbox's network ("" or "none": none)
	logger    *slog.Logger
	network   bool // bubblewrapped commands may use the host network (a coding agent reaching its model)

	mu        sync.Mutex
	sandboxes map[string]*sandbox.Sandbox // by workspace directory
	createMu  sync.Mutex                  // serializes creating thread workspaces
}

// openAgent resolves the agent flags; it returns nil for plain chat.
func openAgent(ctx context.Context, f *agentFlags, dataDir string, logger *slog.Logger) (*agent, error) {
	kind := strings.ToLower(strings.TrimSpace(*f.sandbox))
	if *f.noTools || kind == "none" {
		return nil, nil
	}
	a := &agent{dataDir: dataDir, logger: logger, sandboxes: map[string]*sandbox.Sandbox{}}
	if *f.policy != "" {
		p, err := workspace.LoadPolicy(*f.policy)
		if err != nil {
			return nil, err
		}
		a.policy = p
	}
	if *f.workspace != "" {
		dir, err := filepath.Abs(*f.workspace)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		a.shared = dir
	}
	switch kind {
	case "":
		kind = "local"
		if bwrapWorks(ctx) {
			kind = "bwrap"
		}
	case "bwrap", "bubblewrap":
		kind = "bwrap"
		if !bwrapWorks(ctx) {
			return nil, errors.New("GOAI_SANDBOX=bwrap, but bubblewrap does not work here (is bwrap installed and are user namespaces allowed?)")
		}
	case "local", "docker":
	default:
		return nil, fmt.Errorf("unknown sandbox %q: use bwrap, local, docker or none", kind)
	}
	a.kind = kind
	keep := false
	switch kind {
	case "bwrap", "local":
		iso := local.IsolationNone
		if kind == "bwrap" {
			iso = local.IsolationBubblewrap
		}
		a.newProv = func(dir string) (sandbox.Provider, error) {
			return local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep, Isolation: iso, ScrubEnv: secretEnv(), Network: a.network, Logger: logger}), nil
		}
	case "docker":
		image := *f.image
		a.image, a.dockerNet = image, *f.dockerNet
		a.newProv = func(dir string) (sandbox.Provider, error) {
			return docker.New(docker.Options{Image: image, HostDir: dir, Owner: dockerOwner(dataDir), NetworkMode: a.dockerNet, ExtraHosts: a.extraHosts(), Logger: logger})
		}
	}
	a.tools = workspace.RunTools(workspace.Options{Policy: a.policy})
	return a, nil
}

// secretEnv lists the host variables commands never see: provider keys
// and anything that looks like a credential.
func secretEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		u := strings.ToUpper(k)
		if strings.Contains(u, "KEY") || strings.Contains(u, "TOKEN") || strings.Contains(u, "SECRET") || strings.Contains(u, "PASSWORD") ||
			strings.HasPrefix(u, "GOAI_") || strings.HasPrefix(u, "DATABASE_URL") {
			out = append(out, k)
		}
	}
	return out
}

// bwrapWorks runs `true` under bubblewrap once.
func bwrapWorks(ctx context.Context) bool {
	if _, err := exec.LookPath("bwrap"); err != nil {
		return false
	}
	dir, err := os.MkdirTemp("", "goai-bwrap-probe-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	keep := false
	h, err := local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep, Isolation: local.IsolationBubblewrap}).Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		return false
	}
	defer h.Destroy(context.Background())
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := h.Exec(pctx, "true", sandbox.ExecOptions{})
	return err == nil && r.ExitCode == 0
}

// describe is the sandbox part of the startup line.
func (a *agent) describe() string {
	if a == nil {
		return "none (plain chat, no tools)"
	}
	where := filepath.Join(a.dataDir, "workspaces", "<thread>")
	if a.shared != "" {
		where = a.shared
	}
	pol := "ask for every command"
	if a.policy != nil {
		pol = "from policy file"
	}
	return fmt.Sprintf("%s, workspace %s, commands: %s", a.kind, where, pol)
}

// kindName is the sandbox kind for /api/info.
func (a *agent) kindName() string {
	if a == nil {
		return "none"
	}
	return a.kind
}

const agentPrompt = `You are a coding agent working in a sandboxed workspace (a git repository) that the user watches live: every file you create, change or delete appears in their workspace panel with its diff.
Tools: list_files and read_file (with line ranges) to look around, search to find text, write_file to create or replace a file, edit_file to replace one exact, unique piece of a file, and run_command to run shell commands in the workspace root.
Some commands need the user's approval; a denied or failed tool call comes back as an error: read it and adapt instead of repeating the call.
Prefer small, verifiable steps. When you are done, say briefly what you did and what the result was.`

// wrap adds the agent to every request's options: the thread's sandbox,
// the workspace tools and the system prompt.
func (a *agent) wrap(build func(*server.Request) (chat.Options, error)) func(*server.Request) (chat.Options, error) {
	if a == nil {
		return build
	}
	return func(req *server.Request) (chat.Options, error) {
		opts, err := build(req)
		if err != nil {
			return opts, err
		}
		sb, err := a.sandboxFor(req.Input.ThreadID)
		if err != nil {
			return opts, err
		}
		a.recordBaseline(req.Input.ThreadID)
		have := map[string]bool{}
		for _, t := range opts.Tools {
			have[t.Name] = true
		}
		for _, t := range a.tools {
			if !have[t.Name] && !isHarness(opts) {
				opts.Tools = append(opts.Tools, t)
			}
		}
		if isHarness(opts) && !have[harness.ApproveCommandTool] {
			// A command the policy asks about pauses the run for approval.
			opts.Tools = append(opts.Tools, harness.ApprovalTool())
		}
		opts.Middleware = append([]*chat.Middleware{sandbox.WithSandbox(sb, sandbox.Options{})}, opts.Middleware...)
		opts.SystemPrompts = append([]chat.SystemPrompt{{Content: agentPrompt}}, opts.SystemPrompts...)
		if opts.Strategy == nil {
			opts.Strategy = chat.MaxIterations(25)
		}
		return opts, nil
	}
}

// workspaceDir is the directory of a thread's workspace, created (as a git
// repository with one empty commit, the diff baseline) on first use.
func (a *agent) workspaceDir(threadID string) (string, error) {
	if a.shared != "" {
		return a.shared, nil
	}
	dir := filepath.Join(a.dataDir, "workspaces", threadDirName(threadID))
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return dir, nil
	}
	// Concurrent first requests of one thread (a client retrying, several
	// tabs) create it once: serialized here, and built aside then renamed
	// into place so a crash mid-way never leaves a half-made repository.
	a.createMu.Lock()
	defer a.createMu.Unlock()
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("creating the thread's workspace: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".new-")
	if err != nil {
		return "", fmt.Errorf("creating the thread's workspace: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"init", "-q"},
		{"-c", "user.name=goai", "-c", "user.email=goai@localhost", "commit", "-q", "--allow-empty", "-m", "workspace created"},
	} {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", tmp}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %s in the thread's workspace: %v: %s", args[0], err, bytes.TrimSpace(out))
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("creating the thread's workspace: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, ".git")); serr == nil {
			return dir, nil // another process made it first
		}
		return "", fmt.Errorf("creating the thread's workspace: %w", err)
	}
	return dir, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// threadDirName maps a client-chosen thread id to a directory name that
// cannot climb out (no separators, no dot-only names) and cannot collide.
func threadDirName(threadID string) string {
	sum := sha256.Sum256([]byte(threadID))
	safe := strings.Trim(unsafeName.ReplaceAllString(threadID, "_"), "._")
	if len(safe) > 48 {
		safe = safe[:48]
	}
	if safe == "" {
		safe = "thread"
	}
	return safe + "-" + hex.EncodeToString(sum[:6])
}

func (a *agent) sandboxFor(threadID string) (*sandbox.Sandbox, error) {
	dir, err := a.workspaceDir(threadID)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if sb, ok := a.sandboxes[dir]; ok {
		return sb, nil
	}
	prov, err := a.newProv(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	sb, err := sandbox.Define(sandbox.Definition{
		ID:         "goai-agent",
		Provider:   prov,
		FileEvents: sandbox.FileEventsWithDiff,
		// The directory outlives the sandbox; Destroy kills what a run
		// left running (and removes a docker container).
		Lifecycle: sandbox.Lifecycle{DestroyOnComplete: true},
		Logger:    a.logger,
	})
	if err != nil {
		return nil, err
	}
	a.sandboxes[dir] = sb
	return sb, nil
}

// WorkspaceFile is one file of GET /api/workspace: a path that differs
// from the thread's baseline and its diff.
type WorkspaceFile struct {
	Path string `json:"path"`
	// Status is "create", "change" or "delete".
	Status string `json:"status"`
	Diff   string `json:"diff"`
}

// maxWorkspaceFiles and maxWorkspaceDiff bound GET /api/workspace.
const (
	maxWorkspaceFiles = 500
	maxWorkspaceDiff  = 64 << 10
)

// serveWorkspace answers GET /api/workspace?threadId=T with the files that
// differ from the thread workspace's baseline, for a page that opens (or
// reloads) to paint its workspace panel before live events arrive.
func (a *agent) serveWorkspace(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	out := struct {
		Sandbox string          `json:"sandbox"`
		Files   []WorkspaceFile `json:"files"`
	}{Sandbox: a.kindName(), Files: []WorkspaceFile{}}
	if a != nil {
		threadID := r.URL.Query().Get("threadId")
		if threadID == "" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"threadId is required"}` + "\n"))
			return
		}
		if files, err := a.changedFiles(r.Context(), threadID); err != nil {
			a.logger.Warn("reading the thread's workspace failed", "threadId", threadID, "error", err)
		} else {
			out.Files = files
		}
	}
	_ = json.NewEncoder(w).Encode(out)
}

// dataDirOf is where goai keeps its files: the directory of a SQLite store,
// else .goai.
func dataDirOf(storeURL string) string {
	if p, ok := strings.CutPrefix(storeURL, "sqlite:"); ok && p != "" && p != ":memory:" {
		return filepath.Dir(p)
	}
	return ".goai"
}

// routes serves GET /api/workspace in front of the chat handler, which
// serves everything else. A workspace request is authorized as the chat
// handler would authorize the same credentials asking for /api/info
// (authentication, Host and Origin checks) and for the thread's hydration
// (thread ownership); both must answer 200, except that a server without a
// store has no hydration (404 no_store).
func (a *agent) routes(api http.Handler) http.Handler {
	probe := func(r *http.Request, path string, q url.Values) *httptest.ResponseRecorder {
		p := r.Clone(r.Context())
		p.URL.Path, p.URL.RawQuery = path, q.Encode()
		p.RequestURI = p.URL.RequestURI()
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, p)
		return rec
	}
	refuse := func(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/workspace", func(w http.ResponseWriter, r *http.Request) {
		if rec := probe(r, "/api/info", nil); rec.Code != http.StatusOK {
			refuse(w, rec)
			return
		}
		rec := probe(r, "/api/chat", url.Values{"threadId": {r.URL.Query().Get("threadId")}})
		noStore := rec.Code == http.StatusNotFound && strings.Contains(rec.Body.String(), `"no_store"`)
		if rec.Code != http.StatusOK && !noStore {
			refuse(w, rec)
			return
		}
		a.serveWorkspace(w, r)
	})
	mux.Handle("/", api)
	return mux
}
