package mcpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/scripted"
	"go.uber.org/goleak"
)

// The test binary doubles as a misbehaving stdio MCP server: with
// GOAI_FAKE_MCP set it serves that mode instead of running tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv("GOAI_FAKE_MCP"); mode != "" {
		fakeServer(mode, os.Getenv("GOAI_FAKE_MCP_STATE"))
		return
	}
	goleak.VerifyTestMain(m)
}

// fakeServer speaks just enough line-delimited JSON-RPC to pass the
// handshake, then misbehaves as mode says:
//
//	dup: lists two tools named "twin"
//	huge: answers tools/call with a 100 MB text
//	hang-once / die-once: the first process (no state file yet) never
//	  answers tools/call / exits on it; later ones answer "ok"
func fakeServer(mode, state string) {
	first := false
	if state != "" {
		if _, err := os.Stat(state); errors.Is(err, os.ErrNotExist) {
			first = true
			_ = os.WriteFile(state, []byte("x"), 0o600)
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	reply := func(id json.RawMessage, result string) {
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, result)
		out.Flush()
	}
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		switch req.Method {
		case "initialize":
			reply(req.ID, fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`, req.Params.ProtocolVersion))
		case "tools/list":
			second := "solo"
			if mode == "dup" {
				second = "twin"
			}
			reply(req.ID, `{"tools":[{"name":"twin","inputSchema":{"type":"object"}},{"name":"`+second+`","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			switch {
			case mode == "huge":
				fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, req.ID)
				chunk := strings.Repeat("x", 1<<20)
				for range 100 {
					if _, err := out.WriteString(chunk); err != nil {
						return
					}
				}
				out.WriteString(`"}]}}` + "\n")
				out.Flush()
			case mode == "hang-once" && first:
				select {}
			case mode == "die-once" && first:
				os.Exit(3)
			default:
				reply(req.ID, `{"content":[{"type":"text","text":"ok"}]}`)
			}
		default:
			reply(req.ID, `{}`)
		}
	}
}

// fake is a Server running this test binary in a fake mode.
func fake(t *testing.T, mode string) Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Server{
		Name:    "fake",
		Command: []string{exe},
		Env:     []string{"GOAI_FAKE_MCP=" + mode, "GOAI_FAKE_MCP_STATE=" + filepath.Join(t.TempDir(), "state")},
	}
}

// everythingDir is the installed @modelcontextprotocol/server-everything.
func everythingDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is required (scripts/test.sh installs it): %v", err)
	}
	dir, _ := filepath.Abs("../testdata/npm/node_modules/@modelcontextprotocol/server-everything/dist")
	if _, err := os.Stat(filepath.Join(dir, "index.js")); err != nil {
		t.Fatalf("server-everything missing: run `npm ci` in mcp/testdata/npm (scripts/test.sh does): %v", err)
	}
	return dir
}

// startEverythingHTTP runs server-everything's Streamable HTTP transport on
// a free loopback port and returns its endpoint once it accepts requests.
func startEverythingHTTP(t *testing.T) string {
	t.Helper()
	dir := everythingDir(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("node", filepath.Join(dir, "index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return url
		}
		select {
		case <-exited:
			t.Fatal("server-everything (streamableHttp) exited before listening")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %d: %v", port, err)
		}
	}
}

// call is one tool call a scripted model turn makes.
type call struct{ id, name, args string }

// runChat streams a chat whose model first calls calls, then answers "done".
func runChat(t *testing.T, tools []*chat.Tool, calls ...call) []agui.Event {
	t.Helper()
	var turn []scripted.Item
	turn = append(turn, scripted.Item{Event: agui.Event{Type: agui.RunStarted, Model: "scripted-1"}})
	for i, c := range calls {
		i := i
		turn = append(turn,
			scripted.Item{Event: agui.Event{Type: agui.ToolCallStart, ToolCallID: c.id, ToolCallName: c.name, Index: &i, Model: "scripted-1"}},
			scripted.Item{Event: agui.Event{Type: agui.ToolCallArgs, ToolCallID: c.id, Delta: c.args, Model: "scripted-1"}},
			scripted.Item{Event: agui.Event{Type: agui.ToolCallEnd, ToolCallID: c.id, Model: "scripted-1"}},
		)
	}
	turn = append(turn, scripted.Item{Event: agui.Event{Type: agui.RunFinished, FinishReason: agui.FinishToolCalls, Model: "scripted-1"}})
	final := []scripted.Item{
		{Event: agui.Event{Type: agui.RunStarted, Model: "scripted-1"}},
		{Event: agui.Event{Type: agui.TextMessageStart, MessageID: "m2", Role: "assistant", Model: "scripted-1"}},
		{Event: agui.Event{Type: agui.TextMessageContent, MessageID: "m2", Delta: "done", Model: "scripted-1"}},
		{Event: agui.Event{Type: agui.TextMessageEnd, MessageID: "m2", Model: "scripted-1"}},
		{Event: agui.Event{Type: agui.RunFinished, FinishReason: agui.FinishStop, Model: "scripted-1"}},
	}
	sc := &scripted.Scenario{Name: "mcp", Turns: [][]scripted.Item{turn, final}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var evs []agui.Event
	for ev, err := range chat.Stream(ctx, chat.Options{
		Adapter:  scripted.New(sc),
		Messages: []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("use the tools")}},
		Tools:    tools,
	}) {
		if err != nil {
			t.Fatalf("run failed: %v", err)
		}
		evs = append(evs, ev)
	}
	if last := evs[len(evs)-1]; last.Type != agui.RunFinished {
		t.Fatalf("run ended with %s (%s)", last.Type, last.Message)
	}
	return evs
}

// results maps tool call ids to their TOOL_CALL_RESULT events.
func results(evs []agui.Event) map[string]agui.Event {
	out := map[string]agui.Event{}
	for _, ev := range evs {
		if ev.Type == agui.ToolCallResult {
			out[ev.ToolCallID] = ev
		}
	}
	return out
}

func isErrorResult(ev agui.Event) bool {
	ts, _ := ev.Metadata["tanstack"].(map[string]any)
	return ts["state"] == "output-error"
}

// gone waits until no process of group pgid is left.
func gone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still alive", pgid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
