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

// TestAGUIProfileNoSilentFailures checks the agui profile on the cases where
// 0.58.0 fails silently (issue 17 scenarios 62-66; the tanstack profile
// reproduces 0.58.0 in TestDifferential): one RUN_STARTED first and one
// terminal event last, every text message in MESSAGES_SNAPSHOT, and a
// TOOL_CALL_RESULT saying why for a tool call that did not run.
func TestAGUIProfileNoSilentFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("builds goai")
	}
	bin := buildGoai(t)
	type event struct {
		Type       string          `json:"type"`
		ToolCallID string          `json:"toolCallId"`
		Content    string          `json:"content"`
		Messages   json.RawMessage `json:"messages"`
	}
	cases := map[string]func(t *testing.T, evs []event){
		"62-empty-turn": func(t *testing.T, evs []event) {
			if len(evs) != 2 || evs[1].Type != "RUN_FINISHED" {
				t.Fatalf("an empty turn must give RUN_STARTED, RUN_FINISHED: %v", evs)
			}
		},
		"63-empty-turn-after-tool": func(t *testing.T, evs []event) {},
		"64-two-texts-then-approval": func(t *testing.T, evs []event) {
			for _, e := range evs {
				if e.Type != "MESSAGES_SNAPSHOT" {
					continue
				}
				var msgs []struct {
					ID        string          `json:"id"`
					Content   string          `json:"content"`
					ToolCalls json.RawMessage `json:"toolCalls"`
				}
				if err := json.Unmarshal(e.Messages, &msgs); err != nil {
					t.Fatal(err)
				}
				if len(msgs) != 3 || msgs[1].ID != "msg_a1" || msgs[1].Content != "Step one." || msgs[1].ToolCalls != nil ||
					msgs[2].ID != "msg_a2" || msgs[2].Content != "Step two." || msgs[2].ToolCalls == nil {
					t.Fatalf("MESSAGES_SNAPSHOT must keep both text messages, the tool call on the second: %s", e.Messages)
				}
				return
			}
			t.Fatal("no MESSAGES_SNAPSHOT")
		},
		"65-length-tool-call": func(t *testing.T, evs []event) {
			for _, e := range evs {
				if e.Type == "TOOL_CALL_RESULT" && e.ToolCallID == "call_1" {
					if !strings.Contains(e.Content, `Tool call not executed: the model's output was cut off by its length limit`) {
						t.Fatalf("result %q does not say why", e.Content)
					}
					return
				}
			}
			t.Fatal("the cut-off tool call got no TOOL_CALL_RESULT")
		},
		"66-structured-loop-error": func(t *testing.T, evs []event) {
			if evs[len(evs)-1].Type != "RUN_ERROR" {
				t.Fatalf("want RUN_ERROR last: %v", evs)
			}
		},
	}
	for name, check := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, format := range []string{"sse", "ndjson"} {
				out := runCmd(t, bin, "run", "--format", format, "--scenario", filepath.Join("scenarios", name+".json"))
				var evs []event
				for _, line := range strings.Split(string(out.stdout), "\n") {
					line = strings.TrimPrefix(line, "data: ")
					if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "event:") {
						continue
					}
					var e event
					if err := json.Unmarshal([]byte(line), &e); err != nil {
						t.Fatalf("%s line %q: %v", format, line, err)
					}
					evs = append(evs, e)
				}
				if len(evs) < 2 || evs[0].Type != "RUN_STARTED" {
					t.Fatalf("%s: the stream must start with RUN_STARTED: %v", format, evs)
				}
				starts, terminals := 0, 0
				for _, e := range evs {
					switch e.Type {
					case "RUN_STARTED":
						starts++
					case "RUN_FINISHED", "RUN_ERROR":
						terminals++
					}
				}
				if last := evs[len(evs)-1].Type; starts != 1 || terminals != 1 || (last != "RUN_FINISHED" && last != "RUN_ERROR") {
					t.Fatalf("%s: want one RUN_STARTED and one terminal event, last: %v", format, evs)
				}
				check(t, evs)
			}
		})
	}
}
