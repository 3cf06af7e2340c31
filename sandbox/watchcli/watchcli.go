// Package watchcli implements `goai watch`: it watches a directory through
// a local sandbox and prints one JSON line per file event.
package watchcli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
)

const usage = `usage: goai watch [--poll] [--interval D] [--coalesce D] [--diff] [--ignore a,b] DIR

Watches DIR and prints one JSON line per file event:
  {"type":"create|change|delete","path":"<relative to DIR>","timestamp":<epoch ms>}
With --diff each line also carries "diff", the patch against the git HEAD
at start (a synthesized add-patch for new or non-git files).

Flags:
`

// Event is one output line.
type Event struct {
	Type      string  `json:"type"`
	Path      string  `json:"path"`
	Timestamp int64   `json:"timestamp"`
	Diff      *string `json:"diff,omitempty"`
}

type config struct {
	poll     bool
	interval time.Duration
	coalesce time.Duration
	diff     bool
	ignore   string
	dir      string
}

func parse(args []string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("goai watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.BoolVar(&cfg.poll, "poll", false, "poll with find instead of native watching")
	fs.DurationVar(&cfg.interval, "interval", sandbox.DefaultPollInterval, "poll interval")
	fs.DurationVar(&cfg.coalesce, "coalesce", sandbox.DefaultCoalesce, "coalescing window for native events (0 turns it off)")
	fs.BoolVar(&cfg.diff, "diff", false, "include each file's diff against the baseline")
	fs.StringVar(&cfg.ignore, "ignore", strings.Join(sandbox.DefaultIgnore, ","), "comma-separated names to ignore at any depth")
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 {
		fs.Usage()
		return nil, errors.New("exactly one DIR is required")
	}
	if cfg.interval <= 0 || cfg.coalesce < 0 {
		return nil, errors.New("--interval must be positive and --coalesce not negative")
	}
	cfg.dir = positional[0]
	return cfg, nil
}

// Main runs `goai watch` until ctx is cancelled. It returns the exit
// status: 0 after a clean stop, 1 on failure, 2 on a usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "goai watch:", err)
		}
		return 2
	}
	dir, err := filepath.Abs(cfg.dir)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(dir); err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is not a directory", cfg.dir)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "goai watch:", err)
		return 1
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	keep := false
	p := local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep, Logger: logger})
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		fmt.Fprintln(stderr, "goai watch:", err)
		return 1
	}
	defer h.Destroy(context.WithoutCancel(ctx)) // kills stray git processes; keeps DIR

	root := sandbox.DefaultRoot
	base := ""
	if cfg.diff {
		base = sandbox.Baseline(ctx, h, root, logger)
		if base != "" {
			if res, err := h.Exec(ctx, "git rev-parse --show-prefix", sandbox.ExecOptions{}); err == nil && strings.TrimSpace(res.Stdout) != "" {
				fmt.Fprintln(stderr, "goai watch: DIR is not the repository top level; before() and the tracked-ness probe use paths relative to it")
			}
		}
	}

	var mu sync.Mutex
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	// Hooks run on one goroutine in event order, never blocking the watcher.
	dctx := context.WithoutCancel(ctx)
	d := sandbox.NewDispatcher(dctx, sandbox.DispatcherOptions{Logger: logger, Hooks: sandbox.Hooks{
		OnFile: func(ctx context.Context, e chat.FileEvent) error {
			line := Event{Type: e.Type, Path: strings.TrimPrefix(e.Path, root+"/"), Timestamp: e.Timestamp}
			if cfg.diff {
				diff := e.Diff(ctx)
				line.Diff = &diff
			}
			mu.Lock()
			defer mu.Unlock()
			return enc.Encode(line)
		},
	}})
	ignore := []string{}
	for _, s := range strings.Split(cfg.ignore, ",") {
		if s = strings.TrimSpace(s); s != "" {
			ignore = append(ignore, s)
		}
	}
	mode := sandbox.WatchAuto
	if cfg.poll {
		mode = sandbox.WatchPoll
	}
	coalesce := cfg.coalesce
	if coalesce == 0 {
		coalesce = -1
	}
	w, err := sandbox.WatchWorkspace(ctx, h, sandbox.WatchOptions{
		Root: root, Mode: mode, Interval: cfg.interval, Coalesce: coalesce, Ignore: ignore, Logger: logger,
		OnEvent: func(ev sandbox.WatchEvent) { d.Dispatch(sandbox.NewFileContent(h, root, base, ev, logger)) },
	})
	if err != nil {
		d.Close()
		fmt.Fprintln(stderr, "goai watch:", err)
		return 1
	}
	// The seed is done: changes from now on are reported.
	fmt.Fprintf(stderr, "goai watch: watching %s (%s)\n", cfg.dir, w.Mode())
	<-ctx.Done()
	stopErr := w.Stop()
	d.Close()
	if stopErr != nil {
		fmt.Fprintln(stderr, "goai watch: stop:", stopErr)
		return 1
	}
	return 0
}
