package server

import (
	"io"
	"net/http"
	"sync"
)

// maxPending bounds the bytes a stream queues for its sender: past it,
// Write waits, so a client that reads slowly still holds its producer back.
// What is queued here is latency when the client falls behind: 2 KiB (about
// twenty deltas) still lets a send carry many events.
const maxPending = 2 << 10

// streamWriter sends a response stream without a write system call per
// event. Write queues the frame and, unless a sender is already running,
// starts one: a goroutine that writes and flushes everything queued in one
// go and ends when the queue is empty. A lone event goes out as soon as the
// sender runs (nothing waits on a timer), the events written while it sends
// go out together in its next round, and an idle stream holds no goroutine
// (a sender's stack is sized like the average goroutine's, which would
// double an idle stream's memory).
//
// Its Write and Close must be called from one goroutine (the handler's);
// the response must not be touched by anything else between newStreamWriter
// and Close.
type streamWriter struct {
	w  io.Writer
	rc *http.ResponseController

	mu      sync.Mutex
	changed sync.Cond // the queue was taken, or the sender ended
	queued  []byte
	spare   []byte // the buffer of the previous send, reused
	sending bool   // a sender is running
	err     error  // the first write or flush error: the client is gone
}

// newStreamWriter returns the stream writer of w, whose headers are written.
func newStreamWriter(w http.ResponseWriter) *streamWriter {
	s := &streamWriter{w: w, rc: http.NewResponseController(w)}
	s.changed.L = &s.mu
	return s
}

// Write queues p. It fails once a send has failed.
func (s *streamWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queued) >= maxPending && s.err == nil {
		s.changed.Wait()
	}
	if s.err != nil {
		return 0, s.err
	}
	s.queued = append(s.queued, p...)
	if !s.sending {
		s.sending = true
		go s.send()
	}
	return len(p), nil
}

// Close waits until what is queued is sent and returns the first send
// error.
func (s *streamWriter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.sending {
		s.changed.Wait()
	}
	return s.err
}

// send writes and flushes what is queued until the queue is empty or a
// send fails.
func (s *streamWriter) send() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queued) > 0 {
		out := s.queued
		s.queued = s.spare[:0]
		s.changed.Broadcast()
		s.mu.Unlock()

		_, err := s.w.Write(out)
		if err == nil {
			err = s.rc.Flush()
		}
		s.mu.Lock()
		s.spare = out
		if err != nil {
			s.err = err
			break
		}
	}
	s.sending = false
	s.changed.Broadcast()
}
