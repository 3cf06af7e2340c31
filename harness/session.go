package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/sandbox"
)

// Session is what a Conversing agent works with: the sandbox, the agent's
// process, the invocation, and a thread-safe way to report events.
type Session struct {
	Handle     sandbox.Handle
	Process    sandbox.Process
	Invocation *Invocation
	// RealDir is the working directory as the agent sees it (an absolute
	// path in the sandbox's own filesystem).
	RealDir string
	// Logger receives the protocol's diagnostics.
	Logger *slog.Logger

	mu      sync.Mutex
	em      *Emitter
	changed chan struct{}
}

// Report runs fn with the emitter under the session's lock and wakes the
// adapter to deliver what fn emitted. It is safe from any goroutine.
func (s *Session) Report(fn func(e *Emitter)) {
	s.mu.Lock()
	fn(s.em)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// VirtualPath maps a path the agent uses to the sandbox's virtual path
// (what the FS API takes): paths under RealDir are rebased on the
// working directory; other absolute paths are refused.
func (s *Session) VirtualPath(p string) (string, error) {
	if s.RealDir != "" && (p == s.RealDir || strings.HasPrefix(p, s.RealDir+"/")) {
		return joinPath(s.Invocation.Dir, strings.TrimPrefix(strings.TrimPrefix(p, s.RealDir), "/")), nil
	}
	if !strings.HasPrefix(p, "/") {
		return joinPath(s.Invocation.Dir, p), nil
	}
	return "", fmt.Errorf("path %s is outside the workspace %s", p, s.RealDir)
}

func (r *invocationRun) runConversation(ctx context.Context, dir string, l *Launch, inv *Invocation, ag Conversing, yield func(agui.Event, error) bool) error {
	if !r.h.Capabilities().WritableStdin {
		return fmt.Errorf("harness: %s talks to its agent over stdin, which this sandbox (%s) does not offer", ag.Name(), r.h.Provider())
	}
	pwd, err := r.h.Exec(ctx, "pwd -P", sandbox.ExecOptions{Dir: dir})
	if err != nil || pwd.ExitCode != 0 {
		return fmt.Errorf("harness: resolve the working directory: %v %s", err, pwd.Stderr)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := r.h.Spawn(cctx, l.Command, sandbox.ExecOptions{Dir: dir, Env: l.Env})
	if err != nil {
		return fmt.Errorf("harness: start %s: %w", ag.Name(), err)
	}
	stderr := newTail(r.a.opts.StderrTail)
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		_, _ = io.Copy(stderr, p.Stderr())
	}()
	s := &Session{Handle: r.h, Process: p, Invocation: inv, RealDir: strings.TrimSpace(pwd.Stdout), Logger: r.log, em: &r.em, changed: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("harness: %s session panicked: %v", ag.Name(), v)
			}
		}()
		done <- ag.Converse(cctx, s)
	}()
	deliver := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return r.flush(yield)
	}
	var convErr error
loop:
	for {
		select {
		case <-s.changed:
			if !deliver() {
				cancel()
				<-done
				convErr = errStopped
				break loop
			}
		case convErr = <-done:
			deliver()
			break loop
		}
	}
	if in := p.Stdin(); in != nil {
		_ = in.Close()
	}
	_ = p.Kill(killSignal)
	_, _ = p.Wait(context.WithoutCancel(ctx))
	<-stderrDone
	if errors.Is(convErr, errStopped) {
		return convErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if convErr != nil {
		if tail := strings.TrimSpace(stderr.String()); tail != "" {
			return fmt.Errorf("%w (stderr: %s)", convErr, tail)
		}
		return convErr
	}
	return nil
}
