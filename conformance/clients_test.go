package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// clientServers are the `goai serve` instances one scenario gets, by the
// name the Node tests read from GOAI_CLIENT_URLS, and their wire profile.
// A scripted server serves the scenario's turns in order across requests,
// so every client run gets a fresh server.
var clientServers = []struct{ name, wire string }{
	{"agui-sse", "agui"},
	{"agui-http", "agui"},
	{"agui-http-bare", "agui"},
	{"agui-agent", "agui"},
	{"tanstack-sse", "tanstack"},
	{"tanstack-http", "tanstack"},
	// only for scenarios with a second turn (the resume test)
	{"agui-resume", "agui"},
	{"tanstack-resume", "tanstack"},
}

var servingLine = regexp.MustCompile(`goai serving on (http://\S+)`)

// lockedBuffer collects a server's stderr while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServe starts `goai serve` on a free loopback port and returns the
// chat URL; the server is killed when the test ends.
// Each server keeps its durable run store (the default, SQLite) in its own
// temporary directory.
func startServe(t *testing.T, bin, wire, scenario string) (string, *lockedBuffer) {
	t.Helper()
	store := "sqlite:" + filepath.Join(t.TempDir(), "goai.db")
	// --no-tools: the scenario's own tools only, no agent sandbox, exactly
	// as the reference engine runs it.
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--wire", wire, "--store", store, "--model", "scripted:"+scenario, "--no-tools")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting goai serve: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		for sc.Scan() { // keep draining
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok || u == "" {
			t.Fatalf("goai serve printed no %q line; stderr:\n%s", "goai serving on", stderr.String())
		}
		return u + "/api/chat", stderr
	case <-time.After(15 * time.Second):
		t.Fatalf("goai serve did not start within 15s; stderr:\n%s", stderr.String())
	}
	return "", nil
}

// readableNodeOutput drops stack frames from node's test report.
func readableNodeOutput(out []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "at ") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// clientBatch is how many scenarios one `node --test` run covers: node
// startup and the client imports cost far more than a scenario's run.
const clientBatch = 8

// bareHTTPScenario also gets an unconfigured fetchHttpStream client (a todo
// test; see clients/chatclient.test.mjs).
const bareHTTPScenario = "10-server-tool-then-text"

type clientRun struct {
	Name     string            `json:"name"`
	Scenario string            `json:"scenario"`
	URLs     map[string]string `json:"urls"`
	logs     map[string]*lockedBuffer
}

// TestRealClients runs the real clients, ChatClient of @tanstack/ai-client
// (fetchServerSentEvents, fetchHttpStream) and HttpAgent of @ag-ui/client,
// against `goai serve --model scripted:SCENARIO` for every scenario, on both
// wire profiles, each client run against its own server; see
// clients/*.test.mjs for what they assert. Scenarios go to node in batches
// of clientBatch.
func TestRealClients(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node and goai serve")
	}
	requireReference(t)
	bin := buildGoai(t)
	expected := loadExpected(t)
	files, _ := filepath.Glob("scenarios/*.json")
	sort.Strings(files)
	testFiles, _ := filepath.Glob("clients/*.test.mjs")
	sort.Strings(testFiles)
	if len(testFiles) == 0 {
		t.Fatal("no clients/*.test.mjs")
	}
	var names []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if p := expected[name].Pending; p != "" {
			t.Logf("skipping %s: PENDING %s: %s", name, p, expected[name].Reason)
			continue
		}
		names = append(names, name)
	}
	for i := 0; i < len(names); i += clientBatch {
		batch := names[i:min(i+clientBatch, len(names))]
		label := batch[0]
		if len(batch) > 1 {
			label = batch[0] + ".." + strings.SplitN(batch[len(batch)-1], "-", 2)[0]
		}
		t.Run(label, func(t *testing.T) {
			t.Parallel()
			var runs []clientRun
			for _, name := range batch {
				abs, err := filepath.Abs(filepath.Join("scenarios", name+".json"))
				if err != nil {
					t.Fatal(err)
				}
				r := clientRun{Name: name, Scenario: abs, URLs: map[string]string{}, logs: map[string]*lockedBuffer{}}
				for _, s := range clientServers {
					if s.name == "agui-http-bare" && name != bareHTTPScenario {
						continue
					}
					if strings.HasSuffix(s.name, "-resume") && !resumable(t, abs) {
						continue
					}
					r.URLs[s.name], r.logs[s.name] = startServe(t, bin, s.wire, abs)
				}
				runs = append(runs, r)
			}
			env, _ := json.Marshal(runs)
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
			defer cancel()
			args := append([]string{"--test", "--test-reporter=spec"}, testFiles...)
			cmd := exec.CommandContext(ctx, "node", args...)
			cmd.Env = append(cmd.Environ(), "GOAI_CLIENT_RUNS="+string(env), "NO_COLOR=1", "FORCE_COLOR=0")
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("node --test timed out\n%s", readableNodeOutput(out))
			}
			if err != nil {
				var serverLogs strings.Builder
				for _, r := range runs {
					for _, s := range clientServers {
						if l := r.logs[s.name]; l != nil && strings.TrimSpace(l.String()) != "" {
							fmt.Fprintf(&serverLogs, "--- %s: goai serve (%s) stderr:\n%s\n", r.Name, s.name, strings.TrimSpace(l.String()))
						}
					}
				}
				t.Errorf("real clients failed (%v):\n%s%s", err, failureReport(out), serverLogs.String())
				return
			}
			t.Log(nodeSummary(out))
		})
	}
}

// failureReport keeps the failing part of node's spec report: its summary
// of failing tests, without stack frames and without todo tests.
func failureReport(out []byte) string {
	text := readableNodeOutput(out)
	if i := strings.Index(text, "✖ failing tests:"); i >= 0 {
		text = text[i:]
	}
	var b strings.Builder
	skipping := false
	for _, block := range strings.Split(text, "\ntest at ") {
		skipping = strings.Contains(strings.SplitN(block, "\n", 3)[min(1, len(strings.SplitN(block, "\n", 3))-1)], "# ")
		if skipping {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\ntest at ")
		}
		b.WriteString(block)
	}
	return b.String()
}

// nodeSummary is the counts line of node's report plus the todo tests (known
// issues, reported but not failing).
func nodeSummary(out []byte) string {
	var counts, todos []string
	for _, line := range strings.Split(string(out), "\n") {
		l := strings.TrimSpace(line)
		for _, k := range []string{"tests", "pass", "fail", "skipped", "todo"} {
			if rest, ok := strings.CutPrefix(l, "ℹ "+k+" "); ok {
				counts = append(counts, k+" "+rest)
			}
		}
		if strings.Contains(l, "# ") && (strings.HasPrefix(l, "✖ ") || strings.HasPrefix(l, "✔ ")) && !strings.Contains(l, "# SKIP") && !slices.Contains(todos, "todo: "+l) {
			todos = append(todos, "todo: "+l)
		}
	}
	return strings.Join(append([]string{strings.Join(counts, ", ")}, todos...), "\n")
}

// resumable reports whether a ChatClient could answer the first turn's
// interrupts and get a second turn: more than one turn and no resume batch
// of its own.
func resumable(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sc struct {
		Resume json.RawMessage   `json:"resume"`
		Turns  []json.RawMessage `json:"turns"`
	}
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return len(sc.Turns) > 1 && len(sc.Resume) == 0
}
