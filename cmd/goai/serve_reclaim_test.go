package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
)

// The recovery hook of goai serve destroys a dead run's sandbox through its
// thread's definition: its processes end and its record goes; the
// thread's directory stays (the user's workspace).
func TestServeReleaseSandbox(t *testing.T) {
	ctx := context.Background()
	keep := false
	a := &agent{kind: "local", dataDir: t.TempDir(), logger: slog.New(slog.DiscardHandler), sandboxes: map[string]*sandbox.Sandbox{},
		newProv: func(dir string) (sandbox.Provider, error) {
			return local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep}), nil
		}}
	sb, err := a.sandboxFor("thread-1")
	if err != nil {
		t.Fatal(err)
	}
	rc := sandbox.RunContext{ThreadID: "thread-1", RunID: "run-1"}
	h, _, err := sb.Ensure(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.Spawn(ctx, "sleep 300", sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := sb.Key(rc)
	if a.releaseSandbox() == nil || (*agent)(nil).releaseSandbox() != nil {
		t.Fatal("releaseSandbox: set with sandboxes, nil without")
	}
	if err := a.releaseSandbox()(ctx, durable.RunRecord{RunID: "run-1", ThreadID: "thread-1", SandboxKey: &key}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := p.Wait(wctx); err != nil {
		t.Fatalf("the sandbox's process survived the release: %v", err)
	}
	if rec, _ := sb.Record(ctx, key, nil); rec != nil {
		t.Fatalf("record kept: %+v", rec)
	}
	if known, _ := a.knownContainer(ctx, key, h.ID()); known {
		t.Fatal("a released sandbox is still known to the sweeper")
	}
}
