package sandbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// shell runs setup commands with state (cwd, exports) carried over.
type shell interface {
	run(ctx context.Context, cmd string) (output string, exitCode int, err error)
	// forkState returns the cwd and an `export -p` script.
	forkState(ctx context.Context) (cwd, env string, err error)
}

// errShellEnded is returned when the persistent shell's stdout ends before
// a command's sentinel.
var errShellEnded = errors.New("sandbox: persistent shell ended before the command finished")

// DefaultShellDeadline bounds one persistent-shell command.
const DefaultShellDeadline = 30 * time.Minute

type persistentShell struct {
	p        Process
	lines    chan string // closed at EOF
	n        int
	deadline time.Duration
}

func startPersistentShell(ctx context.Context, h Handle, root string, deadline time.Duration) (*persistentShell, error) {
	p, err := h.Spawn(ctx, "exec sh", ExecOptions{Dir: root})
	if err != nil {
		return nil, fmt.Errorf("sandbox: start shell: %w", err)
	}
	if deadline <= 0 {
		deadline = DefaultShellDeadline
	}
	s := &persistentShell{p: p, lines: make(chan string, 64), deadline: deadline}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(p.Stdout())
		sc.Buffer(make([]byte, 64*1024), 16<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	go func() { // stderr is merged by the command wrapper; drain what escapes
		buf := make([]byte, 4096)
		for {
			if _, err := p.Stderr().Read(buf); err != nil {
				return
			}
		}
	}()
	return s, nil
}

func (s *persistentShell) run(ctx context.Context, cmd string) (string, int, error) {
	tag := "__BSSH_" + strconv.Itoa(s.n) + "__ "
	s.n++
	if s.p.Stdin() == nil {
		return "", 0, errors.New("sandbox: persistent shell has no stdin")
	}
	if _, err := fmt.Fprintf(s.p.Stdin(), "{ %s\n} 2>&1; printf \"\\n%s$?\\n\"\n", cmd, tag); err != nil {
		return "", 0, fmt.Errorf("sandbox: write to shell: %w", err)
	}
	timer := time.NewTimer(s.deadline)
	defer timer.Stop()
	var out []string
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				// The shell is gone (e.g. the command ran `exit N`): report
				// its exit status with the error.
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				code, _ := s.p.Wait(wctx)
				cancel()
				return strings.Join(out, "\n"), code, errShellEnded
			}
			if rest, found := strings.CutPrefix(line, tag); found {
				code, err := strconv.Atoi(strings.TrimSpace(rest))
				if err != nil {
					code = 1
				}
				if n := len(out); n > 0 && out[n-1] == "" {
					out = out[:n-1] // the sentinel's leading newline
				}
				return strings.Join(out, "\n"), code, nil
			}
			out = append(out, line)
		case <-timer.C:
			return strings.Join(out, "\n"), 0, fmt.Errorf("sandbox: shell command exceeded %s: %s", s.deadline, cmd)
		case <-ctx.Done():
			return strings.Join(out, "\n"), 0, ctx.Err()
		}
	}
}

func (s *persistentShell) forkState(ctx context.Context) (string, string, error) {
	cwd, code, err := s.run(ctx, "pwd")
	if err != nil || code != 0 {
		return "", "", fmt.Errorf("pwd: exit %d: %w", code, err)
	}
	env, code, err := s.run(ctx, "export -p")
	if err != nil || code != 0 {
		return "", "", fmt.Errorf("export -p: exit %d: %w", code, err)
	}
	return strings.TrimSpace(cwd), env, nil
}

func (s *persistentShell) close() {
	if in := s.p.Stdin(); in != nil {
		_ = in.Close()
	}
	_ = s.p.Kill(nil)
	for range s.lines {
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = s.p.Wait(ctx)
}

// execShell emulates a persistent shell with one Exec per command, for
// providers without writable stdin. cwd and exports carry over.
type execShell struct {
	h    Handle
	root string
	cwd  string
	env  string // an `export -p` script
	sent string
}

func newExecShell(h Handle, root string) *execShell {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &execShell{h: h, root: root, sent: "__BSSH_" + hex.EncodeToString(b) + "__"}
}

func (s *execShell) run(ctx context.Context, cmd string) (string, int, error) {
	var b strings.Builder
	b.WriteString(s.env + "\n")
	if s.cwd != "" {
		b.WriteString("cd " + Quote(s.cwd) + " || exit 1\n")
	}
	b.WriteString(cmd + "\n")
	b.WriteString("__bssh_rc=$?\n")
	b.WriteString("printf '\\n%s %s\\n' " + Quote(s.sent) + ` "$__bssh_rc"` + "\n")
	b.WriteString("printf '%s\\n' " + Quote(s.sent+"_CWD") + "\npwd\n")
	b.WriteString("printf '%s\\n' " + Quote(s.sent+"_ENV") + "\nexport -p\n")
	res, err := s.h.Exec(ctx, b.String(), ExecOptions{Dir: s.root, MaxOutputBytes: UnlimitedOutput})
	if err != nil {
		return "", 0, err
	}
	marker := "\n" + s.sent + " "
	i := strings.LastIndex(res.Stdout, marker)
	if i < 0 { // the command exited the shell
		return res.Stdout + res.Stderr, res.ExitCode, nil
	}
	out := res.Stdout[:i]
	rest := res.Stdout[i+len(marker):]
	codeStr, rest, _ := strings.Cut(rest, "\n")
	code, err := strconv.Atoi(strings.TrimSpace(codeStr))
	if err != nil {
		code = 1
	}
	if _, after, ok := strings.Cut(rest, s.sent+"_CWD\n"); ok {
		cwd, after2, _ := strings.Cut(after, "\n")
		s.cwd = cwd
		if _, env, ok := strings.Cut(after2, s.sent+"_ENV\n"); ok {
			s.env = env
		}
	}
	return out + res.Stderr, code, nil
}

func (s *execShell) forkState(context.Context) (string, string, error) {
	cwd := s.cwd
	if cwd == "" {
		cwd = "."
	}
	return cwd, s.env, nil
}
