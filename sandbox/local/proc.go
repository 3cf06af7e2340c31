package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
)

// ErrDestroyed is returned for commands on a destroyed handle.
var ErrDestroyed = errors.New("local: sandbox destroyed")

// killGrace is how long a cancelled command has between SIGTERM and SIGKILL.
const killGrace = 2 * time.Second

// bwrapKillGrace is how long a bubblewrap command has after Kill before
// its group gets SIGKILL.
const bwrapKillGrace = 200 * time.Millisecond

func (h *Handle) environ(extra map[string]string) []string {
	var env []string
	if h.p.opts.Isolation == IsolationBubblewrap {
		for k, v := range isolatedEnviron() {
			env = append(env, k+"="+v)
		}
	} else {
		scrub := map[string]bool{}
		for _, k := range h.p.opts.ScrubEnv {
			scrub[k] = true
		}
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			if !scrub[k] {
				env = append(env, kv)
			}
		}
	}
	h.mu.Lock()
	for k, v := range h.env {
		env = append(env, k+"="+v) // exec keeps the last duplicate
	}
	h.mu.Unlock()
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// command builds the host command for a shell string. ns is set for a
// bubblewrapped command: call ns.started after Start, ns.abort if Start
// fails.
func (h *Handle) command(ctx context.Context, cmd string, opts sandbox.ExecOptions) (c *exec.Cmd, ns *nsInit, err error) {
	h.mu.Lock()
	destroyed := h.destroyed
	h.mu.Unlock()
	if destroyed {
		return nil, nil, ErrDestroyed
	}
	dir, err := h.resolve(opts.Dir, true)
	if err != nil {
		return nil, nil, err
	}
	if h.p.opts.Isolation == IsolationBubblewrap {
		if ns, err = newNSInit(); err != nil {
			return nil, nil, fmt.Errorf("local: %w", err)
		}
		c = exec.CommandContext(ctx, h.p.bwrap(), h.bwrapArgs(dir, cmd, opts.Detach)...)
		c.ExtraFiles = []*os.File{ns.w} // fd 3: --info-fd
	} else {
		c = exec.CommandContext(ctx, "sh", "-c", cmd)
	}
	c.Dir = dir
	c.Env = h.environ(opts.Env)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error {
		pid := c.Process.Pid
		err := syscall.Kill(-pid, syscall.SIGTERM)
		time.AfterFunc(killGrace, func() {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			if ns != nil {
				ns.kill(killGrace)
			}
		})
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	c.WaitDelay = killGrace + time.Second
	return c, ns, nil
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func execResult(stdout, stderr *sandbox.CappedBuffer, code int) sandbox.ExecResult {
	return sandbox.ExecResult{
		Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: code,
		Truncated:     stdout.Truncated() || stderr.Truncated(),
		StdoutDropped: stdout.Dropped(), StderrDropped: stderr.Dropped(),
	}
}

// Exec runs cmd with sh -c to completion, buffering at most
// ExecOptions.MaxOutputBytes (else Options.MaxOutputBytes, else
// sandbox.DefaultMaxOutputBytes) of each stream. A process killed by a signal
// reports 128+signal. If ctx is cancelled the process group is killed and
// ctx's error is returned.
func (h *Handle) Exec(ctx context.Context, cmd string, opts sandbox.ExecOptions) (sandbox.ExecResult, error) {
	c, ns, err := h.command(ctx, cmd, opts)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	limit := sandbox.OutputLimit(opts.MaxOutputBytes, h.p.opts.MaxOutputBytes)
	stdout, stderr := &sandbox.CappedBuffer{Max: limit}, &sandbox.CappedBuffer{Max: limit}
	c.Stdout, c.Stderr = stdout, stderr
	if err := c.Start(); err != nil {
		if ns != nil {
			ns.abort()
		}
		return sandbox.ExecResult{}, fmt.Errorf("local: exec: %w", err)
	}
	if ns != nil {
		ns.started(h.reg)
		defer func() { <-ns.ready }() // the reader ends with bwrap
	}
	h.reg.add(c.Process.Pid)
	err = c.Wait()
	res := execResult(stdout, stderr, exitCode(c.ProcessState))
	if ctx.Err() != nil {
		return res, fmt.Errorf("local: exec: %w", ctx.Err())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return res, fmt.Errorf("local: exec: %w", err)
	}
	return res, nil
}

// Spawn starts cmd with sh -c. Cancelling ctx kills the process group.
func (h *Handle) Spawn(ctx context.Context, cmd string, opts sandbox.ExecOptions) (sandbox.Process, error) {
	c, ns, err := h.command(ctx, cmd, opts)
	if err != nil {
		return nil, err
	}
	if ns != nil {
		started := false
		defer func() {
			if !started {
				ns.abort()
			}
		}()
		defer func() {
			if c.Process != nil && !started {
				started = true
				ns.started(h.reg)
			}
		}()
	}
	stdin, err := c.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("local: spawn: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("local: spawn: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("local: spawn: %w", err)
	}
	c.Stdout, c.Stderr = outW, errW
	// Wait must not close the read ends (readers may lag), so the pipes are
	// ours: WaitDelay would otherwise hang on grandchildren holding them.
	c.WaitDelay = 0
	if err := c.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, fmt.Errorf("local: spawn: %w", err)
	}
	outW.Close()
	errW.Close()
	h.reg.add(c.Process.Pid)
	p := &process{
		h: h, c: c, ns: ns, stdin: stdin, done: make(chan struct{}),
		stdout: sandbox.NewUTF8Reader(&closeOnEOF{f: outR}),
		stderr: sandbox.NewUTF8Reader(&closeOnEOF{f: errR}),
	}
	go func() {
		p.waitErr = c.Wait()
		p.code = exitCode(c.ProcessState)
		if ns != nil {
			<-ns.ready // the reader ends with bwrap
		}
		close(p.done)
	}()
	return p, nil
}

// closeOnEOF closes the file once it has been read to EOF.
type closeOnEOF struct {
	f    *os.File
	once sync.Once
}

func (c *closeOnEOF) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	if err != nil {
		c.once.Do(func() { c.f.Close() })
		if errors.Is(err, os.ErrClosed) {
			err = io.EOF
		}
	}
	return n, err
}

