// Package notify is a keyed broadcast used to wake parked log readers.
//
// A reader takes the channel for its key before it checks for new data and
// waits on it only if it found none; a writer calls Wake after committing. A
// Wake between the check and the wait closes the channel the reader already
// holds, so no wake-up is lost and nobody polls.
package notify

import "sync"

// Hub is a set of broadcast channels keyed by run id. The zero Hub is ready.
type Hub struct {
	mu     sync.Mutex
	topics map[string]*topic
	closed bool
}

type topic struct {
	ch   chan struct{}
	key  string
	refs int
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// A Waiter is one wait on a key: C is closed by the next Wake of the key,
// WakeAll or Close. The waiter must be released once its holder stops
// waiting. It is a value, so that a wait allocates nothing beyond the
// key's channel (a paced reader waits once per token).
type Waiter struct {
	C <-chan struct{}
	h *Hub
	t *topic // nil: the hub was closed
}

// Wait returns a waiter of key.
func (h *Hub) Wait(key string) Waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return Waiter{C: closedCh}
	}
	if h.topics == nil {
		h.topics = make(map[string]*topic)
	}
	t := h.topics[key]
	if t == nil {
		t = &topic{ch: make(chan struct{}), key: key}
		h.topics[key] = t
	}
	t.refs++
	return Waiter{C: t.ch, h: h, t: t}
}

// Release ends the wait; the key is forgotten with its last waiter.
func (w Waiter) Release() {
	if w.t == nil {
		return
	}
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	w.t.refs--
	if w.t.refs == 0 && h.topics[w.t.key] == w.t {
		delete(h.topics, w.t.key)
	}
}

// Wake wakes every waiter of key.
func (h *Hub) Wake(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[key]; t != nil {
		close(t.ch)
		delete(h.topics, key)
	}
}

// WakeAll wakes every waiter (for example after a lost notification
// connection, when wake-ups may have been missed).
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, t := range h.topics {
		close(t.ch)
		delete(h.topics, k)
	}
}

// Close wakes every waiter; later Waits return closed channels.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for k, t := range h.topics {
		close(t.ch)
		delete(h.topics, k)
	}
}

// Waiters returns how many keys have waiters (for tests).
func (h *Hub) Waiters() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics)
}
