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
	refs int
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Wait returns a channel that is closed by the next Wake(key), WakeAll or
// Close, and a release func the caller must call when it stops waiting.
func (h *Hub) Wait(key string) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return closedCh, func() {}
	}
	if h.topics == nil {
		h.topics = make(map[string]*topic)
	}
	t := h.topics[key]
	if t == nil {
		t = &topic{ch: make(chan struct{})}
		h.topics[key] = t
	}
	t.refs++
	return t.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		t.refs--
		if t.refs == 0 && h.topics[key] == t {
			delete(h.topics, key)
		}
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
