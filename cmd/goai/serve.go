package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/fromenv"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/sandbox/watchcli"
	"github.com/goai-sdk/goai/server"
	"github.com/goai-sdk/goai/web"
	"github.com/goai-sdk/goai/workspace"
)

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("GOAI_ADDR", "127.0.0.1:8080"), "listen address")
	model := fs.String("model", envOr("GOAI_MODEL", defaultModel(os.Getenv)), "model: provider:model (openai, openai-chat, anthropic, gemini, ollama, openaicompat), scripted:FILE, or demo")
	wire := fs.String("wire", envOr("GOAI_WIRE", "agui"), "wire profile: agui or tanstack")
	storeURL := fs.String("store", envOr("GOAI_STORE", "sqlite:.goai/goai.db"), "run store: sqlite:PATH, postgres://..., memory, or none")
	token := fs.String("token", "", "API token (visible to local users in ps: prefer GOAI_TOKEN or GOAI_TOKEN_FILE)")
	insecure := fs.Bool("insecure", false, "serve a non-loopback address without a token")
	agentCfg := addAgentFlags(fs)
	mcpServers := addMCPFlag(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	_, profile, err := parseWire("sse", *wire)
	if err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 2
	}
	tokens, err := loadTokens(*token, os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 2
	}
	if err := checkExposure(*addr, tokens, *insecure); err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 2
	}
	limits, err := loadServeLimits(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ag, err := openAgent(ctx, agentCfg, dataDirOf(*storeURL), logger)
	if err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 2
	}
	if err := checkSharing(*storeURL, tokens, ag != nil); err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 2
	}
	if err := ag.allowNetwork(*model); err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 2
	}
	build, desc, err := modelOptions(*model, ag.commandPolicy(), ag.bridgeHost())
	if err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 2
	}
	build = ag.wrap(build)
	mcpt, err := openMCP(ctx, *mcpServers, logger)
	if err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 2
	}
	defer mcpt.close()
	build = mcpt.wrap(build)
	store, closeStore, err := openStore(ctx, *storeURL)
	if err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 1
	}
	defer closeStore()
	cfg := server.Config{
		Options: build, Profile: profile, Logger: logger, Store: store,
		Fallback:          http.FileServerFS(web.FS),
		Tokens:            tokens,
		AllowedOrigins:    limits.allowedOrigins,
		MaxRuns:           limits.maxRuns,
		RequestsPerSecond: limits.rate,
		BodyTimeout:       limits.bodyTimeout,
		ReleaseIdleAfter:  limits.releaseIdle,
		Info: map[string]any{
			"model": desc, "wire": profile, "store": storeKind(*storeURL),
			"demo": *model == "" || *model == "demo", "sandbox": ag.kindName(),
		},
	}
	if isLoopback(*addr) {
		// DNS rebinding: a page of another site resolving its name to
		// 127.0.0.1 must not reach this server.
		cfg.AllowedHosts = server.LoopbackHosts(limits.allowedHosts...)
	}
	chatHandler := server.ChatHandler(cfg)
	stopRecovery, err := startRecovery(ctx, chatHandler, store, logger, ag.releaseSandbox())
	if err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 2
	}
	defer stopRecovery()
	stopRetention := startRetention(ctx, store, limits.retention, logger)
	defer stopRetention()
	defer ag.startSweeper(ctx)()
	defer ag.startJournalSweeper(ctx, store)()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "goai serve:", err)
		return 1
	}
	srv := &http.Server{
		Handler: ag.routes(chatHandler),
		// No WriteTimeout: runs stream for minutes. Bodies have their own
		// read deadline (server.Config.BodyTimeout).
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	auth := "open (no token)"
	if len(tokens) > 0 {
		auth = fmt.Sprintf("token required (%d principal(s))", len(tokens))
	}
	fmt.Fprintf(stdout, "goai serving on http://%s (model: %s, wire: %s, store: %s, auth: %s, sandbox: %s)\n", ln.Addr(), desc, profile, redactURL(*storeURL), auth, ag.describe())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(stderr, "goai serve:", err)
			return 1
		}
	case <-ctx.Done():
		chatHandler.Drain()
		shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutCtx)
		<-errc
	}
	// Runs in flight get a grace period to finish into their logs, then
	// are aborted so every log ends with a terminal event.
	done := make(chan struct{})
	go func() { chatHandler.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		chatHandler.StopAll(errors.New("server shutting down"))
		<-done
	}
	// The streams the handler took over from net/http deliver the ends of
	// those runs, then stop; a join of another replica's run is cut short
	// and resumes elsewhere.
	streamsCtx, cancelStreams := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelStreams()
	_ = chatHandler.Shutdown(streamsCtx)
	return 0
}

// storeKind names the store without its address or credentials.
func storeKind(spec string) string {
	switch {
	case spec == "" || spec == "none":
		return "none"
	case strings.HasPrefix(spec, "postgres"):
		return "postgres"
	case strings.HasPrefix(spec, "sqlite:"):
		return "sqlite"
	case spec == "memory":
		return "memory"
	}
	return "unknown"
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// modelOptions resolves --model into a per-request options builder.
// A coding agent's own commands follow policy.
func modelOptions(model string, policy *workspace.Policy, bridgeHost string) (func(*server.Request) (chat.Options, error), string, error) {
	switch {
	case model == "" || model == "demo":
		cat := newCatalogue()
		tools, _ := cat.Tools([]string{"add"})
		return func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: scripted.Demo{}, Tools: tools}, nil
		}, "offline demo", nil
	case strings.HasPrefix(model, "scripted:"):
		sc, err := scripted.LoadFile(strings.TrimPrefix(model, "scripted:"))
		if err != nil {
			return nil, "", err
		}
		cat := newCatalogue()
		base, err := cat.Options(sc, scripted.New(sc))
		if err != nil {
			return nil, "", err
		}
		base.Messages = nil
		base.Tools = slices.Clip(base.Tools) // shared: a wrapper's append must copy
		return func(*server.Request) (chat.Options, error) {
			// The tools (and their JSON schemas) are stateless and built
			// once; middleware (the "cache" LRU) is fresh per run.
			mws, err := cat.Middleware(sc.Middleware)
			opts := base
			opts.Middleware = mws
			return opts, err
		}, "scripted " + sc.Name, nil
	}
	if h, desc, ok, err := harnessModel(model, os.Getenv, policy, bridgeHost); ok {
		if err != nil {
			return nil, "", err
		}
		return func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: h}, nil
		}, desc, nil
	}
	adapter, err := fromenv.Adapter(model, os.Getenv, nil)
	if err != nil {
		return nil, "", err
	}
	return func(*server.Request) (chat.Options, error) {
		return chat.Options{Adapter: adapter}, nil
	}, model, nil
}

// defaultModel picks a model when GOAI_MODEL is unset: the first provider
// whose key is in the environment, else the offline demo.
func defaultModel(getenv func(string) string) string {
	for _, c := range []struct{ key, model string }{
		{"OPENAI_API_KEY", "openai:gpt-4.1-mini"},
		{"ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"},
		{"GEMINI_API_KEY", "gemini:gemini-2.5-flash"},
	} {
		if getenv(c.key) != "" {
			return c.model
		}
	}
	return ""
}

func watch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return watchcli.Main(ctx, args, stdout, stderr)
}
