// Package harness runs coding-agent CLIs (Claude Code, Codex) inside a
// sandbox as chat adapters. The agent does the work in the sandbox's
// workspace; the adapter translates the agent's own event stream (NDJSON on
// its stdout) into AG-UI chunks: text, reasoning, the agent's tool use
// (reported as observed calls the engine never executes), usage and finish,
// then a `file.changed` CUSTOM event with the whole-tree diff and a
// `<harness>.session-id` CUSTOM event.
//
// An adapter requires the sandbox capability (sandbox.HandleCapability):
// run it under sandbox.WithSandbox, which provides the handle and streams
// the agent's file edits as sandbox.file events while it works.
//
//	adapter := harness.New(harness.ClaudeCode{}, "claude-sonnet-4-5", harness.Options{
//		Env: map[string]string{"ANTHROPIC_API_KEY": key},
//	})
//	chat.Stream(ctx, chat.Options{Adapter: adapter, Middleware: []*chat.Middleware{sandbox.WithSandbox(def, sandbox.Options{})}, ...})
//
// The CLI's stdout is either read live (the default) or, with
// Options.Journal, redirected into a journal file inside the sandbox that the
// host reads incrementally: a host that dies leaves the agent running and its
// journal intact, and the exit sentinel tells a reader that the agent is done
// (see journal.go).
package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"strings"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/mcp/mcpserver"
	"github.com/goai-sdk/goai/sandbox"
)

// Agent is one coding-agent CLI: how to launch it and how to read it.
type Agent interface {
	// Name is the harness name ("claude-code", "codex"); it prefixes the
	// session-id CUSTOM event.
	Name() string
	// Launch prepares one invocation of the CLI.
	Launch(inv *Invocation) (*Launch, error)
	// NewDecoder returns a decoder for one invocation's output.
	NewDecoder() Decoder
}

// Invocation is what an Agent needs to launch its CLI for one turn.
type Invocation struct {
	Model string
	// Prompt is the conversation rendered for the agent (see Prompt).
	Prompt string
	// Dir is the working directory inside the sandbox (a virtual path).
	Dir string
	// RunID names the run (file names derived from it are encoded).
	RunID string
	// Bridge, when not nil, is the tool bridge serving the run's host tools.
	Bridge *BridgeEndpoint
	// Env is Options.Env.
	Env map[string]string
	// Continue, when not nil, says the user answered the approvals the
	// agent's previous turn asked for: resume its session (if the agent
	// can) with the approved commands allowed. Prompt is then the note of
	// what was answered.
	Continue *Continuation
}

// Launch is a prepared CLI invocation.
type Launch struct {
	// Command is the shell command (run with sh -c in Dir).
	Command string
	// Stdin is written to the command's standard input, which is then
	// closed. With a journal it is written to a file and redirected.
	Stdin string
	// Env is merged over the sandbox environment for this command only.
	Env map[string]string
	// Files are written (mode 0600) before the command runs: paths relative
	// to Dir. They carry configuration that must stay out of argv (tokens).
	Files map[string]string
}

// Conversing is implemented by agents that hold a two-way protocol with
// the host over stdio (ACP) instead of printing an event stream. The adapter
// starts Launch's command and hands Converse the process; Converse reports
// what the agent does through the Session until the turn ends.
type Conversing interface {
	Agent
	Converse(ctx context.Context, s *Session) error
}

// Decoder translates the CLI's output, one JSON line at a time.
type Decoder interface {
	// Line handles one complete JSON line.
	Line(line []byte, e *Emitter) error
}

// BridgeEndpoint is where the agent reaches the host's tools (an MCP
// server named "tanstack" over Streamable HTTP).
type BridgeEndpoint struct {
	URL   string
	Token string
}

