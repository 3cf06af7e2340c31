package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/sandboxtest"
)

func define(t *testing.T, def sandbox.Definition) *sandbox.Sandbox {
	t.Helper()
	s, err := sandbox.Define(def)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestItem1FirstEnsureCreates(t *testing.T) {
	p := &sandboxtest.FakeProvider{}
	s := define(t, sandbox.Definition{ID: "repo", Provider: p})
	if p.Creates+p.Resumes != 0 {
		t.Fatal("Define created something")
	}
	store := &sandbox.MemoryStore{}
	rc := sandbox.RunContext{ThreadID: "t1", RunID: "r1", Store: store}
	h, out, err := s.Ensure(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	if out != sandbox.OutcomeCreated || p.Creates != 1 || p.Resumes != 0 {
		t.Fatalf("outcome %s creates %d resumes %d", out, p.Creates, p.Resumes)
	}
	if p.CreateIDs[0] != s.Key(rc) {
		t.Fatalf("create id %q != key %q", p.CreateIDs[0], s.Key(rc))
	}
	rec, _ := store.Get(context.Background(), s.Key(rc))
	if rec == nil || rec.ProviderSandboxID != h.ID() || rec.ThreadID != "t1" || rec.LatestRunID != "r1" || rec.Provider != "fake" {
		t.Fatalf("record %+v", rec)
	}
	// (The real clone of .git is TestItem1EnsureClonesGit in sandbox/local.)
}

func TestItem2SecondRunResumes(t *testing.T) {
	p := &sandboxtest.FakeProvider{}
	s := define(t, sandbox.Definition{ID: "repo", Provider: p})
	ctx := context.Background()
	h1, _, err := s.Ensure(ctx, sandbox.RunContext{ThreadID: "t1", RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	h2, out, err := s.Ensure(ctx, sandbox.RunContext{ThreadID: "t1", RunID: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if out != sandbox.OutcomeResumed || p.Creates != 1 || p.Resumes != 1 || h1.ID() != h2.ID() {
		t.Fatalf("outcome %s creates %d resumes %d ids %s %s", out, p.Creates, p.Resumes, h1.ID(), h2.ID())
	}
	store := &sandbox.MemoryStore{}
	rc := sandbox.RunContext{ThreadID: "t9", RunID: "a", Store: store}
	s.Ensure(ctx, rc)
	rc.RunID = "b"
	s.Ensure(ctx, rc)
	if rec, _ := store.Get(ctx, s.Key(rc)); rec.LatestRunID != "b" {
		t.Fatalf("latestRunId %q", rec.LatestRunID)
	}
}

func TestItem3ResumeGoneRestoresOrRecreates(t *testing.T) {
	ctx := context.Background()
	p := &sandboxtest.FakeProvider{Caps: sandbox.Capabilities{Snapshots: true}}
	s := define(t, sandbox.Definition{ID: "x", Provider: p, Workspace: &sandbox.Workspace{Setup: sandbox.Serial("echo setup")}})
	h1, _, err := s.Ensure(ctx, sandbox.RunContext{ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	p.ResumeNil = true
	h2, out, err := s.Ensure(ctx, sandbox.RunContext{ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if out != sandbox.OutcomeNativeRestored || p.Restores != 1 || p.Creates != 1 {
		t.Fatalf("outcome %s restores %d creates %d", out, p.Restores, p.Creates)
	}
	if len(sandboxtest.Fake(h2).Execs()) != 0 || sandboxtest.Fake(h2).Spawns() != 0 {
		t.Fatal("restore ran a bootstrap")
	}
	_ = h1

	p2 := &sandboxtest.FakeProvider{ResumeNil: true}
	s2 := define(t, sandbox.Definition{ID: "x", Provider: p2})
	s2.Ensure(ctx, sandbox.RunContext{ThreadID: "t"})
	_, out, _ = s2.Ensure(ctx, sandbox.RunContext{ThreadID: "t"})
	if out != sandbox.OutcomeCreated || p2.Creates != 2 || p2.Restores != 0 || p2.CreateIDs[0] != p2.CreateIDs[1] {
		t.Fatalf("outcome %s creates %d restores %d ids %v", out, p2.Creates, p2.Restores, p2.CreateIDs)
	}
}

func TestItem4ReuseNoneAndConcurrentEnsure(t *testing.T) {
	ctx := context.Background()
	p := &sandboxtest.FakeProvider{}
	s := define(t, sandbox.Definition{ID: "x", Provider: p, Lifecycle: sandbox.Lifecycle{Reuse: sandbox.ReusePerRun}})
	s.Ensure(ctx, sandbox.RunContext{ThreadID: "t", RunID: "r1"})
	s.Ensure(ctx, sandbox.RunContext{ThreadID: "t", RunID: "r2"})
	if p.Creates != 2 || p.Resumes != 0 {
		t.Fatalf("creates %d resumes %d", p.Creates, p.Resumes)
	}

	p2 := &sandboxtest.FakeProvider{}
	s2 := define(t, sandbox.Definition{ID: "x", Provider: p2})
	var wg sync.WaitGroup
	ids := make([]string, 2)
	for i := range 2 {
		wg.Go(func() {
			h, _, err := s2.Ensure(ctx, sandbox.RunContext{ThreadID: "t", RunID: "r"})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = h.ID()
		})
	}
	wg.Wait()
	if p2.Creates != 1 || p2.Resumes != 1 || ids[0] != ids[1] {
		t.Fatalf("creates %d resumes %d ids %v", p2.Creates, p2.Resumes, ids)
	}
}

type clockStore struct {
	sandbox.MemoryStore
}

func TestItem5SnapshotRecordedAndMaxAge(t *testing.T) {
	ctx := context.Background()
	p := &sandboxtest.FakeProvider{Caps: sandbox.Capabilities{Snapshots: true}}
	s := define(t, sandbox.Definition{ID: "x", Provider: p, Lifecycle: sandbox.Lifecycle{SnapshotMaxAge: time.Hour}})
	store := &clockStore{}
	rc := sandbox.RunContext{ThreadID: "t", Store: store}
	if _, _, err := s.Ensure(ctx, rc); err != nil {
		t.Fatal(err)
	}
	rec, _ := store.Get(ctx, s.Key(rc))
	if rec.LatestSnapshotID == "" {
		t.Fatal("no snapshot recorded")
	}
	old := *rec
	old.UpdatedAt = time.Now().Add(-2 * time.Hour)
	store.Upsert(ctx, old)
	_, out, _ := s.Ensure(ctx, rc)
	if out != sandbox.OutcomeCreated || p.Creates != 2 || p.Resumes != 0 {
		t.Fatalf("outcome %s creates %d resumes %d", out, p.Creates, p.Resumes)
	}
}

func TestItem6SecretsReappliedAndFailedBootstrapDestroys(t *testing.T) {
	ctx := context.Background()
	p := &sandboxtest.FakeProvider{Caps: sandbox.Capabilities{Snapshots: true}}
	ws := &sandbox.Workspace{Secrets: sandbox.Secrets{"TOKEN": "s3cret"}}
	s := define(t, sandbox.Definition{ID: "x", Provider: p, Workspace: ws})
	h1, _, _ := s.Ensure(ctx, sandbox.RunContext{ThreadID: "t"})
	h2, _, _ := s.Ensure(ctx, sandbox.RunContext{ThreadID: "t"}) // resume
	if sets := sandboxtest.Fake(h2).EnvSets(); h1.ID() != h2.ID() || len(sets) != 2 || sets[1]["TOKEN"] != "s3cret" {
		// one set by bootstrap, one by resume
		t.Fatalf("env sets %v", sets)
	}
	p.ResumeNil = true
	h3, out, _ := s.Ensure(ctx, sandbox.RunContext{ThreadID: "t"}) // restore
	if out != sandbox.OutcomeNativeRestored || len(sandboxtest.Fake(h3).EnvSets()) != 1 {
		t.Fatalf("restore outcome %s env sets %v", out, sandboxtest.Fake(h3).EnvSets())
	}

	p2 := &sandboxtest.FakeProvider{}
	s2 := define(t, sandbox.Definition{ID: "x", Provider: p2})
	s2.Ensure(ctx, sandbox.RunContext{ThreadID: "t"})
	h, _, _ := s2.Ensure(ctx, sandbox.RunContext{ThreadID: "t"})
	if len(sandboxtest.Fake(h).EnvSets()) != 0 {
		t.Fatal("env set without secrets")
	}

	p3 := &sandboxtest.FakeProvider{NewHandle: func(string) *sandboxtest.FakeHandle {
		fh := sandboxtest.NewFakeHandle()
		fh.ExecFunc = func(context.Context, string, sandbox.ExecOptions) (sandbox.ExecResult, error) {
			return sandbox.ExecResult{ExitCode: 7}, nil
		}
		return fh
	}}
	s3 := define(t, sandbox.Definition{ID: "x", Provider: p3, Workspace: &sandbox.Workspace{Setup: sandbox.Serial("false")}})
	_, _, err := s3.Ensure(ctx, sandbox.RunContext{ThreadID: "t"})
	var se *sandbox.SetupError
	if !errors.As(err, &se) || se.ExitCode != 7 {
		t.Fatalf("err %v", err)
	}
	if d := p3.Handle("fake-1").Destroyed(); d != 1 {
		t.Fatalf("destroyed %d", d)
	}
}

func TestItem7DestroyUsesFreshContext(t *testing.T) {
	p := &sandboxtest.FakeProvider{}
	s := define(t, sandbox.Definition{ID: "x", Provider: p})
	store := &sandbox.MemoryStore{}
	rc := sandbox.RunContext{ThreadID: "t", Store: store}
	if err := s.Destroy(context.Background(), rc); err != nil || p.Destroys != 0 {
		t.Fatalf("destroy without record: %v %d", err, p.Destroys)
	}
	s.Ensure(context.Background(), rc)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Destroy(ctx, rc); err != nil {
		t.Fatal(err)
	}
	if p.Destroys != 1 || p.DestroyCtxErrs[0] != nil {
		t.Fatalf("destroys %d ctx errs %v", p.Destroys, p.DestroyCtxErrs)
	}
	if rec, _ := store.Get(context.Background(), s.Key(rc)); rec != nil {
		t.Fatal("record kept")
	}
	// A failing provider keeps the record.
	p.DestroyErr = errors.New("busy")
	s.Ensure(context.Background(), rc)
	if err := s.Destroy(context.Background(), rc); err == nil {
		t.Fatal("want error")
	}
	if rec, _ := store.Get(context.Background(), s.Key(rc)); rec == nil {
		t.Fatal("record dropped after failed destroy")
	}
}

func TestItem8KeyStability(t *testing.T) {
	p := &sandboxtest.FakeProvider{}
	ws := func(ref, secret string) *sandbox.Workspace {
		return &sandbox.Workspace{Source: sandbox.GitHubRepo("o/r", ref), Secrets: sandbox.Secrets{"T": secret}}
	}
	base := define(t, sandbox.Definition{ID: "a", Provider: p, Workspace: ws("main", "1")})
	rc := sandbox.RunContext{ThreadID: "t", RunID: "r"}
	k := base.Key(rc)
	if k != base.Key(rc) || len(k) != 16 {
		t.Fatalf("unstable or malformed key %q", k)
	}
	differs := map[string]string{
		"thread":   base.Key(sandbox.RunContext{ThreadID: "t2", RunID: "r"}),
		"id":       define(t, sandbox.Definition{ID: "b", Provider: p, Workspace: ws("main", "1")}).Key(rc),
		"provider": define(t, sandbox.Definition{ID: "a", Provider: &sandboxtest.FakeProvider{NameValue: "other"}, Workspace: ws("main", "1")}).Key(rc),
		"tenant":   base.Key(sandbox.RunContext{ThreadID: "t", RunID: "r", Tenant: &sandbox.Tenant{UserID: "u"}}),
		"ref":      define(t, sandbox.Definition{ID: "a", Provider: p, Workspace: ws("dev", "1")}).Key(rc),
		"setup":    define(t, sandbox.Definition{ID: "a", Provider: p, Workspace: &sandbox.Workspace{Source: sandbox.GitHubRepo("o/r", "main"), Secrets: sandbox.Secrets{"T": "1"}, Setup: sandbox.Serial("make")}}).Key(rc),
	}
	for what, k2 := range differs {
		if k2 == k {
			t.Errorf("key does not change with %s", what)
		}
	}
	if k2 := define(t, sandbox.Definition{ID: "a", Provider: p, Workspace: ws("main", "2")}).Key(rc); k2 != k {
		t.Error("key changes with a secret value")
	}
	if k2 := base.Key(sandbox.RunContext{ThreadID: "t", RunID: "other"}); k2 != k {
		t.Error("per-thread key changes with the run")
	}
}

func TestItem9InstanceStore(t *testing.T) {
	ctx := context.Background()
	var s sandbox.MemoryStore
	if r, err := s.Get(ctx, "missing"); r != nil || err != nil {
		t.Fatal(r, err)
	}
	s.Upsert(ctx, sandbox.Record{Key: "k", LatestSnapshotID: "snap"})
	s.Upsert(ctx, sandbox.Record{Key: "k", ProviderSandboxID: "p"})
	if r, _ := s.Get(ctx, "k"); r.LatestSnapshotID != "" || r.ProviderSandboxID != "p" {
		t.Fatalf("not a full replace: %+v", r)
	}
	if err := s.Delete(ctx, "nope"); err != nil {
		t.Fatal(err)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	s := sandbox.Secrets{"TOKEN": "hunter2"}
	log, rec := sandboxtest.NewLogger()
	log.Info("x", "secrets", s)
	for _, out := range []string{s.String(), s.GoString(), func() string { b, _ := s.MarshalJSON(); return string(b) }(), rec.Records()[0].Attrs["secrets"]} {
		if strings.Contains(out, "hunter2") || !strings.Contains(out, "TOKEN") {
			t.Fatalf("leak or missing name: %q", out)
		}
	}
	var sb strings.Builder
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		sb.WriteString(sprintf(f, s))
	}
	if strings.Contains(sb.String(), "hunter2") {
		t.Fatalf("fmt leak: %s", sb.String())
	}
}
