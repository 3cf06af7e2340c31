// Package flight coalesces identical concurrent reads: when many tailers of
// one run wake up together at the same position, one query serves them all.
package flight

import (
	"context"
	"sync"
)

// Group runs at most one call per key at a time and shares its result with
// every caller that asks for the same key meanwhile. The zero Group is ready.
type Group[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*call[V]
}

type call[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// Do returns the result of fn for key, running fn unless a call for key is
// already in flight, in which case it waits for that call's result. fn runs
// with a context that no caller's cancellation ends (so one impatient
// caller cannot fail the others); a caller whose ctx ends stops waiting and
// gets ctx.Err(). Results are shared: callers must not modify them.
func (g *Group[K, V]) Do(ctx context.Context, key K, fn func(ctx context.Context) (V, error)) (V, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = make(map[K]*call[V])
	}
	c, ok := g.calls[key]
	if !ok {
		c = &call[V]{done: make(chan struct{})}
		g.calls[key] = c
		g.mu.Unlock()
		go func() {
			c.v, c.err = fn(context.WithoutCancel(ctx))
			g.mu.Lock()
			delete(g.calls, key)
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