// Options configures an Adapter.
type Options struct {
	// Env is passed to the CLI (API keys, base URLs). It is never logged.
	Env map[string]string
	// Dir is the working directory inside the sandbox; default the
	// workspace root.
	Dir string
	// NoBridge turns the tool bridge off. Otherwise, when the run has
	// server tools, they are served to the agent as the MCP server
	// "tanstack" for the invocation (see mcpserver.StartBridge), and calls
	// run through the engine's tool path (chat.ToolRunnerCapability).
	NoBridge bool
	// BridgeHost is the host name the agent reaches the bridge at:
	// "127.0.0.1" (the default) for a sandbox that shares the host's
	// loopback; set it (e.g. "host.docker.internal") for a sandbox with its
	// own network, which also makes the bridge listen on every interface.
	BridgeHost string
	// Journal redirects the CLI's output into a journal file inside the
	// sandbox (JournalDir) instead of a pipe, so the agent survives the host.
	Journal bool
	// JournalDir is the journal directory inside the sandbox, relative to
	// the working directory unless absolute; default DefaultJournalDir. A
	// sandbox whose /tmp is private to each command (bubblewrap) needs one
	// in the workspace, e.g. ".git/goai-runs" (outside git's and the
	// watcher's view).
	JournalDir string
	// StderrTail bounds how much of the CLI's stderr a failure reports;
	// default 1000 bytes.
	StderrTail int
	// Logger receives diagnostics (non-JSON lines, stderr); default the
	// request's logger.
	Logger *slog.Logger
}

// Adapter is a chat.Adapter that runs an Agent in the run's sandbox.
type Adapter struct {
	agent Agent
	model string
	opts  Options
}

var (
	_ chat.CapabilityRequirer = (*Adapter)(nil)
	_ chat.Attacher           = (*Adapter)(nil)
)

// New returns an adapter running agent with model.
func New(agent Agent, model string, opts Options) *Adapter {
	if opts.StderrTail <= 0 {
		opts.StderrTail = 1000
	}
	if opts.JournalDir == "" {
		opts.JournalDir = DefaultJournalDir
	}
	return &Adapter{agent: agent, model: model, opts: opts}
}

// Name is the harness name.
func (a *Adapter) Name() string { return a.agent.Name() }

// Model is the model the agent is told to use.
func (a *Adapter) Model() string { return a.model }

// Requires declares the sandbox capability: the engine refuses a run that
// has no sandbox before calling the adapter.
func (a *Adapter) Requires() []chat.CapabilityKey {
	return []chat.CapabilityKey{sandbox.HandleCapability}
}

// CanAttach reports whether a successor can take this adapter's runs over
// (chat.Attacher): with a journal, the agent outlives the host that
// launched it, and a re-driven run re-reads the journal instead of
// launching it again. A conversing agent (ACP) talks over stdio and dies
// with its host.
func (a *Adapter) CanAttach() bool {
	_, conversing := a.agent.(Conversing)
	return a.opts.Journal && !conversing
}

// ErrNoSandbox is returned when the adapter runs without a sandbox handle.
var ErrNoSandbox = errors.New("harness: this adapter runs a coding agent inside a sandbox: add sandbox.WithSandbox to the chat's middleware")

// ExitError reports a CLI that exited with a non-zero status.
type ExitError struct {
	Harness string
	Code    int
	// Stderr is the tail of the CLI's standard error.
	Stderr string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s: agent process exited with code %d", e.Harness, e.Code)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// ChatStream runs the agent once and streams its work as one model turn.
func (a *Adapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		var h sandbox.Handle
		if req.Capabilities != nil {
			h, _ = sandbox.HandleCapability.GetOptional(req.Capabilities)
		}
		if h == nil {
			yield(agui.Event{}, ErrNoSandbox)
			return
		}
		run := &invocationRun{a: a, req: req, h: h, log: a.logger(req)}
		run.stream(ctx, yield)
	}
}

func (a *Adapter) logger(req *chat.Request) *slog.Logger {
	if a.opts.Logger != nil {
		return a.opts.Logger
	}
	if req.Logger != nil {
		return req.Logger.Slog()
	}
	return slog.Default()
}

