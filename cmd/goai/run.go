package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
)

// runScenario implements `goai run`: engine plus encoder, no HTTP.
func runScenario(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("scenario", "", "scenario file (JSON); or give FILE as the argument")
	format := fs.String("format", "sse", "wire format: sse or ndjson")
	wire := fs.String("wire", "agui", "wire profile: agui or tanstack")
	mcpServers := addMCPFlag(fs)
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(files) > 1 || (len(files) == 1 && *path != "") {
		fmt.Fprintln(stderr, "goai run: give one scenario FILE")
		return 2
	}
	if len(files) == 1 {
		*path = files[0]
	}
	if *path == "" {
		fmt.Fprintln(stderr, "goai run: a scenario FILE is required (goai run FILE)")
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
	cat.Record = hasName(sc.Middleware, "log_hooks") // printed below
	opts, err := cat.Options(sc, scripted.New(sc))
	if err != nil {
		fmt.Fprintln(stderr, "goai run:", err)
		return 2
	}
	mcpt, err := openMCP(ctx, *mcpServers, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		fmt.Fprintln(stderr, "goai run:", err)
		return 2
	}
	defer mcpt.close()
	opts.Tools = append(opts.Tools, mcpt.tools()...)
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

// parseInterspersed parses flags placed before or after the positional
// arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
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
