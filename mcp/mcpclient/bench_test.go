package mcpclient

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/mcp/mcpserver"
)

func echoTool() *chat.Tool {
	return chat.NewTool("echo", "Echoes", func(_ context.Context, in struct{ Text string }) (string, error) {
		return in.Text, nil
	})
}

// serveGoai is the test binary as goai's own MCP server on stdio.
func serveGoai() {
	srv, err := mcpserver.New([]*chat.Tool{echoTool()}, mcpserver.Options{})
	if err != nil {
		panic(err)
	}
	if err := mcpserver.ServeStdio(context.Background(), srv); err != nil {
		os.Exit(1)
	}
}

var benchArgs = json.RawMessage(`{"Text":"hello"}`)

func benchCalls(b *testing.B, call func(context.Context, json.RawMessage) (any, error)) {
	ctx := context.Background()
	if v, err := call(ctx, benchArgs); err != nil || v != "hello" {
		b.Fatalf("%v %v", v, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := call(ctx, benchArgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToolCall measures one tool call: in-process (the baseline), and
// through goai's MCP client and server over stdio and Streamable HTTP on
// loopback. The difference is the latency MCP adds per call.
func BenchmarkToolCall(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		benchCalls(b, echoTool().Execute)
	})
	b.Run("stdio", func(b *testing.B) {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		c, err := Connect(context.Background(), Server{Name: "goai", Command: []string{exe}, Env: []string{"GOAI_FAKE_MCP=goai"}})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		benchCalls(b, func(ctx context.Context, args json.RawMessage) (any, error) { return c.Call(ctx, "echo", args) })
	})
	b.Run("http", func(b *testing.B) {
		srv, err := mcpserver.New([]*chat.Tool{echoTool()}, mcpserver.Options{})
		if err != nil {
			b.Fatal(err)
		}
		hs, err := mcpserver.Listen(srv, mcpserver.ListenOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer hs.Close()
		c, err := Connect(context.Background(), Server{Name: "goai", URL: hs.URL, Header: http.Header{"Authorization": {"Bearer " + hs.Token()}}})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		benchCalls(b, func(ctx context.Context, args json.RawMessage) (any, error) { return c.Call(ctx, "echo", args) })
	})
}
