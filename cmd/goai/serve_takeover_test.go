package main

import (
	"bufio"
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
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/provider/mockprovider"
	"github.com/goai-sdk/goai/provider/scripted"
)

// sseEvent is one delivered event: its log offset and its JSON.
type sseEvent struct {
	id   string
	data string
	ev   event
}

// readSSE reads a durable SSE stream (agui.ReadSSE), calling each(ev) per
// event until the stream ends, each returns false, or the body fails.
func readSSE(body io.Reader, each func(sseEvent) bool) {
	for f, err := range agui.ReadSSE(body) {
		if err != nil {
			return
		}
		var e event
		_ = json.Unmarshal(f.Data, &e)
		if !each(sseEvent{id: f.ID, data: string(f.Data), ev: e}) {
			return
		}
	}
}

// startServeProcess runs goai serve as a child process (so that it can be
// killed with SIGKILL) and returns it and its base URL.
func startServeProcess(t *testing.T, env []string, args ...string) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	cmd := goaiCmd(t, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("goai serve (pid %d) stderr:\n%s", cmd.Process.Pid, stderr.String())
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("goai serve printed no address: %v\n%s", err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("startup line %q", line)
	}
	return cmd, strings.Fields(line[i:])[0], stderr
}

// TestServeTakeoverAfterKill: a goai serve process driving a Claude Code
// run is killed with SIGKILL mid-run. The agent keeps working in its
// sandbox, writing its journal. A second goai serve on the same store and
// data directory takes the run over (recovery re-drives it from its stored
// request: the journal is re-read from the start and aligned with the log),
// and the client that re-attaches with Last-Event-ID sees every event
// exactly once and the run's true end, with the agent launched once.
func TestServeTakeoverAfterKill(t *testing.T) {
	bin := claudeCLI(t)
	const thread, runID = "takeover-thread", "takeover-run-1"
	data := t.TempDir()
	dir := filepath.Join(data, "workspaces", threadDirName(thread))
	path := filepath.Join(dir, "hello.txt")
	write, _ := json.Marshal(map[string]string{"file_path": path, "content": "hi\n"})
	edit, _ := json.Marshal(map[string]string{"file_path": path, "old_string": "hi", "new_string": "hello, world"})
	wq, _ := json.Marshal(string(write))
	eq, _ := json.Marshal(string(edit))
	// The second model turn waits long enough for the first host to be
	// killed while the agent is between its two edits.
	sc, err := scripted.Parse([]byte(fmt.Sprintf(`{"name":"takeover","threadId":"t","messages":[],"tools":[],"middleware":[],"turns":[
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TOOL_CALL_START","toolCallId":"toolu_w","toolCallName":"Write","index":0},{"type":"TOOL_CALL_ARGS","toolCallId":"toolu_w","delta":%s},{"type":"TOOL_CALL_END","toolCallId":"toolu_w"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"delayMs":4000},{"type":"TOOL_CALL_START","toolCallId":"toolu_e","toolCallName":"Edit","index":0},{"type":"TOOL_CALL_ARGS","toolCallId":"toolu_e","delta":%s},{"type":"TOOL_CALL_END","toolCallId":"toolu_e"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED","runId":"r","threadId":"t"},{"type":"TEXT_MESSAGE_START","messageId":"m3","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m3","delta":"Done: hello.txt says hello."},{"type":"TEXT_MESSAGE_END","messageId":"m3"},{"type":"RUN_FINISHED","runId":"r","threadId":"t","finishReason":"stop"}]
]}`, wq, eq)))
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	inner := mockprovider.NewHandler("anthropic", sc, "")
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			calls.Add(1)
		}
		inner.ServeHTTP(w, r)
	}))
	defer model.Close()
	env := []string{
		"ANTHROPIC_BASE_URL=" + model.URL, "ANTHROPIC_API_KEY=dummy-key", "GOAI_CLAUDE_BIN=" + bin,
		"HOME=" + t.TempDir(), "GOAI_LEASE=1s",
	}
	args := []string{"--store", "sqlite:" + filepath.Join(data, "goai.db"), "--model", "claude-code:claude-sonnet-4-5", "--sandbox", "local"}

	// Host 1 streams until the agent's first edit has its result, then is
	// killed.
	host1, base1, _ := startServeProcess(t, env, args...)
	seen := startRun(t, base1, thread, runID, func(e sseEvent) bool { return e.ev.str("type") == "TOOL_CALL_RESULT" })
	if err := host1.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = host1.Wait()
	if seen[len(seen)-1].ev.str("type") != "TOOL_CALL_RESULT" {
		t.Fatalf("host 1's stream ended before the first tool result: %d events", len(seen))
	}

	// Host 2 on the same store and data directory; the client re-attaches
	// with the last offset it saw.
	_, base2, log2 := startServeProcess(t, env, args...)
	var rest []sseEvent
	var firstNew time.Duration
	reattach(t, base2, runID, seen[len(seen)-1].id, func(e sseEvent) {
		if len(rest) == 0 {
			firstNew = time.Since(killed)
		}
		rest = append(rest, e)
	})
	t.Logf("host killed -> successor's first event at the client: %v (lease 1s; the model's next turn is scripted 4 s later); %d events before, %d after", firstNew, len(seen), len(rest))
	if at, ok := logTime(log2.String(), "durable run taken over"); ok {
		t.Logf("host killed -> successor driving the run: %v (lease 1s)", at.Sub(killed))
	}

	all := append(append([]sseEvent(nil), seen...), rest...)
	checkExactlyOnce(t, all)
	s := summarize(eventsOf(all))
	if s.runError != nil {
		t.Fatalf("the taken-over run failed: %v", s.runError)
	}
	if got := all[len(all)-1].ev.str("type"); got != "RUN_FINISHED" {
		t.Errorf("the run ends with %s, want its own RUN_FINISHED", got)
	}
	if strings.Join(s.tools, ",") != "Write,Edit" || len(s.results) != 2 {
		t.Errorf("tool calls %v with %d results, want Write,Edit each with one", s.tools, len(s.results))
	}
	if strings.Count(s.text, "Done: hello.txt says hello.") != 1 {
		t.Errorf("text %q, want the answer once", s.text)
	}
	if fc := s.customs["file.changed"]; len(fc) != 1 || !strings.Contains(fc[0], "+hello, world") {
		t.Errorf("file.changed %v, want one whole-tree diff with the edit", fc)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "hello, world\n" {
		t.Errorf("hello.txt = %q, %v", b, err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("the model was called %d times, want 3 (the agent launched once)", n)
	}
	// The stored log, read from its start, is exactly what the client saw.
	full := post2get(t, base2, runID)
	if len(full) != len(all) {
		t.Fatalf("the log holds %d events, the client saw %d", len(full), len(all))
	}
	for i := range full {
		if full[i].id != all[i].id || full[i].data != all[i].data {
			t.Fatalf("log entry %d = %s %s, the client saw %s %s", i, full[i].id, full[i].data, all[i].id, all[i].data)
		}
	}
}

// post2get reads a run's whole log from its start.
func post2get(t *testing.T, base, runID string) []sseEvent {
	t.Helper()
	res, err := http.Get(base + "/api/chat?runId=" + runID + "&offset=-1")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out []sseEvent
	readSSE(res.Body, func(e sseEvent) bool { out = append(out, e); return true })
	return out
}

func eventsOf(list []sseEvent) []event {
	out := make([]event, len(list))
	for i, e := range list {
		out[i] = e.ev
	}
	return out
}

// checkExactlyOnce fails on a repeated offset or a repeated event: the same
// JSON without its timestamp (CUSTOM file events aside, which may repeat
// when a file changes twice the same way).
func checkExactlyOnce(t *testing.T, all []sseEvent) {
	t.Helper()
	ids := map[string]bool{}
	events := map[string]int{}
	for i, e := range all {
		if ids[e.id] {
			t.Errorf("offset %s delivered twice", e.id)
		}
		ids[e.id] = true
		if e.ev.str("type") == "CUSTOM" && strings.HasPrefix(e.ev.str("name"), "sandbox.") {
			continue
		}
		c := map[string]any{}
		for k, v := range e.ev {
			if k != "timestamp" {
				c[k] = v
			}
		}
		key, _ := json.Marshal(c)
		if j, dup := events[string(key)]; dup {
			t.Errorf("event %d repeats event %d: %s", i, j, key)
		}
		events[string(key)] = i
	}
}

// logTime is the time of the first slog text line holding msg.
func logTime(log, msg string) (time.Time, bool) {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		v, ok := strings.CutPrefix(strings.Fields(line)[0], "time=")
		if !ok {
			return time.Time{}, false
		}
		at, err := time.Parse(time.RFC3339Nano, v)
		return at, err == nil
	}
	return time.Time{}, false
}

