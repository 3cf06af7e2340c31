package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// pipeProc is a Process whose stdout the test controls.
type pipeProc struct {
	stdinR  *io.PipeReader
	stdinW  *io.PipeWriter
	stdoutR *io.PipeReader
	stdoutW *io.PipeWriter
}

func newPipeProc() *pipeProc {
	p := &pipeProc{}
	p.stdinR, p.stdinW = io.Pipe()
	p.stdoutR, p.stdoutW = io.Pipe()
	go io.Copy(io.Discard, p.stdinR)
	return p
}

func (p *pipeProc) PID() int                          { return 1 }
func (p *pipeProc) Stdin() io.WriteCloser             { return p.stdinW }
func (p *pipeProc) Stdout() io.Reader                 { return p.stdoutR }
func (p *pipeProc) Stderr() io.Reader                 { return strings.NewReader("") }
func (p *pipeProc) Wait(context.Context) (int, error) { return 0, nil }
func (p *pipeProc) Kill(os.Signal) error {
	p.stdoutW.Close()
	p.stdinR.Close()
	return nil
}

type spawnHandle struct {
	Handle
	p *pipeProc
}

func (s spawnHandle) Spawn(context.Context, string, ExecOptions) (Process, error) { return s.p, nil }

func TestItem14PersistentShellRejects(t *testing.T) {
	ctx := context.Background()
	// stdout ends before the sentinel: rejected promptly.
	p := newPipeProc()
	sh, err := startPersistentShell(ctx, spawnHandle{p: p}, "/workspace", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		io.WriteString(p.stdoutW, "partial\n")
		p.stdoutW.Close()
	}()
	start := time.Now()
	_, _, err = sh.run(ctx, "echo hi")
	if !errors.Is(err, errShellEnded) || time.Since(start) > time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
	sh.close()

	// A silent shell is rejected by the deadline.
	p2 := newPipeProc()
	sh2, _ := startPersistentShell(ctx, spawnHandle{p: p2}, "/workspace", 50*time.Millisecond)
	_, _, err = sh2.run(ctx, "sleep 100")
	if err == nil || !strings.Contains(err.Error(), "exceeded") {
		t.Fatalf("err %v", err)
	}
	sh2.close()

	// The sentinel ends a command with its exit code.
	p3 := newPipeProc()
	sh3, _ := startPersistentShell(ctx, spawnHandle{p: p3}, "/workspace", time.Minute)
	go io.WriteString(p3.stdoutW, "a\nb\n\n__BSSH_0__ 7\n")
	out, code, err := sh3.run(ctx, "x")
	if err != nil || code != 7 || out != "a\nb" {
		t.Fatalf("out %q code %d err %v", out, code, err)
	}
	sh3.close()
}
