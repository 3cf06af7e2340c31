package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// With GOAI_TEST_AS_GOAI set the test binary is goai itself, so tests can
// run `goai mcp serve` as a child process.
func TestMain(m *testing.M) {
	if os.Getenv("GOAI_TEST_AS_GOAI") != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

func goaiCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "GOAI_TEST_AS_GOAI=1")
	return cmd
}

func TestParseMCPServers(t *testing.T) {
	getenv := func(k string) string { return map[string]string{"TOK": "s3cret"}[k] }
	servers, err := parseMCPServers(
		[]string{`files=npx -y "@scope/server files" --root '/tmp/a b'`, "remote=https://example.test/mcp"},
		`[{"name":"gh","url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer ${TOK}"},"prefix":false,"timeout":"5s"},{"name":"py","command":["python3","-m","srv"],"args":["--x"],"env":{"K":"${TOK}"}}]`,
		getenv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 4 {
		t.Fatalf("got %d servers", len(servers))
	}
	want := []string{"npx", "-y", "@scope/server files", "--root", "/tmp/a b"}
	byName := map[string]int{}
	for i, s := range servers {
		byName[s.Name] = i
	}
	if got := servers[byName["files"]].Command; strings.Join(got, "|") != strings.Join(want, "|") || !servers[byName["files"]].Prefix {
		t.Errorf("files: %q", got)
	}
	if s := servers[byName["remote"]]; s.URL != "https://example.test/mcp" || len(s.Command) != 0 {
		t.Errorf("remote: %+v", s)
	}
	if s := servers[byName["gh"]]; s.Header.Get("Authorization") != "Bearer s3cret" || s.Prefix || s.CallTimeout != 5*time.Second {
		t.Errorf("gh: %+v", s)
	}
	if s := servers[byName["py"]]; strings.Join(s.Command, " ") != "python3 -m srv --x" || s.Env[0] != "K=s3cret" {
		t.Errorf("py: %+v", s)
	}
	lines, err := parseMCPServers(nil, "# comment\na=cmd one\n\nb=http://127.0.0.1:1/mcp\n", getenv, nil)
	if err != nil || len(lines) != 2 {
		t.Fatalf("newline list: %v %v", lines, err)
	}
	for _, bad := range [][]string{{"noequals"}, {"=cmd"}, {"x="}, {"a b=cmd"}, {"x=cmd 'open"}, {"x=a", "x=b"}} {
		if _, err := parseMCPServers(bad, "", getenv, nil); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	if _, err := parseMCPServers(nil, `[{"name":"x"}]`, getenv, nil); err == nil {
		t.Error("a server without command or url: want an error")
	}
	if _, err := parseMCPServers(nil, `[{"name":`, getenv, nil); err == nil || !strings.Contains(err.Error(), "GOAI_MCP") {
		t.Errorf("bad JSON: %v", err)
	}
}

// goai run offers an MCP server's tools to the scripted model.
func TestRunWithMCP(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is required (scripts/test.sh installs it): %v", err)
	}
	index, _ := filepath.Abs("../../mcp/testdata/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if _, err := os.Stat(index); err != nil {
		t.Fatalf("server-everything missing: run `npm ci` in mcp/testdata/npm (scripts/test.sh does): %v", err)
	}
	sc := `{"name":"mcp","messages":[{"role":"user","content":"echo"}],"turns":[
	  [{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"everything__echo","index":0},
	   {"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"message\":\"via goai run\"}"},
	   {"type":"TOOL_CALL_END","toolCallId":"c1"},
	   {"type":"RUN_FINISHED","finishReason":"tool_calls"}],
	  [{"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"},
	   {"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"ok"},
	   {"type":"TEXT_MESSAGE_END","messageId":"m2"},
	   {"type":"RUN_FINISHED","finishReason":"stop"}]]}`
	path := filepath.Join(t.TempDir(), "sc.json")
	if err := os.WriteFile(path, []byte(sc), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--scenario", path, "--format", "ndjson", "--mcp", "everything=node " + index + " stdio"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"content":"Echo: via goai run"`) {
		t.Fatalf("no echo result in:\n%s\n%s", stdout.String(), stderr.String())
	}
	// A server that is not MCP is a startup error naming it.
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"run", "--scenario", path, "--mcp", "bogus=sh -c 'echo nope'"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `"bogus"`) {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

func connectStdio(t *testing.T, cl *mcp.Client, ws string) *mcp.ClientSession {
	t.Helper()
	cmd := goaiCmd(t, "mcp", "serve", "--stdio", "--sandbox", "local", "--workspace", ws)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// goai mcp serve --stdio, driven by the Go SDK's client.
func TestMCPServeStdio(t *testing.T) {
	ws := t.TempDir()
	cs := connectStdio(t, mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "1"}, nil), ws)
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "write_file") || !strings.Contains(got, "run_command") {
		t.Fatalf("tools: %s", got)
	}
	if text, isErr := callText(t, cs, "write_file", map[string]any{"path": "notes/a.txt", "content": "from mcp\n"}); isErr {
		t.Fatalf("write_file: %s", text)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "notes/a.txt")); err != nil || string(b) != "from mcp\n" {
		t.Fatalf("file on disk: %q %v", b, err)
	}
	if text, isErr := callText(t, cs, "read_file", map[string]any{"path": "../etc/passwd"}); !isErr || !strings.HasPrefix(text, "Tool execution failed: ") {
		t.Fatalf("escape: %s", text)
	}
	// The default policy asks about every command; this client cannot be asked.
	if text, isErr := callText(t, cs, "run_command", map[string]any{"command": "cat notes/a.txt"}); !isErr || !strings.Contains(text, "elicitation") {
		t.Fatalf("run_command without elicitation: %s", text)
	}
	// A client that can ask its user gets the question, and the answer counts.
	var asked []string
	answer := "decline"
	asker := mcp.NewClient(&mcp.Implementation{Name: "asker", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, req.Params.Message)
			return &mcp.ElicitResult{Action: answer}, nil
		},
	})
	cs2 := connectStdio(t, asker, ws)
	if text, isErr := callText(t, cs2, "run_command", map[string]any{"command": "cat notes/a.txt"}); !isErr || !strings.Contains(text, "declined") {
		t.Fatalf("declined: %s", text)
	}
	answer = "accept"
	text, isErr := callText(t, cs2, "run_command", map[string]any{"command": "cat notes/a.txt"})
	if isErr || !strings.Contains(text, "from mcp") {
		t.Fatalf("accepted: %s", text)
	}
	if len(asked) != 2 || !strings.Contains(asked[0], "cat notes/a.txt") {
		t.Fatalf("questions: %q", asked)
	}
}

// goai mcp serve --http: bearer token, Go SDK client.
func TestMCPServeHTTP(t *testing.T) {
	ws := t.TempDir()
	cmd := goaiCmd(t, "mcp", "serve", "--http", "127.0.0.1:0", "--sandbox", "local", "--workspace", ws)
	cmd.Env = append(cmd.Env, "GOAI_MCP_TOKEN=tok-123")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	url := regexp.MustCompile(`http://\S+/mcp`).FindString(line)
	if url == "" || strings.Contains(line, "tok-123") {
		t.Fatalf("banner: %q", line)
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer tok-123")
		return http.DefaultTransport.RoundTrip(r)
	})}
	cl := mcp.NewClient(&mcp.Implementation{Name: "http", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if text, isErr := callText(t, cs, "write_file", map[string]any{"path": "b.txt", "content": "over http"}); isErr {
		t.Fatal(text)
	}
	text, isErr := callText(t, cs, "read_file", map[string]any{"path": "b.txt"})
	var v map[string]any
	if isErr || json.Unmarshal([]byte(text), &v) != nil || !strings.Contains(text, "over http") {
		t.Fatalf("read_file: %s", text)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