type process struct {
	h       *Handle
	c       *exec.Cmd
	ns      *nsInit // bubblewrap only
	stdin   io.WriteCloser
	stdout  io.Reader
	stderr  io.Reader
	done    chan struct{}
	code    int
	waitErr error
}

func (p *process) PID() int              { return p.c.Process.Pid }
func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

func (p *process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return p.code, nil
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// Kill signals the process group (SIGTERM when sig is nil). A process that
// is already gone is not an error.
func (p *process) Kill(sig os.Signal) error {
	s := syscall.SIGTERM
	if ss, ok := sig.(syscall.Signal); ok {
		s = ss
	}
	select {
	case <-p.done:
		if syscall.Kill(-p.PID(), 0) != nil {
			return nil
		}
	default:
	}
	err := syscall.Kill(-p.PID(), s)
	if err == nil && p.h.p.opts.Isolation == IsolationBubblewrap && s != syscall.SIGKILL {
		// The namespace's init ignores signals from outside it but SIGKILL,
		// and --die-with-parent is not armed during bwrap's setup: finish
		// the group off if the signal did not.
		pid := p.PID()
		time.AfterFunc(bwrapKillGrace, func() {
			// The namespace first: its init is in a session of its own,
			// out of the group's reach, and may outlive bwrap.
			p.ns.kill(2 * time.Second)
			select {
			case <-p.done:
				if !groupAlive(pid) {
					return
				}
			default:
			}
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		})
	} else if err == nil && p.ns != nil {
		go p.ns.kill(2 * time.Second)
	}
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	p.h.p.logger.Warn("local: kill process group failed; signalling the process", "category", chat.CatErrors, "pid", p.PID(), "error", err)
	return p.c.Process.Signal(s)
}
