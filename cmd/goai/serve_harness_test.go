package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/provider/mockprovider"
	"github.com/goai-sdk/goai/provider/scripted"
)

// TestServeClaudeCodeAgent: GOAI_MODEL=claude-code:MODEL makes goai serve run
// the real Claude Code CLI (pinned in harness/testdata/agents) in the
// thread's sandbox, its model being goai mock-provider: the stream carries
// the agent's tool call and its result, the sandbox file events of its edit,
// the whole-tree diff and the session id, and the file is in the thread's
// workspace.
func TestServeClaudeCodeAgent(t *testing.T) {
	bin := claudeCLI(t)
	const thread = "agent-thread"
	data := t.TempDir()
	dir := filepath.Join(data, "workspaces", threadDirName(thread))
	args, _ := json.Marshal(map[string]string{"file_path": filepath.Join(dir, "hello.txt"), "content": "hello from the agent\n"})
	delta, _ := json.Marshal(string(args))
	sc, err := scripted.Parse([]byte(fmt.Sprintf(`{"name":"agent","threadId":"t","messages":[],"tools":[],"middleware":[],"turns":[
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TOOL_CALL_START","toolCallId":"toolu_w","toolCallName":"Write","index":0},{"type":"TOOL_CALL_ARGS","toolCallId":"toolu_w","delta":%s},{"type":"TOOL_CALL_END","toolCallId":"toolu_w"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"Wrote hello.txt."},{"type":"TEXT_MESSAGE_END","messageId":"m"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"stop"}]
]}`, delta)))
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(mockprovider.NewHandler("anthropic", sc, ""))
	defer model.Close()
	t.Setenv("ANTHROPIC_BASE_URL", model.URL)
	t.Setenv("ANTHROPIC_API_KEY", "dummy-key")
	t.Setenv("GOAI_CLAUDE_BIN", bin)
	t.Setenv("HOME", t.TempDir()) // Claude Code keeps its state under $HOME

	base, _ := startServeIn(t, data, "--model", "claude-code:claude-sonnet-4-5", "--sandbox", "local")
	evs := post(t, base, runBody(thread, "agent-run-1", []map[string]any{{"id": "u1", "role": "user", "content": "Write hello.txt"}}))
	s := summarize(evs)
	if s.runError != nil {
		t.Fatalf("run failed: %v", s.runError)
	}
	if strings.Join(s.tools, ",") != "Write" || !anyContains(s.results, "hello.txt") {
		t.Errorf("agent tool calls %v, results %v", s.tools, s.results)
	}
	if !strings.Contains(s.text, "Wrote hello.txt") {
		t.Errorf("text %q", s.text)
	}
	if !anyContains(s.customs["sandbox.file"], "hello.txt") {
		t.Errorf("no sandbox.file for hello.txt: %v", s.customs)
	}
	if !anyContains(s.customs["file.changed"], "+hello from the agent") {
		t.Errorf("file.changed %v", s.customs["file.changed"])
	}
	if len(s.customs["claude-code.session-id"]) != 1 {
		t.Errorf("session id events %v", s.customs["claude-code.session-id"])
	}
	if b, err := os.ReadFile(filepath.Join(dir, "hello.txt")); err != nil || string(b) != "hello from the agent\n" {
		t.Errorf("hello.txt in the thread's workspace: %q %v", b, err)
	}
}

