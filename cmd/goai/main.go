// Command goai runs the goai chat server and tools.
//
//	goai serve [--addr 127.0.0.1:8080] [--model scripted:FILE] [--wire agui|tanstack]
//	goai run --scenario FILE [--format sse|ndjson] [--wire agui|tanstack]
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/goai-sdk/goai/provider/mockprovider"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: goai <command> [flags]

commands:
  serve   run the chat server with the web UI
  run     run one scenario and write its wire bytes to stdout
  watch   watch a directory and print file events as JSON lines
  mcp serve  serve a sandbox's workspace tools over MCP (stdio or Streamable HTTP)
  mock-provider  serve a scenario in a provider's wire format (openai-responses,
          openai-chat, anthropic, gemini, ollama) for offline testing
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runScenario(ctx, args[1:], stdout, stderr)
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "watch":
		return watch(ctx, args[1:], stdout, stderr)
	case "mcp":
		return mcpCommand(ctx, args[1:], stdout, stderr)
	case "mock-provider":
		return mockprovider.Main(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "goai: unknown command %q\n\n%s", args[0], usage)
	return 2
}
