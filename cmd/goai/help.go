package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/goai-sdk/goai/provider/mockprovider"
)

// commandHelp is what `goai help CMD` and `goai CMD --help` print besides
// the flags, which come from the command's own flag set so they never
// drift from what the command accepts.
type commandHelp struct {
	name     string
	synopsis string // the usage line after "goai "
	summary  string // one line, for the command list
	detail   string // paragraphs
	env      []envVar
	// exec runs the command; help calls it with "-h" to collect the flag
	// defaults it prints. Nil for commands without flags.
	exec func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

type envVar struct{ name, meaning string }

// commands lists every subcommand in the order `goai --help` shows them.
// A new environment variable read by a command gets a line here.
func commands() []commandHelp {
	return []commandHelp{
		{
			name:     "serve",
			synopsis: "serve [--addr ADDR] [--model MODEL] [--wire agui|tanstack] [--store STORE]",
			summary:  "run the chat server with the web UI",
			detail: `Serves the chat API at /api/chat (streaming and durable runs, join, hydrate,
cancel) and the web UI at /. With no provider key and no --model it answers
with the offline demo model, so it runs without a network.

Flags override the environment variables below; a named provider whose key is
missing is a startup error. Stop it with Ctrl-C: runs in flight get a grace
period to finish into their logs.`,
			env: []envVar{
				{"GOAI_ADDR", "listen address (--addr; default 127.0.0.1:8080)"},
				{"GOAI_MODEL", "provider:model with provider openai, openai-chat, anthropic, gemini,\nollama or openaicompat; scripted:FILE; demo; or a coding agent run in\nthe sandbox: claude-code:MODEL, codex:MODEL, acp:COMMAND (--model; default:\nthe first provider whose key is set, else the offline demo)"},
				{"GOAI_CLAUDE_BIN", "the Claude Code CLI for claude-code:MODEL (default claude)"},
				{"GOAI_CODEX_BIN", "the Codex CLI for codex:MODEL (default codex)"},
				{"OPENAI_API_KEY", "key for openai, openai-chat (and openaicompat when the server needs one)"},
				{"ANTHROPIC_API_KEY", "key for anthropic"},
				{"GEMINI_API_KEY", "key for gemini (GOOGLE_API_KEY is accepted too)"},
				{"OPENAI_BASE_URL", "base URL for openai* (required for openaicompat: vLLM, llama.cpp, ...)"},
				{"ANTHROPIC_BASE_URL", "base URL for anthropic"},
				{"GEMINI_BASE_URL", "base URL for gemini"},
				{"OLLAMA_HOST", "Ollama server (default http://127.0.0.1:11434); OLLAMA_API_KEY if it needs one"},
				{"GOAI_WIRE", "wire profile, agui or tanstack (--wire; default agui)"},
				{"GOAI_STORE", "run store: sqlite:PATH, postgres://user:pass@host/db, memory (durable\nruns lost on restart), or none for plain streaming (--store; default\nsqlite:.goai/goai.db)"},
				{"GOAI_LEASE", "producer lease; a run whose lease lapsed is reclaimed (default 15s)"},
				{"GOAI_WAL_LIMIT", "SQLite store: the write-ahead log starts over at this size even under\nsteady load, pausing commits 10-60 ms each time (default 1GiB; none: no limit)"},
				{"GOAI_COMMIT_GAP", "SQLite store: while several streams write, a commit waits up to this long\n(at most 100ms) for the writes behind it to share it: less CPU under many\nstreams, more latency; a lone stream never waits (default 2ms; 0: never;\n/metrics goai_store_writes_total over goai_store_commits_total says how\nmany writes a commit shares)"},
				{"GOAI_DETACHED_TTL", "a detached run older than this is cancelled; 0 never (default 30m)"},
				{"GOAI_RATE", "chat requests per second per user (default 10, burst 40; 0: no bound)"},
				{"GOAI_MCP", "MCP servers whose tools the model gets: NAME=COMMAND or NAME=URL per line,\nor a JSON list (--mcp, repeatable)"},
			},
			exec: serve,
		},
		{
			name:     "run",
			synopsis: "run [--format sse|ndjson] [--wire agui|tanstack] FILE",
			summary:  "run one scenario and write its wire bytes to stdout",
			detail: `Runs the scripted scenario in FILE (also accepted as --scenario FILE) through
the engine with its tools and middleware, and writes the wire bytes a client
would receive to stdout. No HTTP, no network. conformance/README.md describes
the scenario format.`,
			exec: runScenario,
		},
		{
			name:     "watch",
			synopsis: "watch [--poll] [--interval D] [--coalesce D] [--diff] [--ignore a,b] DIR",
			summary:  "watch a directory and print file events as JSON lines",
			detail: `Prints one JSON line per file created, changed or deleted under DIR until
interrupted, with a git diff against the baseline when --diff is given.`,
			exec: watch,
		},
		{
			name:     "mcp",
			synopsis: "mcp serve [--stdio | --http ADDR] [--workspace DIR] [--sandbox local|bwrap|docker] [--policy FILE]",
			summary:  "serve a sandbox's workspace tools over MCP (stdio or Streamable HTTP)",
			detail: `Serves the workspace tools (list_files, read_file, write_file, edit_file,
search, run_command) on one sandbox to any MCP client. Over HTTP every request
needs the bearer token from GOAI_MCP_TOKEN, or a fresh one written to
.goai/mcp-token (mode 0600).`,
			env: []envVar{
				{"GOAI_MCP_TOKEN", "bearer token for --http (default: generated into .goai/mcp-token)"},
			},
			exec: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
				return mcpCommand(ctx, append([]string{"serve"}, args...), stdout, stderr)
			},
		},
		{
			name:     "mock-provider",
			synopsis: "mock-provider --api API --scenario FILE [--addr ADDR] [--record DIR]",
			summary:  "serve a scenario in a provider's wire format for offline tests",
			detail: `Serves the turns of a scripted scenario in the real wire format of a provider
API (openai-responses, openai-chat, anthropic, gemini, ollama) and prints its
base URL; point the provider's *_BASE_URL at it to test an adapter offline.`,
			exec: mockprovider.Main,
		},
		{
			name:     "version",
			synopsis: "version",
			summary:  "print the module version, VCS revision and Go version",
			detail:   `Reads the build information embedded in the binary.`,
		},
		{
			name:     "help",
			synopsis: "help [COMMAND]",
			summary:  "describe a command, its flags and environment variables",
		},
	}
}

