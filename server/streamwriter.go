package server

import (
	"io"
	"net/http"
	"sync"
)

// maxPending bounds the bytes a stream queues for its sender: past it,
// Write waits, so a client that reads slowly still holds its producer back.
const maxPending = 8 << 10

// streamWriter sends a response stream without a write system call per
// event. Write queues the frame and wakes the stream's sender goroutine,
// which writes and flushes everything queued in one go: a lone event goes
// out as soon as the sender runs (nothing waits on a timer), and the events
// written while it sends go out together in its next round.
//
// Its Write and Close must be called from one goroutine (the handler's);
// the response must not be touched by anything else between newStreamWriter
// and Close.
type streamWriter struct {
	w  io.Writer
	rc *http.ResponseController

	mu      sync.Mutex
	ready   sync.Cond // something is queued, or closing
	room    sync.Cond // the queue was taken, or the sender ended
	queued  []byte
	spare   []byte // the buffer of the previous send, reused
	closing bool
	err     error // the first write or flush error: the client is gone
	done    chan struct{}
}

// newStreamWriter starts the sender of w, whose headers are written.
func newStreamWriter(w http.ResponseWriter) *streamWriter {
	s := &streamWriter{w: w, rc: http.NewResponseController(w), done: make(chan struct{})}
	s.ready.L, s.room.L = &s.mu, &s.mu
	go s.send()
	return s
}

// Write queues p. It fails once a send has failed.
func (s *streamWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queued) >= maxPending && s.err == nil {
		s.room.Wait()
	}
	if s.err != nil {
		return 0, s.err
	}
	if len(s.queued) == 0 {
		s.ready.Signal()
	}
	s.queued = append(s.queued, p...)
	return len(p), nil
}

// Close sends what is queued, stops the sender and returns the first send
// error.
func (s *streamWriter) Close() error {
	s.mu.Lock()
	s.closing = true
	s.ready.Signal()
	s.mu.Unlock()
	<-s.done
	return s.err
}

func (s *streamWriter) send() {
	defer close(s.done)
	for {
		s.mu.Lock()
		for len(s.queued) == 0 && !s.closing {
			s.ready.Wait()
		}
		out := s.queued
		if len(out) == 0 { // closing, and everything is sent
			s.mu.Unlock()
			return
		}
		s.queued = s.spare[:0]
		s.room.Broadcast()
		s.mu.Unlock()

		_, err := s.w.Write(out)
		if err == nil {
			err = s.rc.Flush()
		}
		s.mu.Lock()
		s.spare = out
		if err != nil {
			s.err = err
			s.room.Broadcast()
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}
