// Package notify is a keyed broadcast used to wake parked log readers.
//
// A reader takes the channel for its key before it checks for new data and
// waits on it only if it found none; a writer calls Wake after committing. A
// Wake between the check and the wait closes the channel the reader already
// holds, so no wake-up is lost and nobody polls. A subscription (Sub) works
// the same way with a channel of the reader's own, which a Wake leaves a
// token in instead of closing.
package notify

import "sync"

// Hub is a set of broadcast channels keyed by run id. The zero Hub is ready.
//
// A reader that waits over and over on one key (a log's tailer, once per
// token when paced) subscribes to it once instead (Subscribe): its channel
// is its own and lives as long as the read, so a wait allocates nothing and
// a wake-up is a send; the key's generation, which every Wake changes,
// tells two waits apart as distinct channels do for Wait.
type Hub struct {
	mu     sync.Mutex
	topics map[string]*topic
	subs   map[string]*subList
	gen    uint64 // the last generation given out
	closed bool
}

// subList is a key's subscriptions and its generation.
type subList struct {
	gen  uint64
	list []*Sub
}

// A Sub is a subscription to a key's wake-ups: after each Wake of the key,
// WakeAll or Close, its channel holds a token (one at most: wake-ups
// coalesce) until the next Wait takes it out.
type Sub struct {
	c      chan struct{}
	h      *Hub
	key    string
	waited bool // Wait was called (Waiters counts the key)
}

// Subscribe subscribes to key's wake-ups until the Sub is closed.
func (h *Hub) Subscribe(key string) *Sub {
	s := &Sub{c: make(chan struct{}, 1), h: h, key: key}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = make(map[string]*subList)
	}
	l := h.subs[key]
	if l == nil {
		h.gen++
		l = &subList{gen: h.gen}
		h.subs[key] = l
	}
	l.list = append(l.list, s)
	return s
}

// Wait starts a wait: a wake-up of the key from now on leaves a token in
// C. Gen is the key's generation now: two Waits of one key that return
// the same Gen had no wake-up of it between them. On a closed hub, C is
// closed.
func (s *Sub) Wait() Waiter {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return Waiter{C: closedCh}
	}
	select {
	case <-s.c: // a wake-up from before this wait: what it announced is visible now
	default:
	}
	s.waited = true
	return Waiter{C: s.c, Gen: h.subs[s.key].gen}
}

// Close ends the subscription; the key is forgotten with its last one.
func (s *Sub) Close() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.subs[s.key]
	if l == nil {
		return
	}
	for i, o := range l.list {
		if o == s {
			last := len(l.list) - 1
			l.list[i], l.list[last] = l.list[last], nil
			l.list = l.list[:last]
			break
		}
	}
	if len(l.list) == 0 {
		delete(h.subs, s.key)
	}
}

// wakeSubs wakes the subscriptions of l and moves its generation on.
func (h *Hub) wakeSubs(l *subList) {
	h.gen++
	l.gen = h.gen
	for _, s := range l.list {
		select {
		case s.c <- struct{}{}:
		default: // a token is there already
		}
	}
}

type topic struct {
	ch   chan struct{}
	key  string
	refs int
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// A Waiter is one wait on a key: C is closed by the next Wake of the key,
// WakeAll or Close (a Sub's: receives a token then). A Hub.Wait's waiter
// must be released once its holder stops waiting. It is a value, so that a
// wait allocates nothing beyond the key's channel.
type Waiter struct {
	C   <-chan struct{}
	Gen uint64 // a Sub's: the key's generation when the wait began
	h   *Hub
	t   *topic // nil: the hub was closed, or a Sub's wait
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
	if l := h.subs[key]; l != nil {
		h.wakeSubs(l)
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
	for _, l := range h.subs {
		h.wakeSubs(l)
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
	for _, l := range h.subs {
		h.wakeSubs(l)
	}
}

// Waiters returns how many keys have waiters: a Hub.Wait's, or a
// subscription that has waited (for tests).
func (h *Hub) Waiters() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.topics)
	for k, l := range h.subs {
		if h.topics[k] != nil {
			continue
		}
		for _, s := range l.list {
			if s.waited {
				n++
				break
			}
		}
	}
	return n
}