func lookupCommand(name string) (commandHelp, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return commandHelp{}, false
}

func writeUsage(w io.Writer) {
	fmt.Fprint(w, "usage: goai <command> [flags]\n\ncommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'goai help COMMAND' (or 'goai COMMAND --help') for its flags and environment.\n")
}

// helpMain implements `goai help [CMD]`.
func helpMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeUsage(stdout)
		return 0
	}
	c, ok := lookupCommand(args[0])
	if !ok {
		fmt.Fprintf(stderr, "goai help: unknown command %q\n\n", args[0])
		writeUsage(stderr)
		return 2
	}
	writeCommandHelp(ctx, stdout, c)
	return 0
}

func writeCommandHelp(ctx context.Context, w io.Writer, c commandHelp) {
	fmt.Fprintf(w, "usage: goai %s\n\n%s.\n", c.synopsis, capitalize(c.summary))
	if c.detail != "" {
		fmt.Fprintf(w, "\n%s\n", c.detail)
	}
	if flags := flagDefaults(ctx, c); flags != "" {
		fmt.Fprintf(w, "\nflags:\n%s", flags)
	}
	if len(c.env) > 0 {
		fmt.Fprint(w, "\nenvironment:\n")
		for _, e := range c.env {
			lines := strings.Split(e.meaning, "\n")
			fmt.Fprintf(w, "  %-19s %s\n", e.name, lines[0])
			for _, l := range lines[1:] {
				fmt.Fprintf(w, "  %-19s %s\n", "", l)
			}
		}
	}
}

// userinfo matches the password of a URL, which a flag default taken from
// the environment (GOAI_STORE=postgres://user:pass@...) may carry.
var userinfo = regexp.MustCompile(`(://[^:/@\s]*:)[^@\s]*@`)

// flagDefaults runs the command with -h, which makes its flag set print
// its defaults and return before doing anything, and keeps the flag lines.
func flagDefaults(ctx context.Context, c commandHelp) string {
	if c.exec == nil {
		return ""
	}
	var out bytes.Buffer
	c.exec(ctx, []string{"-h"}, io.Discard, &out)
	text := out.String()
	i := strings.Index(text, "  -")
	if i < 0 {
		return ""
	}
	return userinfo.ReplaceAllString(text[i:], "${1}xxxxx@")
}

// wantsHelp reports whether the arguments of a command ask for its help
// (before any "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
