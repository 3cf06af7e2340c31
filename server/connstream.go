package server

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// A durable stream spends most of its life waiting for its run's next
// event. Under net/http that wait holds two goroutines besides the
// producer's (the connection's, which runs the handler, and its background
// reader) and the connection's buffers: about 40 KiB a stream. A stream
// that has written nothing for Config.ReleaseIdleAfter is taken over from
// net/http (Hijack): the rest of the log is written by one goroutine of
// the handler's, as the same response's next HTTP/1.1 chunks, and the
// client's leaving is noticed by the handler's connection watch (one epoll
// set for every such stream on Linux) instead of a reader per connection.
// When the log ends, the connection goes back to the http.Server that
// accepted it.
//
// Streams that never pause that long keep net/http's loop. Only HTTP/1.1
// responses without TLS are taken: HTTP/2, TLS, HEAD and HTTP/1.0 keep
// the handler's loop. See docs/durable.md §1.7.

// DefaultReleaseIdleAfter is Config.ReleaseIdleAfter's default.
const DefaultReleaseIdleAfter = time.Second

// errIdle ends the handler's log read of a stream that waited long enough
// to be taken over.
var errIdle = errors.New("server: stream idle")

// errClientGone and errHandlerClosed are the causes that end a connStream
// before its log does.
var (
	errClientGone    = errors.New("server: client gone")
	errHandlerClosed = errors.New("server: handler closed")
)

// stalledWrite bounds one write to a taken-over connection: a client that
// reads nothing for this long is treated as gone (net/http's loop has no
// such bound; a taken-over stream must not hold its goroutine forever).
const stalledWrite = time.Minute

// connStream is a durable stream whose connection the handler owns.
type connStream struct {
	conn    net.Conn
	stall   time.Duration // bounds one write (stalledWrite)
	srv     *http.Server  // the server that accepted conn, if known
	format  agui.Format
	ctx     context.Context
	cancel  context.CancelCauseFunc
	buf     []byte
	failed  bool                 // a write failed
	ended   bool                 // the response's last chunk is written
	unwatch func() (sent []byte) // ends the watch of conn
}

// canTakeOver reports whether r's response may be taken over.
func canTakeOver(r *http.Request) bool {
	return r.ProtoMajor == 1 && r.ProtoMinor >= 1 && r.Method != http.MethodHead && r.TLS == nil
}

// idleTimer cancels a log read with errIdle once it has written nothing
// for d to 2d. A write only counts itself (a timer reset per write cost
// about 1% of a paced stream's CPU); the timer, once started, looks at
// the count every d.
type idleTimer struct {
	d      time.Duration
	cancel context.CancelCauseFunc
	writes atomic.Uint64

	mu      sync.Mutex
	t       *time.Timer
	seen    uint64 // writes at the last look
	stopped bool
}

// wrote counts a write, starting the timer at the first.
func (it *idleTimer) wrote() {
	if it.t == nil {
		it.mu.Lock()
		it.t = time.AfterFunc(it.d, it.look)
		it.mu.Unlock()
	}
	it.writes.Add(1)
}

// look ends the read if nothing was written since the last look.
func (it *idleTimer) look() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.stopped {
		return
	}
	if n := it.writes.Load(); n != it.seen {
		it.seen = n
		it.t.Reset(it.d)
		return
	}
	it.cancel(errIdle)
}

// stop stops the timer for good.
func (it *idleTimer) stop() {
	if it.t == nil {
		return
	}
	it.mu.Lock()
	it.stopped = true
	it.t.Stop()
	it.mu.Unlock()
}

// ended stops the timer and reports whether it ended the read under ctx.
func (it *idleTimer) ended(ctx context.Context) bool {
	if it.cancel == nil {
		return false
	}
	it.stop()
	return errors.Is(context.Cause(ctx), errIdle)
}

// takeOver hijacks the connection of w, a started chunked response with
// everything written flushed. nil: w cannot be hijacked.
func (h *Handler) takeOver(w http.ResponseWriter, r *http.Request, format agui.Format) *connStream {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil
	}
	if n := brw.Reader.Buffered(); n > 0 {
		// The client sent more after its request (pipelining): it is
		// read again once the connection is handed back.
		early, _ := brw.Reader.Peek(n)
		conn = &sentConn{Conn: conn, sent: bytes.Clone(early)}
	}
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	cs := &connStream{conn: conn, srv: srv, format: format, stall: cmp.Or(h.conns.stall, stalledWrite)}
	cs.ctx, cs.cancel = context.WithCancelCause(context.Background())
	if !h.conns.add(cs) {
		cs.cancel(errHandlerClosed)
	}
	cs.unwatch = h.conns.watch.watch(conn, func() { cs.cancel(errClientGone) })
	return cs
}

// send writes es as one chunk (a durable.BatchReader's batch), in one
// write.
func (cs *connStream) send(es []durable.Entry) error {
	if cs.failed {
		return errClientGone
	}
	// The chunk's size line goes in front of its frames once their length
	// is known: room for 8 hex digits and CRLF.
	const room = 10
	b := cs.buf[:0]
	if cap(b) < 512 {
		b = make([]byte, 0, 512)
	}
	b = b[:room]
	for _, e := range es {
		b = agui.AppendFrame(b, cs.format, e.Offset, e.Data)
	}
	size := len(b) - room
	b = append(b, '\r', '\n')
	cs.buf = b
	var line [room]byte
	n := copy(line[:], strconv.AppendInt(line[:0], int64(size), 16))
	line[n], line[n+1] = '\r', '\n'
	at := room - n - 2
	copy(b[at:], line[:n+2])
	if size == 0 {
		return nil // an empty chunk would end the body
	}
	_ = cs.conn.SetWriteDeadline(time.Now().Add(cs.stall))
	_, err := cs.conn.Write(b[at:])
	if cap(b) > 4<<10 {
		cs.buf = nil // a catch-up's buffer is not kept by a waiting stream
	}
	if err != nil {
		cs.failed = true
		cs.cancel(errClientGone)
		return errClientGone
	}
	return nil
}

