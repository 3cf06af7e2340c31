package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
)

// DefaultJournalDir is where journals live inside the sandbox.
const DefaultJournalDir = "/tmp/goai-runs"

// JournalPollInterval is how often a journal is re-read when the sandbox
// cannot follow it with a long-running `tail -f`.
const JournalPollInterval = 250 * time.Millisecond

// A journal is the agent's stdout redirected (never piped, so the host's
// death cannot SIGPIPE the agent) into <dir>/<encoded run id>.ndjson, with
// stderr beside it in .err. When the agent exits, the wrapper appends one
// sentinel line {"__exit":<code>,"__nonce":"<nonce>"}; the nonce is derived
// from the run id, so any host can recompute and check it. A reader reads
// from byte 0 up to the sentinel, yields only newline-terminated lines, and
// deletes both files after the sentinel (never when it stops early).

// JournalNonce is the sentinel nonce of runID: the first 32 hex digits of
// SHA-256 over a fixed prefix and the run id.
func JournalNonce(runID string) string {
	sum := sha256.Sum256([]byte("goai/harness/journal-exit-sentinel/v1:" + runID))
	return hex.EncodeToString(sum[:])[:32]
}

// EncodeRunID maps a run id to a file name injectively: [A-Za-z0-9.-] stay,
// every other byte becomes _hh (lowercase hex); ids over 200 bytes keep 183
// bytes and a hash suffix.
func EncodeRunID(runID string) string {
	var b strings.Builder
	for i := 0; i < len(runID); i++ {
		c := runID[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	s := b.String()
	if s == "." || s == ".." {
		s = strings.ReplaceAll(s, ".", "_2e")
	}
	if len(s) > 200 {
		sum := sha256.Sum256([]byte(runID))
		s = s[:183] + "-" + hex.EncodeToString(sum[:])[:16]
	}
	return s
}

// Journal names one run's journal files inside a sandbox.
type Journal struct {
	// Dir is the journal directory: absolute, or relative to Cwd.
	Dir   string
	RunID string
	// Cwd is the working directory of the journal's commands (a virtual
	// path; "" for the sandbox's default). A Dir inside the workspace must
	// be given relative to it: a sandbox that runs commands on the host
	// (local, without bubblewrap) maps the working directory to the
	// workspace, but not the absolute paths inside a command.
	Cwd string
}

func (j Journal) execOpts() sandbox.ExecOptions { return sandbox.ExecOptions{Dir: j.Cwd} }

// Path is the journal file.
func (j Journal) Path() string { return path.Join(j.Dir, EncodeRunID(j.RunID)+".ndjson") }

// ErrPath is the stderr sidecar.
func (j Journal) ErrPath() string { return path.Join(j.Dir, EncodeRunID(j.RunID)+".err") }

// Wrap returns cmd wrapped so its output goes to the journal and the
// sentinel follows its exit. The subshell makes an `exit` inside cmd still
// reach the sentinel.
func (j Journal) Wrap(cmd string) string {
	return "mkdir -p " + sandbox.Quote(j.Dir) + " && { ( " + cmd + " ); printf '{\"__exit\":%d,\"__nonce\":\"" +
		JournalNonce(j.RunID) + "\"}\\n' \"$?\"; } >> " + sandbox.Quote(j.Path()) + " 2>> " + sandbox.Quote(j.ErrPath())
}

// sentinel reports whether line is this journal's exit sentinel, and the
// exit code. The code must be a JSON integer, never coerced.
func (j Journal) sentinel(line []byte) (int, bool) {
	if !bytes.HasPrefix(line, []byte(`{"__exit":`)) {
		return 0, false
	}
	var s struct {
		Exit  json.RawMessage `json:"__exit"`
		Nonce string          `json:"__nonce"`
	}
	if json.Unmarshal(line, &s) != nil || s.Nonce != JournalNonce(j.RunID) {
		return 0, false
	}
	code, err := strconv.Atoi(string(s.Exit))
	if err != nil {
		return 0, false
	}
	return code, true
}

// Read reads the journal from byte offset `from` and calls fn with each
// complete line and the offset just past it, until the sentinel (returned
// as the exit code) or until ctx ends (ctx's error). It follows the file
// with `tail -f` when the sandbox can run killable background processes, and
// polls otherwise. It deletes nothing: call Remove once the outcome is
// recorded.
func (j Journal) Read(ctx context.Context, h sandbox.Handle, from int64, fn func(line []byte, end int64) error) (int, error) {
	var (
		code int
		err  error
	)
	caps := h.Capabilities()
	if caps.BackgroundProcesses && caps.KillableProcesses {
		code, err = j.follow(ctx, h, from, fn)
	} else {
		code, err = j.poll(ctx, h, from, fn)
	}
	if err != nil {
		return 0, err
	}
	return code, nil
}

// Remove deletes the journal, its stderr sidecar and the files beside it.
func (j Journal) Remove(ctx context.Context, h sandbox.Handle) error {
	return j.remove(ctx, h, true)
}

// remove is Remove; withCancel false keeps the cancel file, which the
// agent's watchdog may not have seen yet (the sweep takes it later).
func (j Journal) remove(ctx context.Context, h sandbox.Handle, withCancel bool) error {
	files := []string{j.Path(), j.ErrPath(), j.promptPath(), j.pidPath(), j.basePath(), j.lockPath()}
	if withCancel {
		files = append(files, j.cancelPath())
	}
	for i, f := range files {
		files[i] = sandbox.Quote(f)
	}
	_, err := h.Exec(ctx, "rm -f "+strings.Join(files, " "), j.execOpts())
	return err
}

func (j Journal) promptPath() string { return path.Join(j.Dir, EncodeRunID(j.RunID)+".prompt") }

var errSentinel = errors.New("sentinel")

// lines splits buf into complete lines, calling fn for each, and returns
// the unconsumed tail. It stops at the sentinel with errSentinel.
func (j Journal) lines(buf []byte, pos *int64, code *int, fn func([]byte, int64) error) ([]byte, error) {
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return buf, nil
		}
		line := buf[:i]
		*pos += int64(i + 1)
		buf = buf[i+1:]
		if c, ok := j.sentinel(bytes.TrimSpace(line)); ok {
			*code = c
			return buf, errSentinel
		}
		if err := fn(line, *pos); err != nil {
			return buf, err
		}
	}
}

