package harness_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/goai-sdk/goai/harness"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
)

func TestDecodeRunID(t *testing.T) {
	for _, id := range []string{"run-1", "a_b", "thread/../x", "ünï", ".", "..", "CON"} {
		got, ok := harness.DecodeRunID(harness.EncodeRunID(id))
		if !ok || got != id {
			t.Errorf("DecodeRunID(EncodeRunID(%q)) = %q, %v", id, got, ok)
		}
	}
	for _, name := range []string{"", "_zz", "a_4", "_4A", "x_2f"} {
		if id, ok := harness.DecodeRunID(name); ok && harness.EncodeRunID(id) != name {
			t.Errorf("DecodeRunID(%q) = %q, which encodes differently", name, id)
		}
	}
	if _, ok := harness.DecodeRunID("_4A"); ok {
		t.Error("an upper-case escape decoded: EncodeRunID never writes one")
	}
}

// The sweep deletes the journals of runs that are over and of old
// orphans, and keeps running runs', recent orphans', files it cannot
// name, and runs it could not look up.
func TestSweepJournals(t *testing.T) {
	dir := t.TempDir()
	jdir := filepath.Join(dir, ".git", "goai-runs")
	if err := os.MkdirAll(jdir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	write := func(name string, mtime time.Time) {
		p := filepath.Join(jdir, name)
		if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"run-done", "run-live", "run-lookup"} {
		write(harness.EncodeRunID(id)+".ndjson", time.Now())
		write(harness.EncodeRunID(id)+".err", time.Now())
	}
	write(harness.EncodeRunID("orphan-old")+".ndjson", old)
	write(harness.EncodeRunID("orphan-old")+".pid", old)
	write(harness.EncodeRunID("orphan-new")+".ndjson", time.Now())
	write("notes.txt", old)

	keep := false
	h, err := local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep}).Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Destroy(context.Background())
	rep, err := harness.SweepJournals(context.Background(), h, ".git/goai-runs", harness.SweepOptions{
		Cwd: h.WorkspaceRoot(),
		Over: func(_ context.Context, id string) (bool, bool, error) {
			switch id {
			case "run-done":
				return true, true, nil
			case "run-live":
				return false, true, nil
			case "run-lookup":
				return false, false, errors.New("store down")
			}
			return false, false, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Deleted)
	if !slices.Equal(rep.Deleted, []string{"orphan-old", "run-done"}) {
		t.Errorf("deleted %v, want orphan-old and run-done (kept %v)", rep.Deleted, rep.Kept)
	}
	entries, _ := os.ReadDir(jdir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{"notes.txt", "orphan-new.ndjson", "run-live.err", "run-live.ndjson", "run-lookup.err", "run-lookup.ndjson"}
	if !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	for k, reason := range map[string]string{"run-live": "run not over", "orphan-new": "orphan too recent", "notes.txt": "not a journal file of a run id"} {
		if rep.Kept[k] != reason {
			t.Errorf("kept[%s] = %q, want %q", k, rep.Kept[k], reason)
		}
	}
}

func FuzzDecodeRunID(f *testing.F) {
	for _, s := range []string{"run-1", "a_2fb", "_", "_zz", "..", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if id, ok := harness.DecodeRunID(s); ok && harness.EncodeRunID(id) != s {
			t.Fatalf("DecodeRunID(%q) = %q, which encodes to %q", s, id, harness.EncodeRunID(id))
		}
		enc := harness.EncodeRunID(s)
		if id, ok := harness.DecodeRunID(enc); len(enc) < 200 && s != "" && (!ok || id != s) {
			t.Fatalf("round trip of %q: %q %v", s, id, ok)
		}
	})
}
