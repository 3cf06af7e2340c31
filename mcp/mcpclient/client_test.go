package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func toolByName(t *testing.T, tools []*chat.Tool, name string) *chat.Tool {
	t.Helper()
	for _, x := range tools {
		if x.Name == name {
			return x
		}
	}
	names := make([]string, len(tools))
	for i, x := range tools {
		names[i] = x.Name
	}
	t.Fatalf("no tool %q among %v", name, names)
	return nil
}

// checkEverything lists server-everything's tools and calls them from a
// scripted chat: text, structured content, an image, and an isError result.
func checkEverything(t *testing.T, srv Server) {
	ctx := context.Background()
	c, err := Connect(ctx, srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools := c.Tools()
	sum := toolByName(t, tools, "everything__get-sum")
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(sum.InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties["a"] == nil || schema.Properties["b"] == nil {
		t.Fatalf("get-sum input schema not passed through: %s (%v)", sum.InputSchema, err)
	}
	toolByName(t, tools, "everything__get-structured-content")
	toolByName(t, tools, "everything__get-tiny-image")

	evs := runChat(t, tools,
		call{"c1", "everything__echo", `{"message":"hello mcp"}`},
		call{"c2", "everything__get-sum", `{"a":2,"b":40}`},
		call{"c3", "everything__get-structured-content", `{"location":"Chicago"}`},
		call{"c4", "everything__get-tiny-image", `{}`},
		call{"c5", "everything__get-sum", `{"a":"two"}`},
	)
	res := results(evs)
	if got := res["c1"].Content; got != "Echo: hello mcp" {
		t.Errorf("echo: %q", got)
	}
	if got := res["c2"].Content; !strings.Contains(got, "42") || isErrorResult(res["c2"]) {
		t.Errorf("get-sum: %q", got)
	}
	var weather struct {
		Temperature float64 `json:"temperature"`
		Conditions  string  `json:"conditions"`
	}
	if err := json.Unmarshal([]byte(res["c3"].Content), &weather); err != nil || weather.Temperature != 36 || weather.Conditions == "" {
		t.Errorf("structured content: %q (%v)", res["c3"].Content, err)
	}
	var parts []agui.ContentPart
	if err := json.Unmarshal([]byte(res["c4"].Content), &parts); err != nil {
		t.Fatalf("image result is not content parts: %.200q", res["c4"].Content)
	}
	var image *agui.ContentPart
	for i := range parts {
		if parts[i].Type == "image" {
			image = &parts[i]
		}
	}
	if image == nil || image.Source == nil || image.Source.MimeType != "image/png" || !strings.HasPrefix(image.Source.Value, "iVBOR") {
		t.Errorf("image part: %.300s", res["c4"].Content)
	}
	if !isErrorResult(res["c5"]) || !strings.Contains(strings.ToLower(res["c5"].Content), "invalid") {
		t.Errorf("an isError result should be a tool error: %s %v", res["c5"].Content, res["c5"].Metadata)
	}
}

func TestEverythingStdio(t *testing.T) {
	dir := everythingDir(t)
	checkEverything(t, Server{Name: "everything", Command: []string{"node", filepath.Join(dir, "index.js"), "stdio"}, Prefix: true})
}

func TestEverythingStreamableHTTP(t *testing.T) {
	url := startEverythingHTTP(t)
	checkEverything(t, Server{Name: "everything", URL: url, Prefix: true})
}

// goServer serves an SDK server over Streamable HTTP behind a bearer token.
func goServer(t *testing.T, srv *mcp.Server, token string) string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestHeadersAndListChanged(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "go", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "first", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "one"}}}, nil
	})
	url := goServer(t, srv, "s3cret")
	ctx := context.Background()
	if _, err := Connect(ctx, Server{Name: "go", URL: url}); err == nil || !strings.Contains(err.Error(), "go") {
		t.Fatalf("no token: want a connect error naming the server, got %v", err)
	}
	c, err := Connect(ctx, Server{Name: "go", URL: url, Header: http.Header{"Authorization": {"Bearer s3cret"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := len(c.Tools()); n != 1 {
		t.Fatalf("want 1 tool, got %d", n)
	}
	changed := c.Changed()
	srv.AddTool(&mcp.Tool{Name: "second", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "two"}}}, nil
	})
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("tool list not re-read after notifications/tools/list_changed")
	}
	second := toolByName(t, c.Tools(), "second")
	if v, err := second.Execute(ctx, json.RawMessage(`{}`)); err != nil || v != "two" {
		t.Fatalf("second: %v %v", v, err)
	}
}

