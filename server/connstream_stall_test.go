package server

import (
	"bufio"
	"context"
	"fmt"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// floodModel answers a first token, waits for its gate, then floods: far
// more than the socket buffers between the server and a client hold.
type floodModel struct {
	parked, gate chan struct{}
}

func (*floodModel) Name() string  { return "flood" }
func (*floodModel) Model() string { return "flood-1" }

func (m *floodModel) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		if !yield(agui.Event{Type: agui.TextMessageContent, MessageID: "m1", Delta: "first "}, nil) {
			return
		}
		close(m.parked)
		select {
		case <-m.gate:
		case <-ctx.Done():
			return
		}
		chunk := strings.Repeat("x", 16<<10)
		for range 2000 { // 32 MB
			if !yield(agui.Event{Type: agui.TextMessageContent, MessageID: "m1", Delta: chunk}, nil) {
				return
			}
		}
	}
}

// A client that stops reading a taken-over stream is let go once a write
// has stalled for the bound: the stream's goroutine does not wait on it
// forever, and the run goes on without it (stamped detached, unless it
// already ended).
func TestTakenOverStreamLetsAStalledClientGo(t *testing.T) {
	model := &floodModel{parked: make(chan struct{}), gate: make(chan struct{})}
	store := durable.NewMemory(nil)
	h := ChatHandler(Config{
		Options: func(*Request) (chat.Options, error) {
			return chat.Options{Adapter: model, Debug: chat.DebugNone()}, nil
		},
		Store: store, ReleaseIdleAfter: time.Millisecond, RequestsPerSecond: -1,
	})
	h.conns.stall = 100 * time.Millisecond
	srv := httptest.NewServer(h)
	defer func() {
		h.StopAll(context.Canceled)
		h.Wait()
		h.Shutdown(t.Context())
		srv.Close()
	}()

	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	body := `{"threadId":"t1","runId":"r1","state":{},"messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[],"context":[],"forwardedProps":{}}`
	fmt.Fprintf(conn, "POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Run-Id: r1\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), `"delta":"first "`) {
	}
	<-model.parked
	wait(t, "the waiting stream taken over", func() bool { return h.conns.count() == 1 })

	close(model.gate) // the flood begins; the client reads nothing more
	wait(t, "the stalled stream let go", func() bool { return h.conns.count() == 0 })
	wait(t, "the run stamped detached", func() bool {
		rec, err := store.Get(context.Background(), "r1")
		return err == nil && (rec.DetachedSince != nil || rec.Status != durable.StatusRunning)
	})
}

// wait waits until cond holds, failing with what after a generous bound
// (a condition, not a timing).
func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
	}
}
