package sandbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/sandbox"
)

type failingDestroy struct{ sandbox.Provider }

func (failingDestroy) Destroy(context.Context, string) error { return errors.New("daemon gone") }

// Reclaim's outcomes, on the local provider: a reclaimed run's sandbox is
// destroyed and its record deleted; a missing key, a missing record and a
// record of another provider are reported and left alone; a failed destroy
// still deletes the record.
func TestReclaimOutcomes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var destroys atomic.Int64
	s := e.define(sandbox.Definition{Hooks: sandbox.Hooks{OnDestroy: func(context.Context) error { destroys.Add(1); return nil }}})
	store := &sandbox.MemoryStore{}
	rc := sandbox.RunContext{ThreadID: "t1", RunID: "r1", Store: store}
	h, _, err := s.Ensure(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	dir := hostDir(h)
	key := s.Key(rc)
	run := func(k *string) durable.RunRecord {
		return durable.RunRecord{RunID: "r1", ThreadID: "t1", SandboxKey: k}
	}

	if out, err := s.ReclaimRun(ctx, run(nil), store); out != sandbox.ReclaimNoSandboxKey || err != nil {
		t.Fatalf("no key: %s %v", out, err)
	}
	other := "other-key"
	if out, err := s.ReclaimRun(ctx, run(&other), store); out != sandbox.ReclaimNotFound || err != nil {
		t.Fatalf("unknown key: %s %v", out, err)
	}
	if err := store.Upsert(ctx, sandbox.Record{Key: other, Provider: "docker", ProviderSandboxID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if out, err := s.ReclaimRun(ctx, run(&other), store); out != sandbox.ReclaimProviderMismatch || err != nil {
		t.Fatalf("other provider: %s %v", out, err)
	}
	if rec, _ := store.Get(ctx, other); rec == nil {
		t.Fatal("a provider mismatch deleted the record")
	}

	if out, err := s.ReclaimRun(ctx, run(&key), store); out != sandbox.ReclaimDestroyed || err != nil {
		t.Fatalf("reclaim: %s %v", out, err)
	}
	if exists(dir) {
		t.Fatal("the sandbox's workspace survived the reclaim")
	}
	if rec, _ := store.Get(ctx, key); rec != nil || destroys.Load() != 1 {
		t.Fatalf("record %+v, onDestroy %d", rec, destroys.Load())
	}

	// Destroy fails: the record goes all the same and the error says why.
	fs := e.define(sandbox.Definition{ID: "failing", Provider: failingDestroy{e.provider}})
	rc2 := sandbox.RunContext{ThreadID: "t2", RunID: "r2", Store: store}
	h2, _, err := fs.Ensure(ctx, rc2)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Destroy(ctx)
	key2 := fs.Key(rc2)
	out, err := sandbox.Reclaim(ctx, store, fs.Definition().Provider, key2)
	if out != sandbox.ReclaimDestroyFailed || err == nil {
		t.Fatalf("failing destroy: %s %v", out, err)
	}
	if rec, _ := store.Get(ctx, key2); rec != nil {
		t.Fatal("a failed destroy kept the record")
	}
}
