package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// With GOAI_MCP_STDIO_SERVER set the test binary is a stdio MCP server
// offering testTools, for the TypeScript client's stdio check.
func TestMain(m *testing.M) {
	if os.Getenv("GOAI_MCP_STDIO_SERVER") != "" {
		srv, err := New(testTools(), Options{})
		if err != nil {
			panic(err)
		}
		if err := ServeStdio(context.Background(), srv); err != nil {
			os.Exit(1)
		}
		return
	}
	goleak.VerifyTestMain(m)
}

type addIn struct{ A, B float64 }

// testTools: a string result, an object result, a failing tool, a tool with
// a non-object input schema, and an image result.
func testTools() []*chat.Tool {
	return []*chat.Tool{
		chat.NewTool("greet", "Greets", func(_ context.Context, in struct{ Name string }) (string, error) {
			return "hello " + in.Name, nil
		}),
		chat.NewTool("add", "Adds", func(_ context.Context, in addIn) (map[string]float64, error) {
			return map[string]float64{"sum": in.A + in.B}, nil
		}),
		chat.NewTool("fail", "Fails", func(context.Context, struct{}) (string, error) {
			return "", errors.New("disk on fire")
		}),
		{Name: "loose", Description: "Takes anything", InputSchema: json.RawMessage(`{"type":"string"}`), Execute: func(_ context.Context, args json.RawMessage) (any, error) {
			return []int{1, 2}, nil
		}},
		{Name: "pixel", Description: "An image", InputSchema: json.RawMessage(`{"type":"object"}`), Execute: func(context.Context, json.RawMessage) (any, error) {
			return []agui.ContentPart{{Type: "text", Content: "a pixel"}, {Type: "image", Source: &agui.Source{Type: "data", Value: "iVBORw0KGgo=", MimeType: "image/png"}}}, nil
		}},
	}
}

var testCalls = `[["greet",{"Name":"ts"}],["add",{"A":2,"B":3}],["fail",{}],["loose",{}],["pixel",{}],["nope",{}]]`

type tsReport struct {
	ServerInfo struct{ Name, Version string } `json:"serverInfo"`
	Tools      []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	Calls map[string]struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
		} `json:"content"`
		IsError bool   `json:"isError"`
		Thrown  string `json:"thrown"`
	} `json:"calls"`
	WrongToken *struct {
		Connected bool   `json:"connected"`
		Code      *int   `json:"code"`
		Message   string `json:"message"`
	} `json:"wrongToken"`
	NoTokenStatus int `json:"noTokenStatus"`
}

func npmDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is required (scripts/test.sh installs it): %v", err)
	}
	dir, _ := filepath.Abs("../testdata/npm")
	if _, err := os.Stat(filepath.Join(dir, "node_modules/@modelcontextprotocol/sdk/package.json")); err != nil {
		t.Fatalf("@modelcontextprotocol/sdk missing: run `npm ci` in mcp/testdata/npm (scripts/test.sh does): %v", err)
	}
	return dir
}

func runTSClient(t *testing.T, token string, args ...string) tsReport {
	t.Helper()
	dir := npmDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(dir, "ts-client.mjs")}, args...)...)
	cmd.Env = append(os.Environ(), "GOAI_MCP_TOKEN="+token, "GOAI_MCP_CALLS="+testCalls, "GOAI_MCP_STDIO_SERVER=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ts client: %v\n%s", err, stderr.String())
	}
	var rep tsReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("ts client output: %v\n%s", err, stdout.String())
	}
	return rep
}

