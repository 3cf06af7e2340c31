package notify

import (
	"testing"
	"time"
)

func TestWakeAndRelease(t *testing.T) {
	var h Hub
	ch, release := h.Wait("a")
	ch2, release2 := h.Wait("a")
	other, releaseOther := h.Wait("b")
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
	release()
	release2()
	releaseOther()
	if n := h.Waiters(); n != 0 {
		t.Fatalf("%d keys left after every waiter released", n)
	}
	// A waiter that gives up without a wake-up does not leak its key.
	_, r := h.Wait("c")
	r()
	if n := h.Waiters(); n != 0 {
		t.Fatalf("%d keys left after release", n)
	}
	h.Close()
	c, r := h.Wait("d")
	defer r()
	select {
	case <-c:
	default:
		t.Fatal("Wait after Close returned an open channel")
	}
}