// fakeAgent is a stand-in for Claude Code that prints its stream-json
// (an init line, a message, then after a pause a second message and its
// result), so that a bubblewrap sandbox, which sees only the workspace and
// the system, can run it.
const fakeAgent = `#!/bin/sh
cat > /dev/null
say() { printf '%s\n' "$1"; }
say '{"type":"system","subtype":"init","session_id":"fake-session"}'
say '{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"step one. "}]},"session_id":"fake-session"}'
sleep "$(cat agent-sleep 2>/dev/null || echo 4)"
: > finished-marker
say '{"type":"assistant","message":{"id":"msg_2","role":"assistant","content":[{"type":"text","text":"step two."}]},"session_id":"fake-session"}'
say '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"fake-session","usage":{"input_tokens":3,"output_tokens":4}}'
`

// bwrapWorkspace makes a shared git workspace holding the fake agent.
func bwrapWorkspace(t *testing.T) string {
	t.Helper()
	if !bwrapWorks(context.Background()) {
		if os.Getenv("CI") != "" {
			t.Fatal("bubblewrap must work in CI (scripts/setup-sandbox.sh)")
		}
		t.Skip("bubblewrap does not work here")
	}
	ws := t.TempDir()
	for _, name := range []string{"fake-claude.sh", "fake-claude-cancel.sh"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(fakeAgent), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return ws
}

// In the default sandbox (bubblewrap) the agent survives the SIGKILL of
// the server that launched it, and a successor drives its run to its end.
func TestServeTakeoverBubblewrap(t *testing.T) {
	ws := bwrapWorkspace(t)
	data := t.TempDir()
	env := []string{"GOAI_CLAUDE_BIN=./fake-claude.sh", "GOAI_LEASE=1s"}
	args := []string{"--store", "sqlite:" + filepath.Join(data, "goai.db"), "--model", "claude-code:fake", "--sandbox", "bwrap", "--workspace", ws}
	host1, base1, _ := startServeProcess(t, env, args...)
	const runID = "bwrap-run-1"
	seen := startRun(t, base1, "bwrap-thread", runID, func(e sseEvent) bool { return strings.Contains(e.data, "step one") })
	_ = host1.Process.Kill()
	_ = host1.Wait()

	_, base2, _ := startServeProcess(t, env, args...)
	var rest []sseEvent
	reattach(t, base2, runID, seen[len(seen)-1].id, func(e sseEvent) { rest = append(rest, e) })
	all := append(append([]sseEvent(nil), seen...), rest...)
	checkExactlyOnce(t, all)
	s := summarize(eventsOf(all))
	if s.runError != nil || all[len(all)-1].ev.str("type") != "RUN_FINISHED" {
		t.Fatalf("the run did not finish: error %v, last %s", s.runError, all[len(all)-1].data)
	}
	if s.text != "step one. step two." {
		t.Errorf("text %q, want both steps once", s.text)
	}
	if _, err := os.Stat(filepath.Join(ws, "finished-marker")); err != nil {
		t.Errorf("the agent did not finish its work after its server died: %v", err)
	}
}

// A cancel stops a bubblewrapped agent whose server died: the successor
// driving it shares no process namespace with it (and did not start it),
// so only the agent's watchdog can end it. The run ends cancelled.
func TestServeCancelStopsBubblewrappedAgent(t *testing.T) {
	ws := bwrapWorkspace(t)
	if err := os.WriteFile(filepath.Join(ws, "agent-sleep"), []byte("60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A name of its own, so the host can see whether it runs.
	running := func() bool { return exec.Command("pgrep", "-f", "fake-claude-cancel.sh").Run() == nil }
	env := []string{"GOAI_CLAUDE_BIN=./fake-claude-cancel.sh", "GOAI_LEASE=1s"}
	args := []string{"--store", "sqlite:" + filepath.Join(t.TempDir(), "goai.db"), "--model", "claude-code:fake", "--sandbox", "bwrap", "--workspace", ws}
	host1, base1, _ := startServeProcess(t, env, args...)
	const runID = "bwrap-cancel-1"
	seen := startRun(t, base1, "bwrap-thread", runID, func(e sseEvent) bool { return strings.Contains(e.data, "step one") })
	_ = host1.Process.Kill()
	_ = host1.Wait()
	if !running() {
		t.Fatal("the agent died with its server: the test would prove nothing")
	}

	_, base2, log2 := startServeProcess(t, env, args...)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(log2.String(), "taking over a running agent") {
		if time.Now().After(deadline) {
			t.Fatal("the successor did not take the run over")
		}
		time.Sleep(50 * time.Millisecond)
	}
	creq, _ := http.NewRequest(http.MethodPost, base2+"/api/chat/cancel", strings.NewReader(`{"runId":"`+runID+`"}`))
	creq.Header.Set("Content-Type", "application/json")
	cres, err := http.DefaultClient.Do(creq)
	if err != nil {
		t.Fatal(err)
	}
	cres.Body.Close()
	var last event
	reattach(t, base2, runID, seen[len(seen)-1].id, func(e sseEvent) { last = e.ev })
	if last.str("type") != "RUN_ERROR" || last.str("code") != "cancelled" {
		t.Fatalf("the run ends with %v, want RUN_ERROR cancelled", last)
	}
	deadline = time.Now().Add(30 * time.Second)
	for running() {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled agent is still running")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(ws, "finished-marker")); err == nil {
		t.Error("the cancelled agent finished its work")
	}
}

// startRun POSTs a durable run and reads its stream until until says stop
// (or the stream ends); the connection is then closed.
func startRun(t *testing.T, base, thread, runID string, until func(sseEvent) bool) []sseEvent {
	t.Helper()
	body, _ := json.Marshal(runBody(thread, runID, []map[string]any{{"id": "u1", "role": "user", "content": "Create hello.txt, then change it."}}))
	req, _ := http.NewRequest(http.MethodPost, base+"/api/chat", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Run-Id", runID)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var seen []sseEvent
	readSSE(res.Body, func(e sseEvent) bool {
		seen = append(seen, e)
		return !until(e)
	})
	if len(seen) == 0 {
		t.Fatal("the run's stream ended at once")
	}
	return seen
}

// reattach joins a run after offset last, calling each for every event to
// its end.
func reattach(t *testing.T, base, runID, last string, each func(sseEvent)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/chat?runId="+runID, nil)
	req.Header.Set("Last-Event-ID", last)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(res.Body)
		t.Fatalf("re-attach: %s %s", res.Status, msg)
	}
	readSSE(res.Body, func(e sseEvent) bool { each(e); return true })
}
