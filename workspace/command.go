package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/goai-sdk/goai/sandbox"
)

// RunCommandInput is run_command's input.
type RunCommandInput struct {
	Command        string `json:"command" jsonschema:"shell command, run with sh -c in the workspace root"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds; default and maximum set by the server"`
}

// RunCommandOutput is run_command's result.
type RunCommandOutput struct {
	Command  string `json:"command"`
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Truncated says some output was left out (the middle of a long
	// stream).
	Truncated bool `json:"truncated,omitempty"`
}

// PolicyError is a command the policy denies.
type PolicyError struct {
	Command string
	Pattern string // "" when the policy's default denied it
}

func (e *PolicyError) Error() string {
	if e.Pattern == "" {
		return fmt.Sprintf("the command %q is not allowed here (the command policy denies commands it does not list); do not retry it", e.Command)
	}
	return fmt.Sprintf("the command %q is not allowed here (the command policy denies %q); do not retry it", e.Command, e.Pattern)
}

// outputKillFactor: a command that prints this many times the output cap
// on one stream is killed rather than drained.
const outputKillFactor = 64

func (ts *toolset) runCommand(ctx context.Context, in RunCommandInput) (RunCommandOutput, error) {
	cmd := strings.TrimSpace(in.Command)
	if cmd == "" {
		return RunCommandOutput{}, errors.New("run_command: command is empty")
	}
	if in.TimeoutSeconds < 0 {
		return RunCommandOutput{}, errors.New("run_command: timeout_seconds must be positive")
	}
	// Deny is final even when the call was approved: approval only answers
	// the commands the policy asks about.
	if d, pat := ts.opts.Policy.Match(cmd); d == Deny {
		return RunCommandOutput{}, &PolicyError{Command: cmd, Pattern: pat}
	}
	h, err := ts.handle(ctx)
	if err != nil {
		return RunCommandOutput{}, err
	}
	timeout := ts.opts.CommandTimeout
	if in.TimeoutSeconds > 0 && time.Duration(in.TimeoutSeconds)*time.Second < timeout {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := ts.spawn(cctx, h, cmd)
	if errors.Is(err, sandbox.ErrUnsupported) {
		res, err = ts.exec(cctx, h, cmd)
	}
	res.Command = cmd
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("run_command: the run was cancelled while %q ran", cmd)
	case cctx.Err() != nil:
		return res, fmt.Errorf("run_command: %q did not finish within %s and was killed; output so far:\n%s", cmd, timeout, tail(res))
	case err != nil:
		return res, fmt.Errorf("run_command: %w", err)
	}
	return res, nil
}

// tail summarises partial output for an error message.
func tail(r RunCommandOutput) string {
	s := r.Stdout
	if r.Stderr != "" {
		s += "\n[stderr]\n" + r.Stderr
	}
	if s == "" {
		return "(none)"
	}
	return s
}

// spawn runs cmd streaming its output into bounded buffers, so a command
// that prints gigabytes costs a bounded amount of memory.
func (ts *toolset) spawn(ctx context.Context, h sandbox.Handle, cmd string) (RunCommandOutput, error) {
	p, err := h.Spawn(ctx, cmd, sandbox.ExecOptions{})
	if err != nil {
		return RunCommandOutput{}, err
	}
	if in := p.Stdin(); in != nil {
		_ = in.Close()
	}
	limit := ts.opts.MaxOutputBytes
	stdout, stderr := newCapBuffer(limit), newCapBuffer(limit)
	var flood sync.Once
	floodKill := func() { flood.Do(func() { _ = p.Kill(syscall.SIGKILL) }) }
	var wg sync.WaitGroup
	for _, s := range []struct {
		r io.Reader
		b *capBuffer
	}{{p.Stdout(), stdout}, {p.Stderr(), stderr}} {
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := s.r.Read(buf)
				s.b.Write(buf[:n])
				if s.b.total > int64(limit)*outputKillFactor {
					floodKill()
				}
				if err != nil {
					return
				}
			}
		})
	}
	code, werr := p.Wait(ctx)
	if werr != nil {
		// Timed out or cancelled: kill the group and collect what it printed.
		_ = p.Kill(syscall.SIGKILL)
		code, _ = p.Wait(context.Background())
	}
	wg.Wait()
	out := RunCommandOutput{ExitCode: code, Stdout: stdout.String(), Stderr: stderr.String(), Truncated: stdout.cut() || stderr.cut()}
	if werr == nil && (stdout.total > int64(limit)*outputKillFactor || stderr.total > int64(limit)*outputKillFactor) {
		return out, fmt.Errorf("%q printed more than %d bytes and was killed; output (cut in the middle):\n%s", cmd, int64(limit)*outputKillFactor, tail(out))
	}
	return out, werr
}

// exec is the fallback for providers without Spawn: output is capped after
// the fact.
func (ts *toolset) exec(ctx context.Context, h sandbox.Handle, cmd string) (RunCommandOutput, error) {
	r, err := h.Exec(ctx, cmd, sandbox.ExecOptions{})
	stdout, stderr := newCapBuffer(ts.opts.MaxOutputBytes), newCapBuffer(ts.opts.MaxOutputBytes)
	stdout.Write([]byte(r.Stdout))
	stderr.Write([]byte(r.Stderr))
	return RunCommandOutput{ExitCode: r.ExitCode, Stdout: stdout.String(), Stderr: stderr.String(), Truncated: stdout.cut() || stderr.cut()}, err
}

// capBuffer keeps the first and last limit/2 bytes of a stream and counts
// the rest.
type capBuffer struct {
	mu         sync.Mutex
	half       int
	head, ring []byte
	pos        int // next write position in ring once full
	total      int64
}

func newCapBuffer(limit int) *capBuffer {
	return &capBuffer{half: max(limit/2, 1)}
}

func (b *capBuffer) Write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	if n := min(b.half-len(b.head), len(p)); n > 0 {
		b.head = append(b.head, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 {
		if len(b.ring) < b.half {
			n := min(b.half-len(b.ring), len(p))
			b.ring = append(b.ring, p[:n]...)
			p = p[n:]
			continue
		}
		n := copy(b.ring[b.pos:], p)
		b.pos = (b.pos + n) % b.half
		p = p[n:]
	}
}

func (b *capBuffer) cut() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total > int64(len(b.head)+len(b.ring))
}

// String is the kept output; a cut is marked with the number of bytes
// left out, at valid UTF-8 boundaries.
func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tailBytes := append(append([]byte(nil), b.ring[b.pos:]...), b.ring[:b.pos]...)
	dropped := b.total - int64(len(b.head)+len(tailBytes))
	if dropped <= 0 {
		return strings.ToValidUTF8(string(b.head)+string(tailBytes), "\uFFFD")
	}
	head := b.head
	for len(head) > 0 && !utf8.Valid(head) {
		head = head[:len(head)-1]
	}
	for len(tailBytes) > 0 && !utf8.RuneStart(tailBytes[0]) {
		tailBytes = tailBytes[1:]
	}
	return fmt.Sprintf("%s\n[… %d bytes left out …]\n%s", head, dropped, strings.ToValidUTF8(string(tailBytes), "\uFFFD"))
}
