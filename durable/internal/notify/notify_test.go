package notify

import (
	"sync"
	"testing"
	"time"
)

// A Wake reaches every subscriber of its key and no other.
func TestWakeReachesEverySubscriber(t *testing.T) {
	var h Hub
	a, a2, b := h.Subscribe("a"), h.Subscribe("a"), h.Subscribe("b")
	wa, wa2, wb := a.Wait(), a2.Wait(), b.Wait()
	h.Wake("a")
	for _, c := range []<-chan struct{}{wa.C, wa2.C} {
		select {
		case <-c:
		default:
			t.Fatal("a subscriber of the key was not woken")
		}
	}
	select {
	case <-wb.C:
		t.Fatal("a subscriber of another key was woken")
	default:
	}
	a.Close()
	if n := h.Waiters(); n != 2 {
		t.Fatalf("%d keys waited on after one of two subscriptions closed, want 2", n)
	}
	a2.Close()
	b.Close()
	if n := h.Waiters(); n != 0 {
		t.Fatalf("%d keys left after every subscription closed", n)
	}
	// A subscription that never waits is not counted, nor leaked.
	h.Subscribe("c").Close()
	if n := h.Waiters(); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// A subscription's channel holds one token after any number of wake-ups;
// a Wait takes it out, and its generation moves only with a wake-up.
func TestSubscription(t *testing.T) {
	var h Hub
	s, other := h.Subscribe("k"), h.Subscribe("x")
	w1 := s.Wait()
	if w1.Gen == 0 {
		t.Fatal("a live key's generation is 0")
	}
	if w := s.Wait(); w.Gen != w1.Gen {
		t.Fatalf("generation %d then %d with no wake-up", w1.Gen, w.Gen)
	}
	h.Wake("k")
	h.Wake("k")
	select {
	case <-w1.C:
	default:
		t.Fatal("Wake left no token")
	}
	select {
	case <-w1.C:
		t.Fatal("two wake-ups left two tokens")
	default:
	}
	h.Wake("k")
	w2 := s.Wait() // takes the token out
	select {
	case <-w2.C:
		t.Fatal("a wait was woken by a wake-up from before it")
	default:
	}
	if w2.Gen == w1.Gen {
		t.Fatal("the generation did not move with the wake-up")
	}
	select {
	case <-other.Wait().C:
		t.Fatal("another key's subscription was woken")
	default:
	}
	if n := testing.AllocsPerRun(100, func() { s.Wait() }); n != 0 {
		t.Fatalf("a subscription's wait allocates %v times", n)
	}
	h.WakeAll()
	select {
	case <-w2.C:
	default:
		t.Fatal("WakeAll left no token")
	}
	if n := h.Waiters(); n != 2 {
		t.Fatalf("%d keys waited on, want 2", n)
	}
	other.Close()
	s.Close()
	s.Close() // twice is harmless
	select {
	case <-s.Wait().C:
	default:
		t.Fatal("a wait of a closed subscription blocks")
	}
	if n := h.Waiters(); n != 0 {
		t.Fatalf("%d keys left after every subscription closed", n)
	}
	s = h.Subscribe("k")
	defer s.Close()
	w := s.Wait()
	h.Close()
	select {
	case <-w.C:
	default:
		t.Fatal("Close left no token")
	}
	select {
	case <-s.Wait().C:
	default:
		t.Fatal("a wait on a closed hub blocks")
	}
}

// No wake-up is lost: a reader that checks a counter after each Wait and
// waits only when it found nothing new sees every increment, however the
// wake-ups interleave with it.
func TestSubscriptionLosesNoWakeUp(t *testing.T) {
	var h Hub
	var mu sync.Mutex
	count := 0
	const n = 20000
	s := h.Subscribe("k")
	defer s.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		seen := 0
		for seen < n {
			w := s.Wait()
			mu.Lock()
			now := count
			mu.Unlock()
			if now > seen {
				seen = now
				continue
			}
			select {
			case <-w.C:
			case <-time.After(10 * time.Second):
				t.Errorf("parked at %d of %d: a wake-up was lost", seen, n)
				return
			}
		}
	}()
	for range n {
		mu.Lock()
		count++
		mu.Unlock()
		h.Wake("k")
	}
	<-done
}
