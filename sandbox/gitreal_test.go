package sandbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
	"github.com/goai-sdk/goai/sandbox"
)

// diffLog records, per path, every diff a run-scoped hook read.
type diffLog struct {
	mu    sync.Mutex
	diffs map[string][]string
}

func (d *diffLog) add(path, diff string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.diffs == nil {
		d.diffs = map[string][]string{}
	}
	d.diffs[path] = append(d.diffs[path], diff)
}

func (d *diffLog) get(path string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.diffs[path]...)
}

// waitDiff waits until a hook read a diff of path satisfying ok.
func (d *diffLog) waitDiff(t *testing.T, path string, ok func(string) bool) {
	t.Helper()
	if !waitFor(t, time.Minute, func() bool {
		for _, diff := range d.get(path) {
			if ok(diff) {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no matching diff of %s; got %q", path, d.get(path))
	}
}

// Real git, through WithSandbox with diffs on: the session baseline holds
// across a commit made in the workspace; an untracked file diffs as an
// add-patch at creation and after an edit; a git-ignored .env fires its
// event but its diff is "" in hooks and in the stream.
func TestRealGitBaselineUntrackedAndIgnored(t *testing.T) {
	e := newEnv(t)
	ws := &sandbox.Workspace{Setup: sandbox.Serial(
		"printf 'old\\n' > README.md && printf '.env\\n' > .gitignore && git init -q && git add -A && " +
			"git -c user.email=t@example.com -c user.name=t -c commit.gpgsign=false commit -qm init")}
	s := e.define(sandbox.Definition{Workspace: ws, FileEvents: sandbox.FileEventsWithDiff})
	var hookDiffs diffLog
	var envEvents lines
	audit := &chat.Middleware{Name: "audit", Sandbox: chat.SandboxHooks{
		OnFile: func(c *chat.Context, ev chat.FileEvent) error {
			if strings.HasSuffix(ev.Path, "/.env") {
				envEvents.add(ev.Type)
			}
			hookDiffs.add(ev.Path, ev.Diff(c))
			return nil
		},
	}}
	a := acting(func(ctx context.Context, h sandbox.Handle) {
		sh := func(cmd string) {
			t.Helper()
			res, err := h.Exec(ctx, cmd, sandbox.ExecOptions{})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%s: %+v %v", cmd, res, err)
			}
		}
		// Tracked file: edit, commit in the workspace, edit again.
		writeFile(t, ctx, h, "/workspace/README.md", "new\n")
		hookDiffs.waitDiff(t, "/workspace/README.md", func(d string) bool { return strings.Contains(d, "+new") })
		sh("git -c user.email=t@example.com -c user.name=t -c commit.gpgsign=false commit -qam moved")
		writeFile(t, ctx, h, "/workspace/README.md", "newer\n")
		hookDiffs.waitDiff(t, "/workspace/README.md", func(d string) bool { return strings.Contains(d, "+newer") })

		// Untracked: created, then edited.
		writeFile(t, ctx, h, "/workspace/notes.txt", "a\n")
		hookDiffs.waitDiff(t, "/workspace/notes.txt", func(d string) bool { return strings.Contains(d, "+a\n") })
		writeFile(t, ctx, h, "/workspace/notes.txt", "a\nb\n")
		hookDiffs.waitDiff(t, "/workspace/notes.txt", func(d string) bool { return strings.Contains(d, "+b\n") })

		// Git-ignored.
		writeFile(t, ctx, h, "/workspace/.env", "API_KEY=sk-secret\n")
		waitFor(t, time.Minute, func() bool { return len(envEvents.get()) > 0 })
	}, chattest.TextTurn("m", "done", agui.FinishStop))
	evs := mustRun(t, e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}), audit))

	// The README diff after the commit is still against the session
	// baseline ("old"), not against the commit the agent made ("new").
	last := hookDiffs.get("/workspace/README.md")
	final := last[len(last)-1]
	if !strings.Contains(final, "-old\n") || !strings.Contains(final, "+newer\n") || strings.Contains(final, "-new\n") {
		t.Fatalf("README diff after a commit is not against the baseline:\n%s", final)
	}
	for _, d := range hookDiffs.get("/workspace/notes.txt") {
		if !strings.HasPrefix(d, "diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n") {
			t.Fatalf("untracked file diff is not an add-patch:\n%s", d)
		}
	}
	if got := hookDiffs.get("/workspace/.env"); len(got) == 0 || strings.Join(got, "") != "" {
		t.Fatalf(".env diffs in hooks: %q", got)
	}

	cs := customs(t, evs)
	checkDiffs(t, cs)
	var envFile, envDiffs int
	var readmeStream []string
	for _, c := range cs {
		switch {
		case c.Value["path"] == "/workspace/.env" && c.Name == "sandbox.file":
			envFile++
		case c.Value["path"] == "/workspace/.env":
			envDiffs++
			if d := c.Value["diff"]; d != "" {
				t.Fatalf(".env diff in the stream: %q", d)
			}
		case c.Value["path"] == "/workspace/README.md" && c.Name == "sandbox.file.diff":
			readmeStream = append(readmeStream, c.Value["diff"].(string))
		}
	}
	if envFile == 0 || envDiffs == 0 {
		t.Fatalf(".env: %d sandbox.file and %d sandbox.file.diff events in the stream", envFile, envDiffs)
	}
	if len(readmeStream) == 0 || !strings.Contains(readmeStream[len(readmeStream)-1], "-old\n") {
		t.Fatalf("README diffs in the stream: %q", readmeStream)
	}
	for _, c := range cs {
		if d, _ := c.Value["diff"].(string); strings.Contains(d, "sk-secret") {
			t.Fatal("the ignored file's content reached the stream")
		}
	}
}
