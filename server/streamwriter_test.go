package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// gatedResponse is a ResponseWriter whose writes wait for a gate and are
// recorded one per call, so a test sees how frames were grouped.
type gatedResponse struct {
	header http.Header
	gate   chan struct{} // a write waits for one value
	fail   error

	mu      sync.Mutex
	writes  []string
	flushes int
}

func (g *gatedResponse) Header() http.Header { return g.header }
func (g *gatedResponse) WriteHeader(int)     {}
func (g *gatedResponse) Write(p []byte) (int, error) {
	<-g.gate
	if g.fail != nil {
		return 0, g.fail
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes = append(g.writes, string(p))
	return len(p), nil
}
func (g *gatedResponse) Flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.flushes++
}

func TestStreamWriterSendsWhatQueuedDuringASendAtOnce(t *testing.T) {
	rw := &gatedResponse{header: http.Header{}, gate: make(chan struct{})}
	sw := newStreamWriter(rw)
	if _, err := sw.Write([]byte("a;")); err != nil {
		t.Fatal(err)
	}
	rw.gate <- struct{}{} // the lone frame goes out by itself
	for i := range 10 {
		if _, err := sw.Write(fmt.Appendf(nil, "%d;", i)); err != nil {
			t.Fatal(err)
		}
	}
	close(rw.gate)
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rw.writes, "")
	if want := "a;0;1;2;3;4;5;6;7;8;9;"; got != want {
		t.Fatalf("sent %q, want %q", got, want)
	}
	// The ten frames queued while the sender waited on "a;" (or at most
	// while it sent the first of them) went out together.
	if len(rw.writes) > 3 || rw.flushes != len(rw.writes) {
		t.Fatalf("%d writes, %d flushes: %q", len(rw.writes), rw.flushes, rw.writes)
	}
}

func TestStreamWriterReportsTheClientGone(t *testing.T) {
	gone := errors.New("broken pipe")
	rw := &gatedResponse{header: http.Header{}, gate: make(chan struct{}), fail: gone}
	close(rw.gate)
	sw := newStreamWriter(rw)
	_, _ = sw.Write([]byte("a;"))
	for i := 0; ; i++ { // a later Write fails once the send has failed
		if _, err := sw.Write([]byte("b;")); err != nil {
			if !errors.Is(err, gone) {
				t.Fatalf("write: %v", err)
			}
			break
		}
		if i > 1<<20 {
			t.Fatal("writes never failed")
		}
	}
	if err := sw.Close(); !errors.Is(err, gone) {
		t.Fatalf("close: %v", err)
	}
}

func TestStreamWriterHoldsBackAFastWriter(t *testing.T) {
	rw := &gatedResponse{header: http.Header{}, gate: make(chan struct{})}
	sw := newStreamWriter(rw)
	frame := []byte(strings.Repeat("x", 1024))
	wrote := make(chan int)
	go func() {
		n := 0
		for range 4 * maxPending / len(frame) {
			if _, err := sw.Write(frame); err != nil {
				break
			}
			n++
		}
		wrote <- n
	}()
	// The sender holds its first batch at the gate; the writer can queue
	// at most maxPending more before it waits.
	released := 0
	for {
		select {
		case n := <-wrote:
			if n != 4*maxPending/len(frame) {
				t.Fatalf("wrote %d frames", n)
			}
			close(rw.gate)
			if err := sw.Close(); err != nil {
				t.Fatal(err)
			}
			if got := len(strings.Join(rw.writes, "")); got != 4*maxPending {
				t.Fatalf("sent %d bytes", got)
			}
			if released < 2 {
				t.Fatalf("the writer queued everything after %d sends: nothing held it back", released)
			}
			return
		case rw.gate <- struct{}{}:
			released++
		}
	}
}

// An idle stream holds no sender: it ends once the queue is sent, and the
// next Write starts another.
func TestStreamWriterSenderEndsWhenIdle(t *testing.T) {
	before := goleak.IgnoreCurrent()
	rw := &gatedResponse{header: http.Header{}, gate: make(chan struct{})}
	close(rw.gate)
	sw := newStreamWriter(rw)
	for i := range 3 {
		if _, err := sw.Write(fmt.Appendf(nil, "%d;", i)); err != nil {
			t.Fatal(err)
		}
		if err := goleak.Find(before); err != nil {
			t.Fatalf("after write %d, with everything sent: %v", i, err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rw.writes, ""); got != "0;1;2;" {
		t.Fatalf("sent %q", got)
	}
}
