package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/goai-sdk/goai/mcp/mcpserver"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/workspace"
)

const mcpUsage = `usage: goai mcp serve [--http ADDR | --stdio] [--workspace DIR] [--sandbox local|bwrap|docker] [--policy FILE]

Serves the workspace tools (list_files, read_file, write_file, edit_file,
search, run_command) of a sandbox over MCP. Over HTTP every request needs
"Authorization: Bearer <token>": the token is GOAI_MCP_TOKEN, or a fresh one
written to --token-file. A command the policy asks about is put to the MCP
client's user (elicitation); a client that cannot be asked gets a tool error.
`

// mcpCommand implements `goai mcp ...`.
func mcpCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprint(stderr, mcpUsage)
		return 2
	}
	fs := flag.NewFlagSet("mcp serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "", "serve Streamable HTTP at ADDR (e.g. 127.0.0.1:8765), endpoint /mcp")
	stdio := fs.Bool("stdio", false, "serve on stdin/stdout (the default)")
	tokenFile := fs.String("token-file", ".goai/mcp-token", "with --http and no GOAI_MCP_TOKEN: where the generated token is written (mode 0600)")
	agentCfg := addAgentFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *httpAddr != "" && *stdio {
		fmt.Fprintln(stderr, "goai mcp serve: use --http or --stdio, not both")
		return 2
	}
	// On stdio, stdout is the protocol: logs go to stderr only.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if *agentCfg.noTools || *agentCfg.sandbox == "none" {
		fmt.Fprintln(stderr, "goai mcp serve: there is nothing to serve without a sandbox")
		return 2
	}
	if *agentCfg.workspace == "" {
		wd, err := os.Getwd()
		if err != nil {
			fmt.Fprintln(stderr, "goai mcp serve:", err)
			return 1
		}
		*agentCfg.workspace = wd
	}
	ag, err := openAgent(ctx, agentCfg, "", logger)
	if err != nil {
		fmt.Fprintln(stderr, "goai mcp serve:", err)
		return 2
	}
	prov, err := ag.newProv(ag.shared)
	if err != nil {
		fmt.Fprintln(stderr, "goai mcp serve: sandbox:", err)
		return 1
	}
	h, err := prov.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		fmt.Fprintln(stderr, "goai mcp serve: sandbox:", err)
		return 1
	}
	defer func() {
		// Kill whatever the tools left running (and a docker container);
		// the workspace directory stays.
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := prov.Destroy(dctx, h.ID()); err != nil {
			logger.Warn("sandbox destroy", "err", err)
		}
	}()
	sdkLog := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := mcpserver.New(workspace.Tools(h, workspace.Options{Policy: ag.policy}), mcpserver.Options{Logger: sdkLog})
	if err != nil {
		fmt.Fprintln(stderr, "goai mcp serve:", err)
		return 1
	}
	if *httpAddr == "" {
		if err := mcpserver.ServeStdio(ctx, srv); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "goai mcp serve:", err)
			return 1
		}
		return 0
	}
	token, where := os.Getenv("GOAI_MCP_TOKEN"), "GOAI_MCP_TOKEN"
	hs, err := mcpserver.Listen(srv, mcpserver.ListenOptions{Addr: *httpAddr, Token: token, Logger: sdkLog})
	if err != nil {
		fmt.Fprintln(stderr, "goai mcp serve:", err)
		return 1
	}
	defer hs.Close()
	if token == "" {
		if err := writeSecret(*tokenFile, hs.Token()); err != nil {
			fmt.Fprintln(stderr, "goai mcp serve: token file:", err)
			return 1
		}
		where = *tokenFile
	}
	fmt.Fprintf(stdout, "goai MCP server on %s (sandbox: %s, workspace: %s, bearer token in %s)\n", hs.URL, ag.kind, ag.shared, where)
	<-ctx.Done()
	return 0
}

// writeSecret writes s to path, readable by the owner only.
func writeSecret(path, s string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := io.WriteString(f, s+"\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
