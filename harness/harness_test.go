package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/harness"
	"github.com/goai-sdk/goai/provider/mockprovider"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
	"github.com/goai-sdk/goai/workspace"
)

// agentBinary finds a CLI installed by scripts/test.sh into
// testdata/agents; CI must have it, a developer without it skips.
func agentBinary(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "agents", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (scripts/test.sh installs it with npm ci in harness/testdata/agents): %v", name, err)
		}
		t.Skipf("%s not installed: run npm ci in harness/testdata/agents", name)
	}
	return p
}

// mockModel serves turns in a provider's wire format on loopback.
func mockModel(t *testing.T, api string, turns string) string {
	t.Helper()
	sc, err := scripted.Parse([]byte(`{"name":"harness","threadId":"t","messages":[],"tools":[],"middleware":[],"turns":` + turns + `}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mockprovider.NewHandler(api, sc, os.Getenv("GOAI_TEST_RECORD")))
	t.Cleanup(srv.Close)
	return srv.URL + mockprovider.BasePath(api)
}

// gitRepo makes a workspace with one commit, the session baseline.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("add", "README.md")
	run("commit", "-qm", "init")
	return dir
}

// toolCall is a scripted model turn's tool call: start, arguments, end.
func toolCall(id, name string, index int, args any) string {
	a, _ := json.Marshal(args)
	delta, _ := json.Marshal(string(a))
	return fmt.Sprintf(`{"type":"TOOL_CALL_START","toolCallId":%q,"toolCallName":%q,"index":%d},{"type":"TOOL_CALL_ARGS","toolCallId":%q,"delta":%s},{"type":"TOOL_CALL_END","toolCallId":%q}`,
		id, name, index, id, delta, id)
}

func runAgent(t *testing.T, adapter chat.Adapter, dir string, tools ...*chat.Tool) ([]agui.Event, error) {
	t.Helper()
	keep := false
	sb, err := sandbox.Define(sandbox.Definition{
		ID:         "agent",
		Provider:   local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep}),
		FileEvents: sandbox.FileEventsWithDiff,
	})
	if err != nil {
		t.Fatal(err)
	}
	var evs []agui.Event
	var runErr error
	for ev, err := range chat.Stream(context.Background(), chat.Options{
		Adapter:    adapter,
		ThreadID:   "thread-1",
		RunID:      "run-1",
		Messages:   []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("Create hello.txt, then change it.")}},
		Tools:      tools,
		Middleware: []*chat.Middleware{sandbox.WithSandbox(sb, sandbox.Options{})},
	}) {
		if err != nil {
			runErr = err
			break
		}
		evs = append(evs, ev)
	}
	return evs, runErr
}

func custom(evs []agui.Event, name string) []json.RawMessage {
	var out []json.RawMessage
	for _, ev := range evs {
		if ev.Type == agui.Custom && ev.Name == name {
			out = append(out, ev.Value)
		}
	}
	return out
}

func eventTypes(evs []agui.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(string(ev.Type))
		if ev.Type == agui.Custom {
			b.WriteString("(" + ev.Name + ")")
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// checkAgentRun asserts what every harness run must show: the agent's tool
// calls observed with their results, the text, the file events and diffs
// of its edits, the whole-tree diff and the session id.
func checkAgentRun(t *testing.T, harnessName string, evs []agui.Event, dir string, wantTools []string) {
	t.Helper()
	types := eventTypes(evs)
	if !strings.HasPrefix(types, "RUN_STARTED ") || !strings.Contains(types, "RUN_FINISHED") {
		t.Fatalf("stream lacks its run lifecycle: %s", types)
	}
	var tools []string
	results := map[string]bool{}
	for _, ev := range evs {
		switch ev.Type {
		case agui.ToolCallStart:
			tools = append(tools, ev.ToolCallName)
			if ts, _ := ev.Metadata["tanstack"].(map[string]any); ts == nil && ev.Metadata["providerExecuted"] == nil {
				// the engine moves TanStack extras under metadata.tanstack;
				// either place is fine, absence is not
				t.Errorf("tool call %s lacks providerExecuted: %+v", ev.ToolCallName, ev.Metadata)
			}
		case agui.ToolCallResult:
			results[ev.ToolCallID] = true
		}
	}
	if strings.Join(tools, ",") != strings.Join(wantTools, ",") {
		t.Errorf("agent tool calls %v, want %v (stream: %s)", tools, wantTools, types)
	}
	if len(results) != len(wantTools) {
		t.Errorf("%d tool results for %d calls: %s", len(results), len(wantTools), types)
	}
	var text strings.Builder
	for _, ev := range evs {
		if ev.Type == agui.TextMessageContent {
			text.WriteString(ev.Delta)
		}
	}
	if !strings.Contains(text.String(), "Done") {
		t.Errorf("text %q lacks the agent's answer", text.String())
	}
	got, err := os.ReadFile(filepath.Join(dir, "hello.txt"))
	if err != nil || string(got) != "hello, world\n" {
		t.Fatalf("hello.txt = %q, %v; want the edited content", got, err)
	}
	var sawFile bool
	for _, v := range custom(evs, "sandbox.file") {
		if strings.Contains(string(v), "hello.txt") {
			sawFile = true
		}
	}
	if !sawFile {
		t.Errorf("no sandbox.file event for hello.txt: %s", types)
	}
	var sawDiff bool
	for _, v := range custom(evs, "sandbox.file.diff") {
		if strings.Contains(string(v), "hello.txt") && strings.Contains(string(v), "+hello") {
			sawDiff = true
		}
	}
	if !sawDiff {
		t.Errorf("no sandbox.file.diff for hello.txt: %s", types)
	}
	changed := custom(evs, "file.changed")
	if len(changed) != 1 {
		t.Fatalf("%d file.changed events, want 1: %s", len(changed), types)
	}
	var fc struct{ Path, Diff string }
	if err := json.Unmarshal(changed[0], &fc); err != nil {
		t.Fatal(err)
	}
	if fc.Path != "." || !strings.Contains(fc.Diff, "+++ b/hello.txt") || !strings.Contains(fc.Diff, "+hello, world") {
		t.Errorf("file.changed = %+v, want the whole-tree diff adding hello.txt", fc)
	}
	sid := custom(evs, harnessName+".session-id")
	if len(sid) != 1 || !strings.Contains(string(sid[0]), `"sessionId":"`) {
		t.Errorf("session id events %s", sid)
	}
}

func TestClaudeCodeEditsFilesInSandbox(t *testing.T) {
	bin := agentBinary(t, "claude")
	dir := gitRepo(t)
	path := filepath.Join(dir, "hello.txt")
	write := toolCall("toolu_w", "Write", 1, map[string]any{"file_path": path, "content": "hi\n"})
	edit := toolCall("toolu_e", "Edit", 0, map[string]any{"file_path": path, "old_string": "hi", "new_string": "hello, world"})
	add := toolCall("toolu_a", "mcp__tanstack__add", 0, map[string]any{"a": 2, "b": 3})
	turns := `[
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + add + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Creating it."},{"type":"TEXT_MESSAGE_END","messageId":"m1"},
  ` + write + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + edit + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TEXT_MESSAGE_START","messageId":"m3","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m3","delta":"Done: hello.txt says hello."},{"type":"TEXT_MESSAGE_END","messageId":"m3"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"stop","usage":{"promptTokens":12,"completionTokens":5,"totalTokens":17}}]
]`
	base := mockModel(t, "anthropic", turns)
	home := t.TempDir()
	adapter := harness.New(harness.ClaudeCode{Binary: bin}, "claude-sonnet-4-5", harness.Options{Env: map[string]string{
		"ANTHROPIC_BASE_URL": strings.TrimSuffix(base, "/v1"),
		"ANTHROPIC_API_KEY":  "dummy-key",
		"HOME":               home,
	}})
	// A host tool the agent reaches through the bridge: it runs here, once,
	// through the engine's tool path.
	var calls atomic.Int32
	hostAdd := chat.NewTool("add", "Add two numbers", func(ctx context.Context, in struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}) (float64, error) {
		calls.Add(1)
		return in.A + in.B, nil
	})
	evs, err := runAgent(t, adapter, dir, hostAdd)
	if err != nil {
		t.Fatalf("run failed: %v\n%s", err, eventTypes(evs))
	}
	checkAgentRun(t, "claude-code", evs, dir, []string{"add", "Write", "Edit"})
	if n := calls.Load(); n != 1 {
		t.Errorf("host tool ran %d times, want 1", n)
	}
	for _, ev := range evs {
		if ev.Type == agui.ToolCallResult && ev.ToolCallID == "toolu_a" && strings.TrimSpace(ev.Content) != "5" {
			t.Errorf("bridged result %q, want 5", ev.Content)
		}
		if ev.Type == agui.ToolCallStart && ev.ToolCallID == "toolu_a" && ev.Metadata["sandboxObserved"] != nil {
			t.Errorf("bridged call marked as the agent's own: %+v", ev.Metadata)
		}
	}
}

func TestCodexEditsFilesInSandbox(t *testing.T) {
	bin := agentBinary(t, "codex")
	dir := gitRepo(t)
	cmd1 := `printf 'hi\n' > hello.txt`
	cmd2 := `printf 'hello, world\n' > hello.txt`
	call := func(id, cmd string) string {
		return toolCall(id, "exec_command", 0, map[string]any{"cmd": cmd})
	}
	turns := `[
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + call("call_1", cmd1) + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + call("call_2", cmd2) + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TEXT_MESSAGE_START","messageId":"m3","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m3","delta":"Done: hello.txt says hello."},{"type":"TEXT_MESSAGE_END","messageId":"m3"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"stop","usage":{"promptTokens":12,"completionTokens":5,"totalTokens":17}}]
]`
	base := mockModel(t, "openai-responses", turns)
	adapter := harness.New(harness.Codex{Binary: bin}, "gpt-5-codex", harness.Options{Env: map[string]string{
		"OPENAI_BASE_URL": base,
		"OPENAI_API_KEY":  "dummy-key",
		"HOME":            t.TempDir(),
	}})
	evs, err := runAgent(t, adapter, dir)
	if err != nil {
		t.Fatalf("run failed: %v\n%s", err, eventTypes(evs))
	}
	checkAgentRun(t, "codex", evs, dir, []string{"shell", "shell"})
}

func TestHarnessWithoutSandboxFailsBeforeAnyModelCall(t *testing.T) {
	adapter := harness.New(harness.ClaudeCode{Binary: "/nonexistent"}, "m", harness.Options{})
	var err error
	for _, e := range chat.Stream(context.Background(), chat.Options{Adapter: adapter, Messages: []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("hi")}}}) {
		if e != nil {
			err = e
		}
	}
	if err == nil || !strings.Contains(err.Error(), `requires capability "sandbox"`) {
		t.Fatalf("err = %v, want the missing sandbox capability named", err)
	}
}

// countingHandler counts the model requests an agent makes.
type countingHandler struct {
	http.Handler
	n atomic.Int32
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.Handler.ServeHTTP(w, r)
}

// A journaled agent outlives its host: the first host goes away mid-run
// (its context ends without a cancel request), the agent keeps working,
// and a second host with the same run id attaches to the journal instead of
// launching again, and streams the whole run from its start.
func TestJournaledAgentSurvivesItsHost(t *testing.T) {
	bin := agentBinary(t, "claude")
	dir := gitRepo(t)
	path := filepath.Join(dir, "hello.txt")
	write := toolCall("toolu_w", "Write", 0, map[string]any{"file_path": path, "content": "hi\n"})
	edit := toolCall("toolu_e", "Edit", 0, map[string]any{"file_path": path, "old_string": "hi", "new_string": "hello, world"})
	sc, err := scripted.Parse([]byte(`{"name":"journal","threadId":"t","messages":[],"tools":[],"middleware":[],"turns":[
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + write + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"delayMs":1500},` + edit + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TEXT_MESSAGE_START","messageId":"m3","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m3","delta":"Done: hello.txt says hello."},{"type":"TEXT_MESSAGE_END","messageId":"m3"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"stop"}]
]}`))
	if err != nil {
		t.Fatal(err)
	}
	model := &countingHandler{Handler: mockprovider.NewHandler("anthropic", sc, "")}
	srv := httptest.NewServer(model)
	defer srv.Close()
	journalDir := t.TempDir()
	adapter := harness.New(harness.ClaudeCode{Binary: bin}, "claude-sonnet-4-5", harness.Options{
		Journal:    true,
		JournalDir: journalDir,
		Env:        map[string]string{"ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": "dummy-key", "HOME": t.TempDir()},
	})
	keep := false
	sb, err := sandbox.Define(sandbox.Definition{ID: "agent", Provider: local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep}), FileEvents: sandbox.FileEventsWithDiff})
	if err != nil {
		t.Fatal(err)
	}
	opts := func() chat.Options {
		return chat.Options{
			Adapter: adapter, ThreadID: "thread-1", RunID: "run-journal",
			Messages:   []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("Create hello.txt, then change it.")}},
			Middleware: []*chat.Middleware{sandbox.WithSandbox(sb, sandbox.Options{})},
		}
	}

	// Host 1 goes away as soon as the first edit's result arrived.
	ctx, cancel := context.WithCancel(context.Background())
	var first []agui.Event
	for ev, err := range chat.Stream(ctx, opts()) {
		if err != nil {
			break
		}
		first = append(first, ev)
		if ev.Type == agui.ToolCallResult {
			cancel()
		}
	}
	cancel()
	if strings.Contains(eventTypes(first), "RUN_FINISHED") {
		t.Fatalf("host 1 saw the whole run; the test needs it to leave mid-run: %s", eventTypes(first))
	}
	journal := filepath.Join(journalDir, harness.EncodeRunID("run-journal")+".ndjson")
	if _, err := os.Stat(journal); err != nil {
		t.Fatalf("no journal after host 1 left: %v", err)
	}

	// Host 2 attaches: the whole run, from the start, with one launch.
	var second []agui.Event
	for ev, err := range chat.Stream(context.Background(), opts()) {
		if err != nil {
			t.Fatalf("host 2: %v\n%s", err, eventTypes(second))
		}
		second = append(second, ev)
	}
	checkAgentRun(t, "claude-code", second, dir, []string{"Write", "Edit"})
	if n := model.n.Load(); n != 3 {
		t.Errorf("the model was called %d times, want 3 (one agent launch)", n)
	}
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Errorf("journal still present after its sentinel was read: %v", err)
	}
}

