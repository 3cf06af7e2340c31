package server

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() {
		server.Close()
		client.Close()
	})
	return server, client
}

// The watch notices each client that hangs up, once, and only while it
// is watched; its goroutine ends once nothing is watched, and a later
// watch starts it again.
func TestConnWatchNoticesHangUps(t *testing.T) {
	var cw connWatch
	for round := range 2 {
		const n = 8
		var gone [n]chan struct{}
		var calls [n]atomic.Int32
		unwatch := make([]func() []byte, n)
		clients := make([]net.Conn, n)
		for i := range n {
			srv, cl := tcpPair(t)
			clients[i] = cl
			gone[i] = make(chan struct{})
			unwatch[i] = cw.watch(srv, func() {
				if calls[i].Add(1) == 1 {
					close(gone[i])
				}
			})
		}
		// Half the clients hang up; the other half are unwatched first.
		for i := range n {
			if i%2 == 0 {
				clients[i].Close()
				<-gone[i]
			}
		}
		for i := range n {
			if i%2 == 1 {
				if sent := unwatch[i](); sent != nil {
					t.Fatalf("round %d: the epoll watch read %q", round, sent)
				}
				clients[i].Close()
			}
		}
		for i := range n {
			if i%2 == 0 {
				unwatch[i]() // after its hang-up: a no-op
			}
		}
		cw.loop.Wait() // nothing watched: the goroutine ends
		for i := range n {
			if got, want := calls[i].Load(), int32(1-i%2); got != want {
				t.Fatalf("round %d, conn %d: gone called %d times, want %d", round, i, got, want)
			}
		}
	}
}

// A connection without a descriptor is watched by reading it: the hang-up
// is noticed, and nothing the client sent meanwhile is lost: it is either
// handed back by unwatch or still unread on the connection.
func TestWatchByReadingLosesNothing(t *testing.T) {
	srv, cl := tcpPair(t)
	hidden := struct{ net.Conn }{srv} // no descriptor: the reader watch
	var cw connWatch
	const data = "GET /api/chat?runId=r1&offset=-1 HTTP/1.1\r\nHost: x\r\n\r\n"
	for cut := range len(data) {
		unwatch := cw.watch(hidden, func() { t.Error("gone called for a client still there") })
		if _, err := io.WriteString(cl, data[:cut]); err != nil {
			t.Fatal(err)
		}
		sent := unwatch()
		rest := make([]byte, cut-len(sent))
		if _, err := io.ReadFull(srv, rest); err != nil {
			t.Fatal(err)
		}
		if got := string(sent) + string(rest); got != data[:cut] {
			t.Fatalf("kept %q and left %q of %q", sent, rest, data[:cut])
		}
	}
	gone := make(chan struct{})
	unwatch := cw.watch(hidden, func() { close(gone) })
	cl.Close()
	<-gone
	unwatch()
}
