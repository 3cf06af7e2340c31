package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
)

// runScenario implements `goai run`: engine plus encoder, no HTTP.
func runScenario(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("scenario", "", "scenario file (JSON)")
	format := fs.String("format", "sse", "wire format: sse or ndjson")
	wire := fs.String("wire", "agui", "wire profile: agui or tanstack")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "goai run: --scenario is required")
		return 2
	}
	f, p, err := parseWire(*format, *wire)
	if err != nil {
		fmt.Fprintln(stderr, "goai run:", err)
		return 2
	}
	sc, err := scripted.LoadFileLazy(*path)
	if err != nil {
		fmt.Fprintln(stderr, "goai run:", err)
		return 2
	}
	cat := newCatalogue()
	opts, err := cat.Options(sc, scripted.New(sc))
	if err != nil {
		fmt.Fprintln(stderr, "goai run:", err)
		return 2
	}
	opts.Profile = p
	bw := bufio.NewWriterSize(stdout, 64<<10)
	w := agui.NewWriter(bw, agui.WriterOptions{Format: f, Profile: p, ThreadID: sc.ThreadID, RunID: sc.RunID})
	if _, werr := server.WriteRun(w, chat.Stream(ctx, opts)); werr != nil {
		fmt.Fprintln(stderr, "goai run: write:", werr)
		return 1
	}
	if err := bw.Flush(); err != nil {
		fmt.Fprintln(stderr, "goai run: write:", err)
		return 1
	}
	if hasName(sc.Middleware, "log_hooks") {
		b, _ := json.Marshal(cat.Hooks())
		fmt.Fprintf(stderr, "HOOKS: %s\n", b)
	}
	return 0
}

func hasName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

func parseWire(format, wire string) (agui.Format, agui.Profile, error) {
	var f agui.Format
	switch format {
	case "sse":
		f = agui.SSE
	case "ndjson":
		f = agui.NDJSON
	default:
		return "", "", fmt.Errorf("--format must be sse or ndjson, got %q", format)
	}
	var p agui.Profile
	switch wire {
	case "agui":
		p = agui.ProfileAGUI
	case "tanstack":
		p = agui.ProfileTanStack
	default:
		return "", "", fmt.Errorf("--wire must be agui or tanstack, got %q", wire)
	}
	return f, p, nil
}
