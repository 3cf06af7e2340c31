package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// expectedDiff is a deliberate difference from the reference, documented in
// DIFFERENCES.md. Scenarios listed here must still differ (a fixed bug that
// reappears is caught by the scenario's own assertions elsewhere).
type expectedDiff struct {
	Events bool   `json:"events"`
	Hooks  bool   `json:"hooks"`
	Reason string `json:"reason"`
	// Pending names the open issue that implements the scenario's feature;
	// the scenario is skipped, loudly, until then.
	Pending string `json:"pending,omitempty"`
}

func buildGoai(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "goai")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/goai")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building goai: %v\n%s", err, out)
	}
	return bin
}

func requireReference(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is required for the differential tests (scripts/test.sh installs it): %v", err)
	}
	if _, err := os.Stat("reference/node_modules/@tanstack/ai/package.json"); err != nil {
		t.Fatalf("reference packages missing: run `npm ci` in conformance/reference (scripts/test.sh does): %v", err)
	}
}

type runOut struct {
	stdout []byte
	hooks  []byte
}

func runCmd(t *testing.T, name string, args ...string) runOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v timed out", name, args)
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() >= 2 {
		t.Fatalf("%s %v: exit %d\n%s", name, args, ee.ExitCode(), stderr.String())
	}
	var hooks []byte
	for _, line := range strings.Split(stderr.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "HOOKS: "); ok {
			hooks = []byte(rest)
		}
	}
	return runOut{stdout: stdout.Bytes(), hooks: hooks}
}

func loadExpected(t *testing.T) map[string]expectedDiff {
	t.Helper()
	b, err := os.ReadFile("expected-differences.json")
	if err != nil {
		return nil
	}
	var m map[string]expectedDiff
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("expected-differences.json: %v", err)
	}
	return m
}

// TestDifferential runs every scenario through `goai run --wire tanstack`
// and the reference engine, and compares events and hook sequences.
func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("differential tests run the reference engine")
	}
	requireReference(t)
	bin := buildGoai(t)
	expected := loadExpected(t)
	files, _ := filepath.Glob("scenarios/*.json")
	sort.Strings(files)
	if len(files) < 30 {
		t.Fatalf("only %d scenarios", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			if p := expected[name].Pending; p != "" {
				t.Skipf("PENDING %s: %s", p, expected[name].Reason)
			}
			t.Parallel()
			ref := runCmd(t, "node", "reference/runner.mjs", f)
			got := runCmd(t, bin, "run", "--wire", "tanstack", "--scenario", f)
			refN, err := Normalize(ref.stdout, "sse")
			if err != nil {
				t.Fatalf("normalizing reference output: %v", err)
			}
			gotN, err := Normalize(got.stdout, "sse")
			if err != nil {
				t.Fatalf("normalizing goai output: %v\n%s", err, got.stdout)
			}
			exp := expected[name]
			if d := Diff(refN, gotN); d != "" && !exp.Events {
				t.Errorf("events differ (- reference, + goai):\n%s", d)
			} else if d == "" && exp.Events {
				t.Errorf("events match the reference but expected-differences.json says they differ; update it")
			}
			if ref.hooks != nil || got.hooks != nil {
				refH, err1 := NormalizeJSONArray(ref.hooks, Options{})
				gotH, err2 := NormalizeJSONArray(got.hooks, Options{})
				if err1 != nil || err2 != nil {
					t.Fatalf("normalizing hooks: %v / %v", err1, err2)
				}
				if d := Diff(refH, gotH); d != "" && !exp.Hooks {
					t.Errorf("hooks differ (- reference, + goai):\n%s", d)
				} else if d == "" && exp.Hooks {
					t.Errorf("hooks match the reference but expected-differences.json says they differ; update it")
				}
			}
		})
	}
}

// TestAGUIProfileVerifies checks that the default agui-profile stream of
// every scenario passes the AG-UI client's own verifier and zod schemas.
func TestAGUIProfileVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	requireReference(t)
	bin := buildGoai(t)
	expected := loadExpected(t)
	files, _ := filepath.Glob("scenarios/*.json")
	sort.Strings(files)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			if p := expected[name].Pending; p != "" {
				t.Skipf("PENDING %s: %s", p, expected[name].Reason)
			}
			t.Parallel()
			got := runCmd(t, bin, "run", "--scenario", f)
			cmd := exec.Command("node", "reference/verify-agui.mjs")
			cmd.Stdin = bytes.NewReader(got.stdout)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("AG-UI verifier rejected the agui profile: %v\n%s\nstream:\n%s", err, out, got.stdout)
			}
		})
	}
}