// JournalLivenessInterval is how often a reader that waits on a journal
// checks that its agent is still alive.
const JournalLivenessInterval = time.Second

// ErrAgentLost reports an agent that died without writing its exit
// sentinel: nothing holds its journal lock any more. A bubblewrap sandbox,
// for one, ends with the server that started it.
var ErrAgentLost = errors.New("harness: the agent died before it finished (no exit sentinel, and none of its processes is left)")

func (j Journal) follow(ctx context.Context, h sandbox.Handle, from int64, fn func([]byte, int64) error) (int, error) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := "mkdir -p " + sandbox.Quote(j.Dir) + "; : >> " + sandbox.Quote(j.Path()) + "; exec tail -c +" + strconv.FormatInt(from+1, 10) + " -f " + sandbox.Quote(j.Path()) + " 2>/dev/null"
	p, err := h.Spawn(fctx, cmd, j.execOpts())
	if err != nil {
		return 0, fmt.Errorf("harness: follow the journal: %w", err)
	}
	defer func() {
		_ = p.Kill(killSignal)
		_, _ = p.Wait(context.WithoutCancel(ctx))
	}()
	// tail -f never ends by itself: a dead agent is noticed beside it.
	gone := make(chan struct{})
	go func() {
		if j.awaitGone(fctx, h) {
			close(gone)
			_ = p.Kill(killSignal)
		}
	}()
	pos, code := from, 0
	var pending []byte
	buf := make([]byte, 64<<10)
	for {
		n, rerr := p.Stdout().Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			var lerr error
			if pending, lerr = j.lines(pending, &pos, &code, fn); lerr != nil {
				if errors.Is(lerr, errSentinel) {
					return code, nil
				}
				return 0, lerr
			}
		}
		if rerr != nil {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			select {
			case <-gone:
				return j.finalRead(ctx, h, pos, fn)
			default:
			}
			if rerr == io.EOF {
				return 0, fmt.Errorf("harness: the journal reader ended before the agent's exit sentinel")
			}
			return 0, fmt.Errorf("harness: read the journal: %w", rerr)
		}
	}
}

