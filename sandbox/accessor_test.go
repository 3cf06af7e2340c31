package sandbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
	"github.com/goai-sdk/goai/sandbox"
)

// A run-scoped hook that reads the content after its run was aborted (its
// context is done) still gets it: the accessors are detached from the
// run's cancellation and bounded by their own timeout.
func TestAccessorsWorkOnAbortedRun(t *testing.T) {
	e := newEnv(t)
	s := e.define(sandbox.Definition{Workspace: gitRepo("/workspace")})
	type read struct{ before, after, diff, ctxErr string }
	entered := make(chan struct{})
	got := make(chan read, 1)
	audit := &chat.Middleware{Name: "audit", Sandbox: chat.SandboxHooks{
		OnFileChange: func(c *chat.Context, ev chat.FileEvent) error {
			close(entered)
			select {
			case <-c.Done():
			case <-time.After(time.Minute):
				t.Error("the run's context was never cancelled")
			}
			got <- read{before: ev.Before(c), after: ev.After(c), diff: ev.Diff(c), ctxErr: errString(c.Err())}
			return nil
		},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := acting(func(c context.Context, h sandbox.Handle) {
		writeFile(t, c, h, "/workspace/README.md", "new\n")
		select {
		case <-entered:
		case <-time.After(time.Minute):
			t.Error("the hook never ran")
		}
		cancel() // abort the run while its hook is still going
	}, chattest.TextTurn("m", "done", agui.FinishStop))
	_, _ = chattest.CollectContext(ctx, t, e.opts(a, sandbox.WithSandbox(s, sandbox.Options{}), audit))
	var r read
	select {
	case r = <-got:
	case <-time.After(time.Minute):
		t.Fatal("the hook never read the content")
	}
	if r.ctxErr == "" {
		t.Fatal("the hook's context was not done: the test proves nothing")
	}
	if r.before != "old\n" || r.after != "new\n" || !strings.Contains(r.diff, "-old") || !strings.Contains(r.diff, "+new") {
		t.Fatalf("accessors on an aborted run: before %q after %q diff %q", r.before, r.after, r.diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