type invocationRun struct {
	a   *Adapter
	req *chat.Request
	h   sandbox.Handle
	log *slog.Logger
	em  Emitter
}

func (r *invocationRun) stream(ctx context.Context, yield func(agui.Event, error) bool) {
	dir := r.a.opts.Dir
	if dir == "" {
		dir = r.h.WorkspaceRoot()
	}
	runID := r.req.RunID
	if runID == "" {
		runID = newID("run")
	}
	var (
		base   string
		runErr error
	)
	if r.req.Attach {
		// A takeover: the agent was launched by a host that died. Nothing
		// is started; its journal is read again from the start.
		if !r.a.CanAttach() {
			yield(agui.Event{}, fmt.Errorf("harness: %s: %w", r.a.agent.Name(), chat.ErrCannotAttach))
			return
		}
		j := r.journal(dir, runID)
		base = j.baseline(ctx, r.h, dir, r.log)
		if !yield(r.runStarted(runID), nil) {
			return
		}
		runErr = r.attachJournal(ctx, j, r.a.agent.NewDecoder(), yield)
	} else {
		base = sandbox.Baseline(ctx, r.h, dir, r.log)
		var done bool
		runErr, done = r.launchAndRead(ctx, dir, runID, base, yield)
		if done {
			return
		}
	}
	if errors.Is(runErr, errStopped) {
		return
	}
	if runErr != nil {
		r.em.closeAll("The agent stopped before reporting this call's outcome.")
		r.flush(yield)
		yield(agui.Event{}, runErr)
		return
	}
	r.em.closeAll("The agent reported no outcome for this call.")
	if r.em.SessionID != "" {
		r.em.Custom(r.a.agent.Name()+".session-id", map[string]string{"sessionId": r.em.SessionID})
	}
	// The whole-tree diff is best effort: a workspace that is not a git
	// repository has none, and the run's own outcome does not depend on it.
	if diff, err := TreeDiff(context.WithoutCancel(ctx), r.h, dir, base); err == nil {
		r.em.Custom("file.changed", map[string]string{"path": ".", "diff": diff})
	} else {
		r.log.Warn("harness: whole-tree diff failed", "category", "errors", "err", err)
	}
	if !r.flush(yield) {
		return
	}
	if f := r.em.Failure; f != nil {
		yield(agui.Event{Type: agui.RunError, Message: f.Message, Code: f.Code, Model: r.a.model}, nil)
		return
	}
	finish := agui.FinishStop
	if r.requestApprovals() {
		// The engine pauses on the approve_command calls; the user's
		// answers come back in the next call (a Continuation).
		finish = agui.FinishToolCalls
		if !r.flush(yield) {
			return
		}
	}
	yield(agui.Event{Type: agui.RunFinished, ThreadID: r.req.ThreadID, RunID: runID, FinishReason: finish, Usage: r.em.Usage, Model: r.a.model}, nil)
}

// runStarted is the turn's first event.
func (r *invocationRun) runStarted(runID string) agui.Event {
	return agui.Event{Type: agui.RunStarted, ThreadID: r.req.ThreadID, RunID: runID, Model: r.a.model}
}