func checkReport(t *testing.T, rep tsReport, serverName string) {
	t.Helper()
	if rep.ServerInfo.Name != serverName {
		t.Errorf("serverInfo %+v", rep.ServerInfo)
	}
	if len(rep.Tools) != 5 {
		t.Fatalf("tools: %+v", rep.Tools)
	}
	for _, tl := range rep.Tools {
		if tl.Name == "loose" && string(tl.InputSchema) != `{"type":"object","properties":{}}` {
			t.Errorf("non-object schema not replaced: %s", tl.InputSchema)
		}
	}
	text := func(name string) string {
		c := rep.Calls[name]
		if len(c.Content) == 0 {
			return ""
		}
		return c.Content[0].Text
	}
	if got := text("greet"); got != "hello ts" {
		t.Errorf("greet: %q", got)
	}
	if got := text("add"); got != `{"sum":5}` {
		t.Errorf("add: %q", got)
	}
	if c := rep.Calls["fail"]; !c.IsError || text("fail") != "Tool execution failed: disk on fire" {
		t.Errorf("fail: %+v", c)
	}
	if got := text("loose"); got != `[1,2]` {
		t.Errorf("loose: %q", got)
	}
	if c := rep.Calls["pixel"]; len(c.Content) != 2 || c.Content[1].Type != "image" || c.Content[1].MimeType != "image/png" || c.Content[1].Data != "iVBORw0KGgo=" {
		t.Errorf("pixel: %+v", c)
	}
	if c := rep.Calls["nope"]; !strings.Contains(c.Thrown, "Unknown tool: nope") {
		t.Errorf("unknown tool: %+v", c)
	}
}

// The official TypeScript client against a bridge (Streamable HTTP, bearer).
func TestTypeScriptClientHTTP(t *testing.T) {
	tools := testTools()
	srv, err := New(tools, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Listen(srv, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep := runTSClient(t, b.Token(), "http", b.URL)
	checkReport(t, rep, "goai")
	if rep.WrongToken == nil || rep.WrongToken.Connected || rep.WrongToken.Code == nil || *rep.WrongToken.Code != 401 {
		t.Errorf("wrong token: %+v", rep.WrongToken)
	}
	if rep.NoTokenStatus != 401 {
		t.Errorf("no token: %d", rep.NoTokenStatus)
	}
}

// The official TypeScript client against goai over stdio (this test binary).
func TestTypeScriptClientStdio(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, runTSClient(t, "", "stdio", exe), "goai")
}

// The Go SDK's client against a bridge.
func TestGoClient(t *testing.T) {
	b, err := StartBridge(specs(testTools()), BridgeOptions{Call: direct(testTools())})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: bearer{tr, b.Token()}}
	cl := mcp.NewClient(&mcp.Implementation{Name: "go-check", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.URL, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Name; got != "tanstack" {
		t.Errorf("server name %q", got)
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 5 {
		t.Fatalf("list: %v %v", lt, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"Name": "go"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "hello go" {
		t.Fatalf("greet: %+v %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{}})
	if err != nil || !res.IsError || res.Content[0].(*mcp.TextContent).Text != "Tool execution failed: disk on fire" {
		t.Fatalf("fail: %+v %v", res, err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope"}); err == nil || !strings.Contains(err.Error(), "Unknown tool: nope") {
		t.Fatalf("unknown: %v", err)
	}
}

func TestBridgeAuth(t *testing.T) {
	b, err := StartBridge(specs(testTools()), BridgeOptions{Call: direct(testTools())})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.Token()) != 48 || !strings.HasPrefix(b.URL, "http://127.0.0.1:") || !strings.HasSuffix(b.URL, "/mcp") {
		t.Fatalf("token %d chars, url %s", len(b.Token()), b.URL)
	}
	if strings.Contains(b.String(), b.Token()) {
		t.Fatal("String leaks the token")
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, auth := range []string{"", "Bearer", "Bearer " + strings.Repeat("0", 48), "Bearer " + b.Token() + "x", "Basic " + b.Token()} {
		req, _ := http.NewRequest(http.MethodPost, b.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d", auth, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, b.URL, strings.NewReader("not json"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+b.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("non-JSON body: status %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestNewRejectsDuplicates(t *testing.T) {
	tools := testTools()
	if _, err := New(append(tools, tools[0]), Options{}); err == nil || !strings.Contains(err.Error(), `"greet"`) {
		t.Fatalf("got %v", err)
	}
}

type bearer struct {
	base  http.RoundTripper
	token string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func specs(tools []*chat.Tool) []chat.ToolSpec {
	out := make([]chat.ToolSpec, len(tools))
	for i, t := range tools {
		out[i] = chat.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	}
	return out
}

func direct(tools []*chat.Tool) CallFunc {
	return func(ctx context.Context, name string, args json.RawMessage) (any, error) {
		for _, t := range tools {
			if t.Name == name {
				return t.Execute(ctx, args)
			}
		}
		return nil, errors.New("unreachable")
	}
}