// follow reads runID's log after after onto cs until the log ends, the
// client leaves or the handler closes. Its goroutine waits in readLog:
// what comes after is in endFollow.
func (h *Handler) follow(cs *connStream, runID, after string, disc *chat.RunDisconnect, leave func(ended, gone bool)) {
	ended, gone := false, false
	defer h.conns.done(cs)
	defer func() { leave(ended, gone) }()
	defer h.recoverLogged("runId", runID)
	err := h.readLog(cs.ctx, runID, after, cs.send)
	ended, gone = h.endFollow(cs, runID, disc, err)
}

// endFollow ends a taken-over stream whose log read returned err: it
// reports whether the log was read to its end, or the client left.
func (h *Handler) endFollow(cs *connStream, runID string, disc *chat.RunDisconnect, err error) (ended, gone bool) {
	switch cause := context.Cause(cs.ctx); {
	case cs.failed || errors.Is(cause, errClientGone):
		if disc != nil {
			disc.Notify()
		}
		return false, true
	case cause != nil:
		// The handler closed: the body is cut short (no last chunk), so
		// the client knows to resume.
		return false, false
	case err != nil:
		// As the handler's own loop does: the failure is logged and the
		// body ends.
		h.cfg.Logger.Error("reading the run log", "runId", runID, "error", err)
	}
	_ = cs.conn.SetWriteDeadline(time.Now().Add(cs.stall))
	_, werr := cs.conn.Write([]byte("0\r\n\r\n"))
	cs.ended = werr == nil
	return err == nil, false
}

// watchByReading calls gone once when a read of conn fails (the peer hung
// up), until unwatch is called, which returns what the client sent
// meanwhile: the watch of a connection without a file descriptor, a
// goroutine per connection as net/http has. A client that sends more than
// sentLimit before the response ends is treated as gone.
func watchByReading(conn net.Conn, gone func()) (unwatch func() (sent []byte)) {
	done := make(chan struct{})
	var stopping atomic.Bool
	var sent []byte
	go func() {
		defer close(done)
		var b [512]byte
		for {
			n, err := conn.Read(b[:])
			sent = append(sent, b[:n]...)
			if err != nil || len(sent) > sentLimit {
				if !stopping.Load() {
					gone()
				}
				return
			}
		}
	}()
	return func() []byte {
		stopping.Store(true)
		_ = conn.SetReadDeadline(time.Unix(1, 0))
		<-done
		_ = conn.SetReadDeadline(time.Time{})
		return sent
	}
}

// sentLimit bounds what a client may send while its stream is taken over.
const sentLimit = 64 << 10

// sentConn is a connection whose client sent bytes that were read before
// the server reads it again.
type sentConn struct {
	net.Conn
	sent []byte
}

func (c *sentConn) Read(p []byte) (int, error) {
	if len(c.sent) > 0 {
		n := copy(p, c.sent)
		c.sent = c.sent[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// handBack gives conn to srv, which serves the client's next requests on it
// as on a connection it accepted (the response said keep-alive). Serve
// returns once it has started the connection's goroutine.
func handBack(srv *http.Server, conn net.Conn) {
	l := &handedConn{conn: conn}
	_ = srv.Serve(l)
	if !l.taken {
		_ = conn.Close() // the server is shutting down
	}
}

// handedConn is a listener that accepts one connection, then reports
// itself closed.
type handedConn struct {
	conn  net.Conn
	taken bool
}

func (l *handedConn) Accept() (net.Conn, error) {
	if l.taken {
		return nil, net.ErrClosed
	}
	l.taken = true
	return l.conn, nil
}

func (l *handedConn) Close() error   { return nil }
func (l *handedConn) Addr() net.Addr { return l.conn.LocalAddr() }

// connStreams are the streams a handler took over.
type connStreams struct {
	stall  time.Duration // stalledWrite if zero (tests shorten it)
	mu     sync.Mutex
	open   map[*connStream]struct{}
	closed bool
	wg     sync.WaitGroup
	watch  connWatch
}

// add counts cs; false: the handler is closed.
func (s *connStreams) add(cs *connStream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = map[*connStream]struct{}{}
	}
	s.open[cs] = struct{}{}
	s.wg.Add(1)
	return !s.closed
}

// done hands cs's connection back to the server that accepted it if its
// response ended, else closes it, and forgets cs.
func (s *connStreams) done(cs *connStream) {
	sent := cs.unwatch()
	switch {
	case cs.ended && cs.srv != nil && cs.ctx.Err() == nil:
		conn, pending := cs.conn, sent
		if sc, ok := conn.(*sentConn); ok {
			conn, pending = sc.Conn, append(sc.sent, sent...)
		}
		if len(pending) > 0 {
			conn = &sentConn{Conn: conn, sent: pending}
		}
		_ = conn.SetDeadline(time.Time{})
		handBack(cs.srv, conn)
	default:
		_ = cs.conn.Close()
	}
	cs.cancel(nil)
	s.mu.Lock()
	delete(s.open, cs)
	s.mu.Unlock()
	s.wg.Done()
}

// count returns how many streams are open.
func (s *connStreams) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// shutdown waits for every stream to end until ctx is done, then ends
// the rest; it waits for their goroutines either way.
func (s *connStreams) shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.mu.Lock()
		for cs := range s.open {
			cs.cancel(errHandlerClosed)
		}
		s.mu.Unlock()
		<-done
	}
	s.watch.loop.Wait()
	return err
}