// launchAndRead starts the agent (with the tool bridge and its
// configuration files) and reads what it does until it exits. done is true
// when the run already ended (a failure before the agent started was
// yielded, or the consumer stopped).
func (r *invocationRun) launchAndRead(ctx context.Context, dir, runID, base string, yield func(agui.Event, error) bool) (err error, done bool) {
	inv := &Invocation{Model: r.a.model, Prompt: Prompt(r.req), Dir: dir, RunID: runID, Env: r.a.opts.Env}
	if c := continuation(r.req.Messages); c != nil {
		// An agent that resumes its session needs only the answers; one
		// that starts afresh needs the conversation too.
		inv.Continue, inv.Prompt = c, inv.Prompt+"\n\n"+c.Prompt()
		if rs, ok := r.a.agent.(interface{ resumesSessions() bool }); ok && rs.resumesSessions() && c.SessionID != "" {
			inv.Prompt = c.Prompt()
		}
	}
	if !r.a.opts.NoBridge && len(bridged(r.req.Tools)) > 0 {
		ep, closeBridge, err := r.openBridge()
		if err != nil {
			yield(agui.Event{}, fmt.Errorf("harness: open the tool bridge: %w", err))
			return nil, true
		}
		defer closeBridge()
		inv.Bridge = ep
	}
	l, err := r.a.agent.Launch(inv)
	if err != nil {
		yield(agui.Event{}, err)
		return nil, true
	}
	if err := r.writeFiles(ctx, dir, l.Files); err != nil {
		yield(agui.Event{}, err)
		return nil, true
	}
	defer r.removeFiles(dir, l.Files)
	if !yield(r.runStarted(runID), nil) {
		return nil, true
	}
	switch ag := r.a.agent.(type) {
	case Conversing:
		return r.runConversation(ctx, dir, l, inv, ag, yield), false
	default:
		if r.a.opts.Journal {
			return r.runJournaled(ctx, r.journal(dir, runID), dir, base, l, ag.NewDecoder(), yield), false
		}
		return r.runPiped(ctx, dir, l, ag.NewDecoder(), yield), false
	}
}

var errStopped = errors.New("consumer stopped")

// flush yields what the emitter holds; false when the consumer stopped.
func (r *invocationRun) flush(yield func(agui.Event, error) bool) bool {
	for _, ev := range r.em.take() {
		if ev.Type != agui.ToolCallArgs && ev.Type != agui.TextMessageContent && ev.Type != agui.ReasoningMessageContent {
			ev.Model = r.a.model
		}
		if !yield(ev, nil) {
			return false
		}
	}
	return true
}

// line decodes one line of agent output; non-JSON lines are diagnostics.
func (r *invocationRun) line(raw []byte, dec Decoder, yield func(agui.Event, error) bool) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	if raw[0] != '{' {
		r.log.Info("harness: non-JSON output line", "category", "sandbox", "harness", r.a.agent.Name(), "line", truncate(string(raw), 500))
		return nil
	}
	if err := dec.Line(raw, &r.em); err != nil {
		r.log.Info("harness: undecodable output line", "category", "sandbox", "harness", r.a.agent.Name(), "err", err, "line", truncate(string(raw), 500))
		return nil
	}
	if !r.flush(yield) {
		return errStopped
	}
	return nil
}

func (r *invocationRun) runPiped(ctx context.Context, dir string, l *Launch, dec Decoder, yield func(agui.Event, error) bool) error {
	cmd := l.Command
	var stdinFile string
	if !r.h.Capabilities().WritableStdin && l.Stdin != "" {
		stdinFile = promptFileName(dir)
		if err := r.h.FS().WriteFile(ctx, stdinFile, []byte(l.Stdin), 0o600); err != nil {
			return fmt.Errorf("harness: write the prompt file: %w", err)
		}
		defer func() { _ = r.h.FS().RemoveAll(context.WithoutCancel(ctx), stdinFile) }()
		cmd = "( " + cmd + " ) < " + sandbox.Quote(stdinFile)
	}
	p, err := r.h.Spawn(ctx, cmd, sandbox.ExecOptions{Dir: dir, Env: l.Env})
	if err != nil {
		return fmt.Errorf("harness: start %s: %w", r.a.agent.Name(), err)
	}
	if in := p.Stdin(); in != nil {
		go func() {
			_, _ = io.WriteString(in, l.Stdin)
			_ = in.Close()
		}()
	}
	stderr := newTail(r.a.opts.StderrTail)
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		_, _ = io.Copy(stderr, p.Stderr())
	}()
	sc := bufio.NewScanner(p.Stdout())
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var lineErr error
	for sc.Scan() {
		if lineErr = r.line(sc.Bytes(), dec, yield); lineErr != nil {
			break
		}
	}
	if lineErr != nil {
		_ = p.Kill(killSignal)
		_, _ = io.Copy(io.Discard, p.Stdout())
	}
	code, waitErr := p.Wait(context.WithoutCancel(ctx))
	<-stderrDone
	if lineErr != nil {
		return lineErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if waitErr != nil {
		return fmt.Errorf("harness: wait for %s: %w", r.a.agent.Name(), waitErr)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("harness: read %s output: %w", r.a.agent.Name(), err)
	}
	if tail := strings.TrimSpace(stderr.String()); tail != "" {
		r.log.Debug("harness: agent stderr", "category", "sandbox", "harness", r.a.agent.Name(), "stderr", tail)
	}
	if code != 0 {
		return &ExitError{Harness: r.a.agent.Name(), Code: code, Stderr: strings.TrimSpace(stderr.String())}
	}
	return nil
}