func TestNotMCPCommand(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	_, err := Connect(context.Background(), Server{
		Name:           "shell",
		Command:        []string{"sh", "-c", `echo $$ > "$0"; sleep 300 & echo "this is not json-rpc"; wait`, pidFile},
		ConnectTimeout: 20 * time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), `"shell"`) {
		t.Fatalf("want a handshake error naming the server, got %v", err)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pgid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	gone(t, pgid) // the shell and its sleep
}

func TestNeverAnswers(t *testing.T) {
	_, err := Connect(context.Background(), Server{Name: "mute", Command: []string{"sleep", "300"}, ConnectTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Fatalf("got %v", err)
	}
}

func TestMalformedJSONRPC(t *testing.T) {
	for _, reply := range []string{`{"jsonrpc":"2.0","id":1,"result":{}}trailing`, `["not","a","message"]`} {
		_, err := Connect(context.Background(), Server{
			Name:           "garbled",
			Command:        []string{"sh", "-c", `read line; echo "$0"; sleep 300`, reply},
			ConnectTimeout: 20 * time.Second,
		})
		if err == nil || !strings.Contains(err.Error(), `"garbled"`) {
			t.Fatalf("%s: got %v", reply, err)
		}
		t.Logf("%s: %v", reply, err)
	}
}

func TestDuplicateToolNames(t *testing.T) {
	_, err := Connect(context.Background(), fake(t, "dup"))
	if err == nil || !strings.Contains(err.Error(), `two tools are named "twin"`) {
		t.Fatalf("got %v", err)
	}
}

func TestHugeResultIsBounded(t *testing.T) {
	srv := fake(t, "huge")
	srv.MaxMessageBytes = 1 << 20
	c, err := Connect(context.Background(), srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	evs := runChat(t, c.Tools(), call{"c1", "twin", `{}`})
	res := results(evs)["c1"]
	if !isErrorResult(res) || len(res.Content) > 4096 {
		t.Fatalf("want a short tool error, got %.200q", res.Content)
	}
	// The next call starts a fresh server (which again answers too much).
	if _, err := c.Call(context.Background(), "twin", nil); err == nil {
		t.Fatal("want an error")
	}
}

func TestHugeHTTPResultIsBounded(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch req.Method {
		case "initialize":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"big","version":"1"}}}`, req.ID, req.Params.ProtocolVersion)
		case "tools/list":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"big","inputSchema":{"type":"object"}}]}}`, req.ID)
		case "tools/call":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, req.ID)
			chunk := strings.Repeat("x", 1<<20)
			for range 100 {
				if _, err := w.Write([]byte(chunk)); err != nil {
					return
				}
			}
			fmt.Fprint(w, `"}]}}`)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
		}
	}))
	defer ts.Close()
	c, err := Connect(context.Background(), Server{Name: "big", URL: ts.URL, MaxMessageBytes: 1 << 20, CallTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Call(context.Background(), "big", nil)
	if err == nil || !strings.Contains(err.Error(), `"big"`) {
		t.Fatalf("want an error naming the server, got %v", err)
	}
}

func TestNotMCPURL(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>hello</html>")
	}))
	defer ts.Close()
	_, err := Connect(context.Background(), Server{Name: "web", URL: ts.URL, ConnectTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), `"web"`) {
		t.Fatalf("got %v", err)
	}
}

// A server that hangs mid-call ends that call with a tool error within the
// timeout, the run goes on, and the next call reconnects.
func TestHangThenReconnect(t *testing.T) {
	for _, mode := range []string{"hang-once", "die-once"} {
		t.Run(mode, func(t *testing.T) {
			srv := fake(t, mode)
			srv.CallTimeout = 500 * time.Millisecond
			c, err := Connect(context.Background(), srv)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			first := c.sess.proc.cmd.Process.Pid
			evs := runChat(t, c.Tools(), call{"c1", "twin", `{}`})
			res := results(evs)["c1"]
			if !isErrorResult(res) || !strings.Contains(res.Content, "restarted on the next call") {
				t.Fatalf("want a tool error, got %q", res.Content)
			}
			gone(t, first)
			v, err := c.Call(context.Background(), "twin", nil)
			if err != nil || v != "ok" {
				t.Fatalf("after reconnect: %v %v", v, err)
			}
		})
	}
}

func TestCloseKillsProcessGroup(t *testing.T) {
	c, err := Connect(context.Background(), fake(t, "plain"))
	if err != nil {
		t.Fatal(err)
	}
	pgid := c.sess.proc.cmd.Process.Pid
	if err := c.Close(); err != nil {
		t.Log("close:", err)
	}
	gone(t, pgid)
	if _, err := c.Call(context.Background(), "twin", nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("call after close: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, s := range []Server{{}, {Name: "x"}, {Name: "x", URL: "http://127.0.0.1:1", Command: []string{"a"}}, {Name: "x", Command: []string{""}}} {
		if _, err := Connect(context.Background(), s); err == nil {
			t.Errorf("%+v: want an error", s)
		}
	}
	if _, err := Connect(context.Background(), Server{Name: "nope", Command: []string{"/nonexistent/mcp-server"}}); err == nil || !strings.Contains(err.Error(), "/nonexistent/mcp-server") {
		t.Errorf("missing command: %v", err)
	}
}
