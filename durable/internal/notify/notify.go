// Package notify is a keyed broadcast used to wake parked log readers.
//
// A reader subscribes to its key once per read (Subscribe). Before each
// check for new data it takes a wait (Sub.Wait), and it waits on the wait's
// channel only if it found nothing; a writer calls Wake after committing. A
// Wake between the check and the wait leaves a token in the reader's
// channel, so no wake-up is lost and nobody polls.
package notify

import "sync"

// Hub is a set of subscriptions keyed by run id. The zero Hub is ready.
//
// A reader waits over and over on one key (a log's tailer, once per token
// when paced), so its subscription's channel is its own and lives as long
// as the read: a wait allocates nothing and a wake-up is a send. The key's
// generation, which every Wake moves on, tells two waits apart.
type Hub struct {
	mu     sync.Mutex
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
	l      *subList // the key's, while subscribed: a wait reads its generation without a map lookup
	waited bool     // Wait was called (Waiters counts the key)
}

// A Waiter is one wait of a subscription: C receives a token at the next
// wake-up of the key (on a closed hub, C is closed). It is a value, so
// that a wait allocates nothing.
type Waiter struct {
	C   <-chan struct{}
	Gen uint64 // the key's generation when the wait began; 0 on a closed hub
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

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
	s.l = l
	return s
}

// Wait starts a wait: a wake-up of the key from now on leaves a token in
// C. Gen is the key's generation now: two waits of one key that return the
// same Gen had no wake-up of it between them. On a closed hub, or a
// closed Sub, C is closed and Gen is 0.
func (s *Sub) Wait() Waiter {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || s.l == nil {
		return Waiter{C: closedCh}
	}
	select {
	case <-s.c: // a wake-up from before this wait: what it announced is visible now
	default:
	}
	s.waited = true
	return Waiter{C: s.c, Gen: s.l.gen}
}

// Interrupt leaves a token in the subscription's channel, as a wake-up of
// its key would, without moving the key's generation on: it wakes the
// subscriber alone, to look at something other than the key (its context
// ended). It is safe at any time, after Close included.
func (s *Sub) Interrupt() {
	select {
	case s.c <- struct{}{}:
	default: // a token is there already
	}
}

// Close ends the subscription; the key is forgotten with its last one.
// Closing twice is harmless.
func (s *Sub) Close() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	l := s.l
	if l == nil {
		return // closed already
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
	s.l = nil
}

// wake leaves a token with each of l's subscriptions and moves its
// generation on.
func (h *Hub) wake(l *subList) {
	h.gen++
	l.gen = h.gen
	for _, s := range l.list {
		select {
		case s.c <- struct{}{}:
		default: // a token is there already
		}
	}
}

// Wake wakes every subscriber of key.
func (h *Hub) Wake(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.subs[key]; l != nil {
		h.wake(l)
	}
}

// WakeAll wakes every subscriber (for example after a lost notification
// connection, when wake-ups may have been missed).
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.subs {
		h.wake(l)
	}
}

// Close wakes every subscriber; later waits return closed channels.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, l := range h.subs {
		h.wake(l)
	}
}

// Waiters returns how many keys have a subscription that has waited (for
// tests).
func (h *Hub) Waiters() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.subs {
		for _, s := range l.list {
			if s.waited {
				n++
				break
			}
		}
	}
	return n
}