// bridged are the run's tools the agent may call: all but approve_command,
// which is the host's own way of asking the user.
func bridged(tools []chat.ToolSpec) []chat.ToolSpec {
	out := make([]chat.ToolSpec, 0, len(tools))
	for _, t := range tools {
		if t.Name != ApproveCommandTool {
			out = append(out, t)
		}
	}
	return out
}

// openBridge serves the run's tools to the agent over MCP.
func (r *invocationRun) openBridge() (*BridgeEndpoint, func(), error) {
	runner, err := chat.ToolRunnerCapability.Get(r.req.Capabilities)
	if err != nil {
		return nil, nil, err
	}
	host := r.a.opts.BridgeHost
	b, err := mcpserver.StartBridge(bridged(r.req.Tools), mcpserver.BridgeOptions{
		Call:           runner.RunTool,
		Remote:         host != "" && host != "127.0.0.1" && host != "localhost",
		HostForSandbox: host,
		Logger:         r.log,
	})
	if err != nil {
		return nil, nil, err
	}
	return &BridgeEndpoint{URL: b.URL, Token: b.Token()}, func() { _ = b.Close() }, nil
}

func (r *invocationRun) writeFiles(ctx context.Context, dir string, files map[string]string) error {
	for name, content := range files {
		if err := r.h.FS().WriteFile(ctx, joinPath(dir, name), []byte(content), 0o600); err != nil {
			return fmt.Errorf("harness: write %s: %w", name, err)
		}
	}
	return nil
}

func (r *invocationRun) removeFiles(dir string, files map[string]string) {
	for name := range files {
		_ = r.h.FS().RemoveAll(context.Background(), joinPath(dir, name))
	}
}

// Prompt renders the conversation for an agent that starts afresh: the
// system prompts, earlier turns as a transcript, then the latest user
// message. A conversation of one user message is that message alone.
func Prompt(req *chat.Request) string {
	var b strings.Builder
	for _, sp := range req.SystemPrompts {
		if s := strings.TrimSpace(sp.Content); s != "" {
			b.WriteString(s)
			b.WriteString("\n\n")
		}
	}
	last := -1
	for i, m := range req.Messages {
		if m.Role == agui.RoleUser {
			last = i
		}
	}
	if last < 0 {
		return strings.TrimSpace(b.String())
	}
	var history strings.Builder
	for _, m := range req.Messages[:last] {
		text := strings.TrimSpace(m.Content.String())
		switch m.Role {
		case agui.RoleUser:
			fmt.Fprintf(&history, "User: %s\n\n", text)
		case agui.RoleAssistant:
			if text != "" {
				fmt.Fprintf(&history, "Assistant: %s\n\n", text)
			}
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(&history, "Assistant called %s(%s)\n\n", tc.Function.Name, tc.Function.Arguments)
			}
		case agui.RoleTool:
			fmt.Fprintf(&history, "Tool result: %s\n\n", truncate(text, 2000))
		}
	}
	if history.Len() > 0 {
		b.WriteString("Conversation so far:\n\n")
		b.WriteString(history.String())
		b.WriteString("Current request:\n")
	}
	b.WriteString(req.Messages[last].Content.String())
	return b.String()
}
