package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
)

// ErrDestroyed is returned for commands on a destroyed handle.
var ErrDestroyed = errors.New("docker: sandbox destroyed")

const (
	// markerVar is set on every exec to a fresh value, so that the
	// processes of one command can be found (and signalled) in the
	// container: children inherit it.
	markerVar = "GOAI_SANDBOX_EXEC"
	// teardownTimeout bounds kills and removals run after the caller's
	// context is done.
	teardownTimeout = 30 * time.Second
	basePath        = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// killScript signals every process whose environment holds the marker ($1)
// with signal number $2; unless that was SIGKILL, the survivors get SIGKILL
// after 200 ms. It exits 3 when it found no process.
const killScript = `m="$1"; s="$2"
pids() {
	for d in /proc/[0-9]*; do
		[ "${d#/proc/}" = "$$" ] && continue
		tr '\000' '\n' < "$d/environ" 2>/dev/null | grep -qxF "` + markerVar + `=$m" && printf '%s\n' "${d#/proc/}"
	done
}
p=$(pids)
[ -n "$p" ] || exit 3
kill -"$s" $p 2>/dev/null
[ "$s" = 9 ] && exit 0
i=0
while [ $i -lt 4 ]; do
	sleep 0.05
	p=$(pids)
	[ -n "$p" ] || exit 0
	i=$((i + 1))
done
kill -9 $p 2>/dev/null
exit 0`

// execution is one Docker exec with its output being demultiplexed.
type execution struct {
	h      *Handle
	id     string
	marker string
	hr     client.HijackedResponse
	exited chan struct{} // closed once the streams ended and code is set
	code   int
	quick  bool // skip the exit-code inspection (cancelled)
	mu     sync.Mutex
}

func (h *Handle) environ(extra map[string]string, marker string) []string {
	env := map[string]string{"PATH": basePath, "HOME": "/root"}
	h.mu.Lock()
	maps.Copy(env, h.env)
	h.mu.Unlock()
	maps.Copy(env, extra)
	env[markerVar] = marker
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// startExec creates and attaches an exec running argv in dir. Output is
// demultiplexed into stdout and stderr by a goroutine, which then calls
// onCopied (if set), reads the exit code and closes exited.
func (h *Handle) startExec(ctx context.Context, argv []string, dir string, env map[string]string, attachStdin bool, stdout, stderr io.Writer, onCopied func()) (*execution, error) {
	if h.isDestroyed() {
		return nil, ErrDestroyed
	}
	x := &execution{h: h, marker: randomID(), exited: make(chan struct{})}
	cr, err := h.p.cli.ExecCreate(ctx, h.id, client.ExecCreateOptions{
		Cmd:          argv,
		AttachStdin:  attachStdin,
		AttachStdout: true,
		AttachStderr: true,
		WorkingDir:   dir,
		Env:          h.environ(env, x.marker),
	})
	if err != nil {
		return nil, fmt.Errorf("docker: exec create: %w", err)
	}
	x.id = cr.ID
	// The stream outlives ctx: cancellation is handled by killing the
	// command, which ends the stream.
	ar, err := h.p.cli.ExecAttach(context.WithoutCancel(ctx), cr.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("docker: exec attach: %w", err)
	}
	x.hr = ar.HijackedResponse
	go func() {
		_, _ = stdcopy.StdCopy(stdout, stderr, x.hr.Reader)
		x.hr.Close()
		if onCopied != nil {
			onCopied()
		}
		x.code = x.exitCode()
		close(x.exited)
	}()
	return x, nil
}

// exitCode reads the exit code once the exec has stopped running; -1 when
// it cannot be known (the container is gone, or the exec was cancelled).
func (x *execution) exitCode() int {
	x.mu.Lock()
	quick := x.quick
	x.mu.Unlock()
	if quick {
		return -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		res, err := x.h.p.cli.ExecInspect(ctx, x.id, client.ExecInspectOptions{})
		if err != nil {
			return -1
		}
		if !res.Running {
			return res.ExitCode
		}
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// kill signals every process of the command (see killScript). The
// attach response can arrive before the daemon has started the process, so
// when no process is found and the exec has not started yet, it retries for
// up to 2 s.
func (x *execution) kill(sig syscall.Signal) error {
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var stderr bytes.Buffer
		code, err := x.h.run(ctx, []string{"sh", "-c", killScript, "sh", x.marker, strconv.Itoa(int(sig))}, "/", nil, nil, io.Discard, &stderr)
		if err != nil {
			if errors.Is(err, ErrDestroyed) {
				return nil
			}
			return fmt.Errorf("docker: kill: %w", err)
		}
		switch code {
		case 0:
			return nil
		case 3: // nothing found: not started yet, or already gone
		default:
			return fmt.Errorf("docker: kill: exit %d: %s", code, stderr.String())
		}
		select {
		case <-x.exited:
			return nil
		default:
		}
		res, err := x.h.p.cli.ExecInspect(ctx, x.id, client.ExecInspectOptions{})
		if err != nil || res.Running || res.PID != 0 || time.Now().After(deadline) {
			return nil // started and gone (or the container is)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cancel kills the command after its context is done and waits for the
// stream to end.
func (x *execution) cancel() {
	x.mu.Lock()
	x.quick = true
	x.mu.Unlock()
	if err := x.kill(syscall.SIGTERM); err != nil {
		x.h.p.logger.Warn("docker: killing a cancelled command failed", "category", chat.CatErrors, "container", x.h.id, "error", err)
	}
	x.hr.Close()
	<-x.exited
}

// run executes argv to completion, feeding stdin (if not nil) and writing
// the output to stdout and stderr. A cancelled ctx kills the command.
func (h *Handle) run(ctx context.Context, argv []string, dir string, env map[string]string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	x, err := h.startExec(ctx, argv, dir, env, stdin != nil, stdout, stderr, nil)
	if err != nil {
		return -1, err
	}
	if stdin != nil {
		go func() {
			_, _ = io.Copy(x.hr.Conn, stdin)
			_ = x.hr.CloseWrite()
		}()
	}
	select {
	case <-x.exited:
		return x.code, nil
	case <-ctx.Done():
		x.cancel()
		return -1, ctx.Err()
	}
}

// Exec runs cmd with sh -c in the container and buffers at most
// ExecOptions.MaxOutputBytes (else Options.MaxOutputBytes, else
// sandbox.DefaultMaxOutputBytes) of each stream. If
// ctx is cancelled the command's processes are killed and ctx's error is
// returned.
func (h *Handle) Exec(ctx context.Context, cmd string, opts sandbox.ExecOptions) (sandbox.ExecResult, error) {
	dir, err := h.execDir(ctx, opts.Dir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	limit := sandbox.OutputLimit(opts.MaxOutputBytes, h.p.opts.MaxOutputBytes)
	stdout, stderr := &sandbox.CappedBuffer{Max: limit}, &sandbox.CappedBuffer{Max: limit}
	code, err := h.run(ctx, []string{"sh", "-c", cmd}, dir, opts.Env, nil, stdout, stderr)
	res := sandbox.ExecResult{
		Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: code,
		Truncated:     stdout.Truncated() || stderr.Truncated(),
		StdoutDropped: stdout.Dropped(), StderrDropped: stderr.Dropped(),
	}
	if err != nil {
		return res, fmt.Errorf("docker: exec: %w", err)
	}
	return res, nil
}

// Spawn starts cmd with sh -c in the container and streams its output.
// Stdin is writable; closing it half-closes the connection, so output
// keeps flowing. Output is buffered without bound until read, so a reader
// that lags never stalls the command or Wait. Cancelling ctx kills the
// command. PID is -1: the process lives in the container's PID namespace.
func (h *Handle) Spawn(ctx context.Context, cmd string, opts sandbox.ExecOptions) (sandbox.Process, error) {
	dir, err := h.execDir(ctx, opts.Dir)
	if err != nil {
		return nil, err
	}
	out, errp := newBufPipe(), newBufPipe()
	x, err := h.startExec(ctx, []string{"sh", "-c", cmd}, dir, opts.Env, true, out, errp, func() {
		out.Close()
		errp.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("docker: spawn: %w", err)
	}
	p := &process{
		x:      x,
		stdin:  &stdinWriter{hr: x.hr},
		stdout: sandbox.NewUTF8Reader(out),
		stderr: sandbox.NewUTF8Reader(errp),
	}
	stop := context.AfterFunc(ctx, func() { _ = p.Kill(nil) })
	go func() {
		<-x.exited
		stop()
	}()
	return p, nil
}

type process struct {
	x      *execution
	stdin  *stdinWriter
	stdout io.Reader
	stderr io.Reader
}

func (p *process) PID() int              { return -1 }
func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

// Wait waits until the command's output streams end (the command and every
// process holding them exited) and returns the exit code; -1 when the
// container went away first.
func (p *process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.x.exited:
		return p.x.code, nil
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// Kill signals every process of the command (SIGTERM when sig is nil),
// then SIGKILLs survivors after 200 ms. It returns once they are gone; an
// exited command is not an error.
func (p *process) Kill(sig os.Signal) error {
	select {
	case <-p.x.exited:
		return nil
	default:
	}
	s := syscall.SIGTERM
	if ss, ok := sig.(syscall.Signal); ok {
		s = ss
	}
	return p.x.kill(s)
}

// stdinWriter is the write side of the hijacked exec connection.
type stdinWriter struct {
	hr   client.HijackedResponse
	once sync.Once
	err  error
}

func (w *stdinWriter) Write(b []byte) (int, error) { return w.hr.Conn.Write(b) }

// Close ends the command's stdin (a half-close: output keeps flowing).
func (w *stdinWriter) Close() error {
	w.once.Do(func() { w.err = w.hr.CloseWrite() })
	return w.err
}

// bufPipe is an unbounded in-memory pipe: writes never block.
type bufPipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    bytes.Buffer
	closed bool
}

func newBufPipe() *bufPipe {
	p := &bufPipe{}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *bufPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, io.ErrClosedPipe
	}
	p.buf.Write(b)
	p.cond.Broadcast()
	return len(b), nil
}

func (p *bufPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.buf.Len() == 0 && !p.closed {
		p.cond.Wait()
	}
	if p.buf.Len() == 0 {
		return 0, io.EOF
	}
	return p.buf.Read(b)
}

func (p *bufPipe) Close() error {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	return nil
}