// TestServeClaudeCodeAsksApproval: a command the policy leaves to the user
// ("ask") is refused to Claude Code mid-turn and becomes an approval
// interrupt of the run (an approve_command call); once the user approves,
// the resumed run continues the agent's session with the command allowed,
// and the command runs.
func TestServeClaudeCodeAsksApproval(t *testing.T) {
	bin := claudeCLI(t)
	const thread = "ask-thread"
	bash := func(id string) string {
		args, _ := json.Marshal(map[string]string{"command": "touch approved.txt", "description": "create a file"})
		delta, _ := json.Marshal(string(args))
		return fmt.Sprintf(`{"type":"TOOL_CALL_START","toolCallId":%q,"toolCallName":"Bash","index":0},{"type":"TOOL_CALL_ARGS","toolCallId":%q,"delta":%s},{"type":"TOOL_CALL_END","toolCallId":%q}`, id, id, delta, id)
	}
	text := func(id, s string) string {
		return fmt.Sprintf(`{"type":"TEXT_MESSAGE_START","messageId":%q,"role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":%q},{"type":"TEXT_MESSAGE_END","messageId":%q}`, id, id, s, id)
	}
	sc, err := scripted.Parse([]byte(`{"name":"ask","threadId":"t","messages":[],"tools":[],"middleware":[],"turns":[
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + bash("toolu_1") + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + text("m2", "I need your approval to run echo.") + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"stop"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + bash("toolu_2") + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},` + text("m4", "Done: it printed.") + `,{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"stop"}]
]}`))
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(mockprovider.NewHandler("anthropic", sc, ""))
	defer model.Close()
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"commands":{"deny":["rm *"]},"default":"ask"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ANTHROPIC_BASE_URL", model.URL)
	t.Setenv("ANTHROPIC_API_KEY", "dummy-key")
	t.Setenv("GOAI_CLAUDE_BIN", bin)

	base, data := startServe(t, "--model", "claude-code:claude-sonnet-4-5", "--sandbox", "local", "--policy", policy)
	s := summarize(post(t, base, runBody(thread, "ask-run-1", []map[string]any{{"id": "u1", "role": "user", "content": "Print something."}})))
	if s.outcome == nil || s.outcome["type"] != "interrupt" {
		t.Fatalf("outcome %v (error %v, tools %v, results %v, text %q), want an approval interrupt", s.outcome, s.runError, s.tools, s.results, s.text)
	}
	interrupts, _ := s.outcome["interrupts"].([]any)
	if len(interrupts) != 1 {
		t.Fatalf("interrupts %v, want one", s.outcome["interrupts"])
	}
	in, _ := json.Marshal(interrupts[0])
	if !strings.Contains(string(in), "approve_command") || !strings.Contains(string(in), "touch approved.txt") {
		t.Errorf("interrupt %s, want approve_command for the refused command", in)
	}
	approved := filepath.Join(data, "workspaces", threadDirName(thread), "approved.txt")
	if _, err := os.Stat(approved); err == nil {
		t.Errorf("the command ran before approval: %v", s.results)
	}

	body := runBody(thread, "ask-run-2", s.snapshot)
	body["parentRunId"] = "ask-run-1"
	body["resume"] = []any{map[string]any{"interruptId": interrupts[0].(map[string]any)["id"], "status": "resolved", "payload": true}}
	s2 := summarize(post(t, base, body))
	if s2.runError != nil {
		t.Fatalf("resumed run failed: %v", s2.runError)
	}
	if _, err := os.Stat(approved); err != nil || !strings.Contains(s2.text, "Done: it printed.") {
		t.Errorf("resumed run: the approved command did not run (%v); tools %v results %v text %q", err, s2.tools, s2.results, s2.text)
	}
}

// A coding agent in a docker sandbox with no network could never reach its
// model: goai serve refuses to start, naming the setting.
func TestServeRefusesAgentInOfflineDocker(t *testing.T) {
	if os.Getenv("GOAI_TEST_DOCKER") == "" {
		t.Skip("GOAI_TEST_DOCKER is not set")
	}
	code, _, stderr := runGoai(t, "serve", "--addr", "127.0.0.1:0", "--store", "sqlite:"+filepath.Join(t.TempDir(), "goai.db"),
		"--model", "claude-code:claude-sonnet-4-5", "--sandbox", "docker", "--docker-image", envOr("GOAI_TEST_DOCKER_IMAGE", "goai-sandbox-test:1"))
	if code != 2 || !strings.Contains(stderr, "GOAI_DOCKER_NETWORK") {
		t.Errorf("exit %d, stderr %q: want 2 and the GOAI_DOCKER_NETWORK hint", code, stderr)
	}
}

// goai serve sweeps the journals agents left in the workspaces: an old
// orphan's files go at start-up, a recent orphan's stay.
func TestServeSweepsOldJournals(t *testing.T) {
	data := t.TempDir()
	jdir := filepath.Join(data, "workspaces", "some-thread", harnessJournalDir)
	if err := os.MkdirAll(jdir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-3 * time.Hour)
	for name, mtime := range map[string]time.Time{"gone-run.ndjson": old, "gone-run.err": old, "fresh-run.ndjson": time.Now()} {
		p := filepath.Join(jdir, name)
		if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	startServeIn(t, data, "--sandbox", "local")
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, errGone := os.Stat(filepath.Join(jdir, "gone-run.ndjson"))
		if os.IsNotExist(errGone) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old orphan journal was not swept")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(jdir, "gone-run.err")); !os.IsNotExist(err) {
		t.Errorf("the orphan's stderr sidecar is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(jdir, "fresh-run.ndjson")); err != nil {
		t.Errorf("a recent orphan's journal was swept: %v", err)
	}
}

// claudeCLI is the Claude Code CLI that scripts/test.sh installs in
// harness/testdata/agents; CI must have it, a developer without it skips.
func claudeCLI(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../../harness/testdata/agents/node_modules/.bin/claude")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Claude Code is not installed (scripts/test.sh runs npm ci in harness/testdata/agents): %v", err)
		}
		t.Skip("Claude Code not installed: npm ci in harness/testdata/agents")
	}
	return bin
}
