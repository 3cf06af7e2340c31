// Package flight coalesces identical concurrent reads: when many tailers of
// one run wake up together at the same position, one query serves them all.
//
// Sharing must never hand a reader a result older than what it is entitled
// to see, or it would park on a wake-up that already happened. A tailer
// takes its wake-up channel (or its subscription's generation) from the
// hub, then a Token carrying it and a ticket, then fetches. Do lets it join
// a call only if
//
//   - the call was started by a tailer holding the same wake-up channel or
//     generation: no
//     wake-up happened between the two waits, so every commit announced
//     before the joiner's wait was announced before the starter's wait and
//     is visible to the call's query, and a commit the query missed will be
//     announced on the channel the joiner holds; or
//   - the call started after the joiner's ticket was drawn, so its query
//     runs after the joiner's wait began.
package flight

import (
	"context"
	"sync"
	"sync/atomic"
)

// Group runs calls keyed by K and shares each call's result with the
// callers that may join it. The zero Group is ready.
type Group[K comparable, V any] struct {
	clock atomic.Uint64

	mu    sync.Mutex
	calls map[K]*call[V] // the newest call per key
}

type call[V any] struct {
	gen   any
	start uint64
	done  chan struct{}
	v     V
	err   error
}

// Token identifies a caller for Do: what identifies the wake-up it waits
// for (its channel, or its subscription's generation; nil if none) and a
// ticket from the group's clock, drawn after that wait began.
type Token struct {
	gen    any
	ticket uint64
}

// Token returns a Token for a caller waiting on gen (a comparable value:
// two callers hold equal ones only if no wake-up came between their waits).
// Call it after taking gen.
func (g *Group[K, V]) Token(gen any) Token {
	return Token{gen: gen, ticket: g.clock.Add(1)}
}

// Do returns the result of fn for key. It joins the newest in-flight call
// for key if the package rules allow tok to (same wake-up channel, or
// started after tok's ticket), and otherwise starts a new one. fn runs with
// a context that no caller's cancellation ends (so one impatient caller
// cannot fail the others); a caller whose ctx ends stops waiting and gets
// ctx.Err(). Results are shared: callers must not modify them.
func (g *Group[K, V]) Do(ctx context.Context, key K, tok Token, fn func(ctx context.Context) (V, error)) (V, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = make(map[K]*call[V])
	}
	c, ok := g.calls[key]
	if !ok || !((tok.gen != nil && c.gen == tok.gen) || c.start > tok.ticket) {
		c = &call[V]{gen: tok.gen, start: g.clock.Add(1), done: make(chan struct{})}
		g.calls[key] = c
		g.mu.Unlock()
		go func() {
			c.v, c.err = fn(context.WithoutCancel(ctx))
			g.mu.Lock()
			if g.calls[key] == c {
				delete(g.calls, key)
			}
			g.mu.Unlock()
			close(c.done)
		}()
	} else {
		g.mu.Unlock()
	}
	select {
	case <-c.done:
		return c.v, c.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}
