package notify

import (
	"testing"
	"time"
)

func TestWakeAndRelease(t *testing.T) {
	var h Hub
	a, a2, b := h.Wait("a"), h.Wait("a"), h.Wait("b")
	ch, ch2, other := a.C, a2.C, b.C
	h.Wake("a")
	for _, c := range []<-chan struct{}{ch, ch2} {
		select {
		case <-c:
		case <-time.After(time.Second):
			t.Fatal("waiter not woken")
		}
	}
	select {
	case <-other:
		t.Fatal("waiter of another key woken")
	default:
	}
	a.Release()
	a2.Release()
	b.Release()
	if n := h.Waiters(); n != 0 {
		t.Fatalf("%d keys left after every waiter released", n)
	}
	// A waiter that gives up without a wake-up does not leak its key.
	h.Wait("c").Release()
	if n := h.Waiters(); n != 0 {
		t.Fatalf("%d keys left after release", n)
	}
	h.Close()
	d := h.Wait("d")
	defer d.Release()
	select {
	case <-d.C:
	default:
		t.Fatal("Wait after Close returned an open channel")
	}
}

// A wait on a key that already has a waiter allocates nothing (a tailer
// waits again on the same key after each round it read from the cache).
func TestWaitAgainAllocatesNothing(t *testing.T) {
	var h Hub
	first := h.Wait("k")
	defer first.Release()
	if n := testing.AllocsPerRun(100, func() { h.Wait("k").Release() }); n != 0 {
		t.Fatalf("%v allocations per wait on a waited key", n)
	}
}