// awaitGone returns true once the agent is known to be gone, false when
// ctx ends first. Gone means two probes in a row found the lock free: one
// could fall between the launcher creating the lock file and locking it.
func (j Journal) awaitGone(ctx context.Context, h sandbox.Handle) bool {
	t := time.NewTicker(JournalLivenessInterval)
	defer t.Stop()
	free := 0
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			if j.agentGone(ctx, h) {
				free++
			} else {
				free = 0
			}
			if free == 2 {
				return true
			}
		}
	}
}

// finalRead reads what the journal holds past pos once its agent is gone:
// the sentinel, if it was written just before, or ErrAgentLost.
func (j Journal) finalRead(ctx context.Context, h sandbox.Handle, pos int64, fn func([]byte, int64) error) (int, error) {
	code, done, err := j.readFrom(ctx, h, &pos, fn)
	if err != nil {
		return 0, err
	}
	if done {
		return code, nil
	}
	return 0, ErrAgentLost
}

// readFrom reads the journal's complete lines past *pos once, advancing
// *pos; done reports the sentinel (with the exit code).
func (j Journal) readFrom(ctx context.Context, h sandbox.Handle, pos *int64, fn func([]byte, int64) error) (code int, done bool, err error) {
	res, err := h.Exec(ctx, "tail -c +"+strconv.FormatInt(*pos+1, 10)+" "+sandbox.Quote(j.Path())+" 2>/dev/null | base64", j.execOpts())
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return 0, false, cerr
		}
		return 0, false, fmt.Errorf("harness: poll the journal: %w", err)
	}
	data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(res.Stdout), ""))
	if err != nil {
		return 0, false, fmt.Errorf("harness: poll the journal: %w", err)
	}
	// Only whole lines advance the position; a partial tail is re-read.
	if _, lerr := j.lines(data, pos, &code, fn); lerr != nil {
		if errors.Is(lerr, errSentinel) {
			return code, true, nil
		}
		return 0, false, lerr
	}
	return 0, false, nil
}

