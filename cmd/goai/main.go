// Command goai runs the goai chat server and tools.
//
//	goai serve [--addr 127.0.0.1:8080] [--model scripted:FILE] [--wire agui|tanstack]
//	goai run [--format sse|ndjson] [--wire agui|tanstack] FILE
//	goai watch DIR, goai mock-provider, goai version, goai help [CMD]
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeUsage(stderr)
		return 2
	}
	if c, ok := lookupCommand(args[0]); ok && wantsHelp(args[1:]) {
		writeCommandHelp(ctx, stdout, c)
		return 0
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
	case "version":
		return version(args[1:], stdout, stderr)
	case "help":
		return helpMain(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help":
		writeUsage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "goai: unknown command %q\n\n", args[0])
	writeUsage(stderr)
	return 2
}
