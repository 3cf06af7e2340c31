package sandbox_test

import (
	"context"
	"fmt"
	"iter"
	"os"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
)

// editingAdapter stands in for a harness: it requires the sandbox, edits a
// file in it, and finishes.
type editingAdapter struct{}

func (editingAdapter) Name() string  { return "editor" }
func (editingAdapter) Model() string { return "editor-1" }
func (editingAdapter) Requires() []chat.CapabilityKey {
	return []chat.CapabilityKey{sandbox.HandleCapability}
}

func (editingAdapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		h, err := sandbox.HandleCapability.Get(req.Capabilities)
		if err != nil {
			yield(agui.Event{}, err)
			return
		}
		if err := h.FS().WriteFile(ctx, "/workspace/notes.txt", []byte("hello\n"), 0o644); err != nil {
			yield(agui.Event{}, err)
			return
		}
		yield(agui.Event{Type: agui.RunFinished, FinishReason: agui.FinishStop}, nil)
	}
}

// A run with WithSandbox: sandbox-scoped and run-scoped file hooks fire for
// the edit, and the stream carries a sandbox.file and a sandbox.file.diff
// CUSTOM event for it.
func ExampleWithSandbox() {
	base, _ := os.MkdirTemp("", "example-")
	defer os.RemoveAll(base)
	repo, _ := sandbox.Define(sandbox.Definition{
		ID:         "repo-agent",
		Provider:   local.New(local.Options{BaseDir: base}),
		FileEvents: sandbox.FileEventsWithDiff,
		Lifecycle:  sandbox.Lifecycle{DestroyOnComplete: true},
		Hooks: sandbox.Hooks{
			OnFileCreate: func(_ context.Context, e chat.FileEvent) error {
				fmt.Println("created", e.Path)
				return nil
			},
		},
	})
	audit := &chat.Middleware{Name: "audit", Sandbox: chat.SandboxHooks{
		OnFile: func(c *chat.Context, e chat.FileEvent) error {
			fmt.Println(c.RunID, e.Type, e.Path)
			return nil
		},
	}}
	for ev, err := range chat.Stream(context.Background(), chat.Options{
		ThreadID:   "thread-1",
		RunID:      "run-1",
		Adapter:    editingAdapter{},
		Messages:   []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("take notes")}},
		Middleware: []*chat.Middleware{sandbox.WithSandbox(repo, sandbox.Options{}), audit},
	}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if ev.Type == agui.Custom {
			fmt.Println(ev.Name)
		}
	}
	// Unordered output:
	// created /workspace/notes.txt
	// run-1 create /workspace/notes.txt
	// sandbox.file
	// sandbox.file.diff
}