func TestJournalSentinelAndEncoding(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"run-1.x", "run-1.x"},
		{"a_b", "a_5fb"},
		{"a/b", "a_2fb"},
		{"..", "_2e_2e"},
		{"é", "_c3_a9"},
	} {
		if got := harness.EncodeRunID(tc.in); got != tc.want {
			t.Errorf("EncodeRunID(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := strings.Repeat("x", 300)
	if got := harness.EncodeRunID(long); len(got) != 200 || harness.EncodeRunID(long+"y") == got {
		t.Errorf("long ids: %d bytes, distinct=%v", len(got), harness.EncodeRunID(long+"y") != got)
	}
	if a, b := harness.JournalNonce("r1"), harness.JournalNonce("r2"); len(a) != 32 || a == b {
		t.Errorf("nonces %q %q", a, b)
	}
}

// An ACP agent from npm (Zed's Claude Code ACP agent, itself driving
// Claude Code) run over stdio in the sandbox, its model being goai
// mock-provider: session updates become text, tool calls and results, and
// its file writes land in the workspace.
func TestACPAgentEditsFilesInSandbox(t *testing.T) {
	bin := agentBinary(t, "claude-code-acp")
	dir := gitRepo(t)
	path := filepath.Join(dir, "hello.txt")
	write := toolCall("toolu_w", "mcp__acp__Write", 0, map[string]any{"file_path": path, "content": "hi\n"})
	edit := toolCall("toolu_e", "mcp__acp__Edit", 0, map[string]any{"file_path": path, "old_string": "hi", "new_string": "hello, world"})
	turns := `[
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + write + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + edit + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TEXT_MESSAGE_START","messageId":"m3","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m3","delta":"Done: hello.txt says hello."},{"type":"TEXT_MESSAGE_END","messageId":"m3"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"stop"}]
]`
	base := mockModelWithHelper(t, turns)
	adapter := harness.New(harness.ACP{Command: shellQuote(bin)}, "claude-sonnet-4-5", harness.Options{Env: map[string]string{
		"ANTHROPIC_BASE_URL": strings.TrimSuffix(base, "/v1"),
		"ANTHROPIC_API_KEY":  "dummy-key",
		"HOME":               t.TempDir(),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"IS_SANDBOX": "1", // Claude Code runs as root only when told it is sandboxed
	}})
	evs, err := runAgent(t, adapter, dir)
	if err != nil {
		t.Fatalf("run failed: %v\n%s", err, eventTypes(evs))
	}
	t.Logf("%s", eventTypes(evs))
	for _, ev := range evs {
		if ev.Type == agui.ToolCallStart || ev.Type == agui.ToolCallResult {
			t.Logf("%s %s %s %.80q", ev.Type, ev.ToolCallID, ev.ToolCallName, ev.Content)
		}
	}
	checkAgentRun(t, "acp", evs, dir, []string{"edit", "edit"})
}

// mockModelWithHelper serves the scripted turns to the main model and a
// short fixed answer to the small helper model Claude Code also calls (for
// summaries and token counts), whose requests would otherwise take turns
// out of the script in no fixed order.
func mockModelWithHelper(t *testing.T, turns string) string {
	t.Helper()
	parse := func(turns string) http.Handler {
		sc, err := scripted.Parse([]byte(`{"name":"harness","threadId":"t","messages":[],"tools":[],"middleware":[],"turns":` + turns + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return mockprovider.NewHandler("anthropic", sc, "")
	}
	main := parse(turns)
	okTurn := `[{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TEXT_MESSAGE_START","messageId":"h","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"h","delta":"ok"},{"type":"TEXT_MESSAGE_END","messageId":"h"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"stop"}]`
	helper := parse("[" + strings.TrimSuffix(strings.Repeat(okTurn+",", 50), ",") + "]")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct{ Model string }
		_ = json.Unmarshal(body, &req)
		if strings.Contains(req.Model, "haiku") {
			helper.ServeHTTP(w, r)
			return
		}
		main.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// The workspace policy holds for Claude Code's own commands: an allowed
// command runs, a denied one is refused and changes nothing.
func TestClaudeCodeFollowsThePolicy(t *testing.T) {
	bin := agentBinary(t, "claude")
	dir := gitRepo(t)
	allowed := toolCall("toolu_ok", "Bash", 0, map[string]any{"command": "echo allowed-ran"})
	denied := toolCall("toolu_no", "Bash", 0, map[string]any{"command": "rm -f README.md"})
	turns := `[
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + allowed + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + denied + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TEXT_MESSAGE_START","messageId":"m3","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m3","delta":"Done."},{"type":"TEXT_MESSAGE_END","messageId":"m3"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"stop"}]
]`
	base := mockModel(t, "anthropic", turns)
	policy, err := workspace.ParsePolicy([]byte(`{"commands":{"allow":["echo *"],"deny":["rm *"]},"default":"ask"}`))
	if err != nil {
		t.Fatal(err)
	}
	adapter := harness.New(harness.ClaudeCode{Binary: bin, Policy: policy}, "claude-sonnet-4-5", harness.Options{Env: map[string]string{
		"ANTHROPIC_BASE_URL": strings.TrimSuffix(base, "/v1"), "ANTHROPIC_API_KEY": "dummy-key", "HOME": t.TempDir(),
	}})
	evs, err := runAgent(t, adapter, dir)
	if err != nil {
		t.Fatalf("run failed: %v\n%s", err, eventTypes(evs))
	}
	results := map[string]agui.Event{}
	for _, ev := range evs {
		if ev.Type == agui.ToolCallResult {
			results[ev.ToolCallID] = ev
		}
	}
	if r := results["toolu_ok"]; !strings.Contains(r.Content, "allowed-ran") {
		t.Errorf("allowed command result %q", r.Content)
	}
	if r := results["toolu_no"]; !strings.Contains(r.Content, "denied") {
		t.Errorf("denied command result %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Errorf("the denied command ran: %v", err)
	}
}
