package mcpclient

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// gracePeriod is how long a server may take to exit after its stdin closes
// before its process group is killed.
const gracePeriod = 2 * time.Second

// process is a stdio server running in its own process group, so that
// whatever it starts (npx starts node, a shell starts its command) dies
// with it.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	done   chan struct{} // closed when Wait returned
	once   sync.Once
}

func startProcess(srv Server, log *slog.Logger) (*process, error) {
	cmd := exec.Command(srv.Command[0], srv.Command[1:]...)
	cmd.Dir = srv.Dir
	cmd.Env = append(os.Environ(), srv.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Wait stops copying stderr this long after the process exits, in case
	// something outside the group still holds it open.
	cmd.WaitDelay = time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %q: %w", srv.Command[0], err)
	}
	p := &process{cmd: cmd, stdin: stdin, stdout: stdout, done: make(chan struct{})}
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 4096), 64<<10)
		for sc.Scan() {
			log.Debug("mcp server stderr", "line", sc.Text())
		}
		// Keep draining a line too long for the scanner so the server
		// never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-logged
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill closes stdin, gives the server grace to exit, then kills its whole
// process group and waits for it to be reaped.
func (p *process) kill(grace time.Duration) {
	p.once.Do(func() {
		_ = p.stdin.Close()
		t := time.NewTimer(grace)
		select {
		case <-p.done:
		case <-t.C:
		}
		// The leader may be gone while its children live on: the group
		// outlives its leader, so signal it either way.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		// A process that left the group (setsid) may still hold stderr;
		// stop waiting for it rather than hang the caller.
		t.Reset(gracePeriod)
		select {
		case <-p.done:
		case <-t.C:
			_ = p.stdout.Close()
		}
		t.Stop()
	})
}