func (j Journal) poll(ctx context.Context, h sandbox.Handle, from int64, fn func([]byte, int64) error) (int, error) {
	pos := from
	t := time.NewTicker(JournalPollInterval)
	defer t.Stop()
	lastCheck, free := time.Now(), 0
	for {
		before := pos
		code, done, err := j.readFrom(ctx, h, &pos, fn)
		if err != nil || done {
			return code, err
		}
		if pos != before {
			lastCheck, free = time.Now(), 0
		} else if time.Since(lastCheck) >= JournalLivenessInterval {
			// Two free probes in a row, as in awaitGone.
			lastCheck = time.Now()
			if !j.agentGone(ctx, h) {
				free = 0
			} else if free++; free == 2 {
				return j.finalRead(ctx, h, pos, fn)
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// stderrTail reads the last n bytes of the journal's stderr sidecar.
func (j Journal) stderrTail(ctx context.Context, h sandbox.Handle, n int) string {
	res, err := h.Exec(ctx, "tail -c "+strconv.Itoa(n)+" "+sandbox.Quote(j.ErrPath())+" 2>/dev/null", j.execOpts())
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ToValidUTF8(res.Stdout, ""))
}

// journal is the run's journal.
func (r *invocationRun) journal(dir, runID string) Journal {
	jdir := r.a.opts.JournalDir
	return Journal{Dir: jdir, RunID: runID, Cwd: dir}
}

// runJournaled starts the agent detached from the host with its output in
// the journal, then reads the journal until the sentinel. When the run's
// journal already exists, an earlier host launched the agent: this one
// attaches (spawns nothing) and reads the journal from its start.
func (r *invocationRun) runJournaled(ctx context.Context, j Journal, dir, base string, l *Launch, dec Decoder, yield func(agui.Event, error) bool) error {
	attached, err := j.launched(ctx, r.h)
	if err != nil {
		return err
	}
	if !attached {
		if err := r.launchJournaled(ctx, dir, base, j, l); err != nil {
			return err
		}
	} else {
		r.log.Info("harness: attaching to a running agent's journal", "category", "sandbox", "harness", r.a.agent.Name(), "runId", j.RunID)
	}
	return r.readJournal(ctx, j, dec, yield)
}

// ErrNoJournal reports a takeover of a run whose agent never started: the
// host died before launching it, so there is no journal to read.
var ErrNoJournal = errors.New("harness: the run's agent never started (no journal to attach to)")

// attachJournal reads the journal of an agent an earlier host launched.
func (r *invocationRun) attachJournal(ctx context.Context, j Journal, dec Decoder, yield func(agui.Event, error) bool) error {
	launched, err := j.launched(ctx, r.h)
	if err != nil {
		return err
	}
	if !launched {
		return ErrNoJournal
	}
	r.log.Info("harness: taking over a running agent: reading its journal from the start", "category", "sandbox", "harness", r.a.agent.Name(), "runId", j.RunID)
	return r.readJournal(ctx, j, dec, yield)
}

func (r *invocationRun) launchJournaled(ctx context.Context, dir, base string, j Journal, l *Launch) error {
	if res, err := r.h.Exec(ctx, "mkdir -p "+sandbox.Quote(j.Dir), j.execOpts()); err != nil || res.ExitCode != 0 {
		return fmt.Errorf("harness: create the journal directory: %v %s", err, res.Stderr)
	}
	// A successor's whole-tree diff must start from this baseline, not
	// from a tree the agent has already changed.
	if err := writeShellFile(ctx, r.h, j.execOpts(), j.basePath(), base); err != nil {
		return fmt.Errorf("harness: record the baseline: %w", err)
	}
	cmd := "( " + l.Command + " ) < /dev/null"
	if l.Stdin != "" {
		if err := writeShellFile(ctx, r.h, j.execOpts(), j.promptPath(), l.Stdin); err != nil {
			return fmt.Errorf("harness: write the prompt file: %w", err)
		}
		cmd = "( " + l.Command + " ) < " + sandbox.Quote(j.promptPath())
	}
	// The agent runs in its own session (setsid), so a host that dies takes
	// only the waiting shell with it where the sandbox lets processes
	// outlive their caller (local processes, containers); the waiting shell
	// keeps sandboxes that end with their command (bubblewrap) alive while
	// the host lives. The pid is recorded for a cancel; the lock, held by
	// the agent's process tree for as long as any of it lives, tells a
	// successor whether an agent that wrote no sentinel is still working.
	//
	// The waiting shell is also the agent's watchdog: it lives in the
	// agent's process namespace whatever the sandbox, so it can end the
	// agent's process group when a cancel file appears, which a host (this
	// one or a successor, in a command of its own) can always create.
	start := "setsid " + j.lockWrap(j.Wrap(cmd)) + " < /dev/null > /dev/null 2>&1 & a=$!; echo $a > " + sandbox.Quote(j.pidPath()) +
		"; while kill -0 $a 2>/dev/null; do if [ -e " + sandbox.Quote(j.cancelPath()) + " ]; then kill -9 -$a 2>/dev/null; break; fi; sleep 1; done; wait"
	p, err := r.h.Spawn(context.WithoutCancel(ctx), start, sandbox.ExecOptions{Dir: dir, Env: l.Env, Detach: true})
	if err != nil {
		return fmt.Errorf("harness: start %s: %w", r.a.agent.Name(), err)
	}
	if in := p.Stdin(); in != nil {
		_ = in.Close()
	}
	// The launcher lives as long as the agent, not as long as this run:
	// reap it when it ends.
	go func() {
		_, _ = io.Copy(io.Discard, p.Stdout())
		_, _ = io.Copy(io.Discard, p.Stderr())
		_, _ = p.Wait(context.Background())
	}()
	return nil
}

// writeShellFile writes content to an absolute path through the sandbox's
// shell (the journal directory lies outside the workspace the FS API
// serves), in base64 pieces that stay well under argv limits.
func writeShellFile(ctx context.Context, h sandbox.Handle, opts sandbox.ExecOptions, name, content string) error {
	enc := base64.StdEncoding.EncodeToString([]byte(content))
	op := ">"
	for first := true; first || enc != ""; first = false {
		n := min(len(enc), 64<<10)
		res, err := h.Exec(ctx, "umask 077 && printf %s "+sandbox.Quote(enc[:n])+" | base64 -d "+op+" "+sandbox.Quote(name), opts)
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
		}
		enc, op = enc[n:], ">>"
	}
	return nil
}

func (j Journal) pidPath() string { return path.Join(j.Dir, EncodeRunID(j.RunID)+".pid") }

func (j Journal) basePath() string { return path.Join(j.Dir, EncodeRunID(j.RunID)+".base") }

func (j Journal) lockPath() string { return path.Join(j.Dir, EncodeRunID(j.RunID)+".lock") }

// lockWrap runs the shell command cmd holding the journal's lock, where
// the sandbox has flock(1); elsewhere it runs cmd alone, and a successor
// cannot tell a dead agent from a silent one.
func (j Journal) lockWrap(cmd string) string {
	inner := "if command -v flock >/dev/null 2>&1; then exec flock " + sandbox.Quote(j.lockPath()) + " sh -c " + sandbox.Quote(cmd) + "; else exec sh -c " + sandbox.Quote(cmd) + "; fi"
	return "sh -c " + sandbox.Quote(inner)
}

// agentGone reports whether the journal's agent is known to have died
// without writing its sentinel: nothing holds its lock. Without flock(1),
// or when the probe fails, it is not known (false).
func (j Journal) agentGone(ctx context.Context, h sandbox.Handle) bool {
	res, err := h.Exec(ctx, "command -v flock >/dev/null 2>&1 || exit 2; test -e "+sandbox.Quote(j.lockPath())+" || exit 3; flock -n "+sandbox.Quote(j.lockPath())+" true", j.execOpts())
	return err == nil && res.ExitCode == 0
}

// baseline is the git baseline the launching host recorded for the run,
// or, when it recorded none, the workspace's current one.
func (j Journal) baseline(ctx context.Context, h sandbox.Handle, dir string, logger *slog.Logger) string {
	res, err := h.Exec(ctx, "cat "+sandbox.Quote(j.basePath()), j.execOpts())
	if err == nil && res.ExitCode == 0 {
		return strings.TrimSpace(res.Stdout)
	}
	return sandbox.Baseline(ctx, h, dir, logger)
}

// launched reports whether an agent was already started for this run.
func (j Journal) launched(ctx context.Context, h sandbox.Handle) (bool, error) {
	res, err := h.Exec(ctx, "test -e "+sandbox.Quote(j.pidPath())+" || test -e "+sandbox.Quote(j.Path()), j.execOpts())
	if err != nil {
		return false, fmt.Errorf("harness: look for the run's journal: %w", err)
	}
	return res.ExitCode == 0, nil
}

// kill stops the agent's process group: through its watchdog (the cancel
// file), which reaches it in any sandbox, and directly where this command
// shares the agent's process namespace.
func (j Journal) kill(ctx context.Context, h sandbox.Handle) {
	_, _ = h.Exec(ctx, ": > "+sandbox.Quote(j.cancelPath())+"; pid=$(cat "+sandbox.Quote(j.pidPath())+" 2>/dev/null) && [ -n \"$pid\" ] && kill -9 -\"$pid\" 2>/dev/null; true", j.execOpts())
}

func (j Journal) cancelPath() string { return path.Join(j.Dir, EncodeRunID(j.RunID)+".cancel") }

// readJournal translates a journal from its start until the sentinel. A
// cancel stops the agent; a host that merely goes away (a disconnect, a
// shutdown) leaves it working for a successor.
func (r *invocationRun) readJournal(ctx context.Context, j Journal, dec Decoder, yield func(agui.Event, error) bool) error {
	code, err := j.Read(ctx, r.h, 0, func(line []byte, _ int64) error {
		return r.line(line, dec, yield)
	})
	if err != nil && errors.Is(context.Cause(ctx), chat.ErrCancelRequested) {
		// Cancelled: the run is over, and nobody will read the journal.
		bg := context.WithoutCancel(ctx)
		j.kill(bg, r.h)
		if rerr := j.remove(bg, r.h, false); rerr != nil {
			r.log.Warn("harness: remove the journal", "category", "errors", "err", rerr)
		}
	}
	if err != nil {
		return err
	}
	bg := context.WithoutCancel(ctx)
	var exitErr error
	if code != 0 {
		exitErr = &ExitError{Harness: r.a.agent.Name(), Code: code, Stderr: j.stderrTail(bg, r.h, r.a.opts.StderrTail)}
	}
	if err := j.Remove(bg, r.h); err != nil {
		r.log.Warn("harness: remove the journal", "category", "errors", "err", err)
	}
	return exitErr
}
