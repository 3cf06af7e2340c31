package harness

import (
	"path"
	"strings"
	"sync"
	"syscall"
)

// killSignal stops an agent whose consumer went away.
const killSignal = syscall.SIGKILL

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func joinPath(dir, name string) string {
	if path.IsAbs(name) {
		return name
	}
	return path.Join(dir, name)
}

func promptFileName(dir string) string {
	return path.Join(dir, ".goai-prompt-"+newID("p")+".txt")
}

// tail keeps the last n bytes written to it.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.n; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "")
}
