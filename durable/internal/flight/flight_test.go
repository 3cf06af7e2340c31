package flight

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestDoNeverJoinsCallStartedBeforeTheTicket(t *testing.T) {
	var g Group[string, int]
	var calls atomic.Int32
	release := make(chan struct{})
	fn := func(context.Context) (int, error) {
		calls.Add(1)
		<-release
		return 42, nil
	}
	var wg sync.WaitGroup
	results := make([]int, 10)
	wg.Go(func() { results[0], _ = g.Do(context.Background(), "k", g.Token(nil), fn) })
	time.Sleep(20 * time.Millisecond)
	// These callers began waiting after the leader's call started: it may
	// have read a state older than their wait, so they must not join it.
	// They share one new call among themselves.
	for i := 1; i < len(results); i++ {
		late := g.Token(nil)
		wg.Go(func() { results[i], _ = g.Do(context.Background(), "k", late, fn) })
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := calls.Load(); n < 2 {
		t.Fatalf("fn started %d times: late callers joined a call that predates them", n)
	}
	for _, v := range results {
		if v != 42 {
			t.Fatalf("results %v", results)
		}
	}
}

func TestDoJoinsCallStartedAfterTicket(t *testing.T) {
	var g Group[string, int]
	var calls atomic.Int32
	release := make(chan struct{})
	fn := func(context.Context) (int, error) {
		calls.Add(1)
		<-release
		return 1, nil
	}
	tickets := make([]Token, 5)
	for i := range tickets {
		tickets[i] = g.Token(nil)
	}
	var wg sync.WaitGroup
	for _, tk := range tickets {
		wg.Go(func() { g.Do(context.Background(), "k", tk, fn) })
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("fn ran %d times, want 1", n)
	}
}

func TestCallerCancelDoesNotFailOthers(t *testing.T) {
	var g Group[string, int]
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	tk := g.Token(nil)
	go func() {
		_, err := g.Do(ctx, "k", tk, func(fctx context.Context) (int, error) {
			<-release
			return 1, fctx.Err()
		})
		first <- err
	}()
	time.Sleep(20 * time.Millisecond)
	second := make(chan error, 1)
	go func() {
		_, err := g.Do(context.Background(), "k", tk, func(context.Context) (int, error) { return 2, nil })
		second <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-first; err != context.Canceled {
		t.Fatalf("cancelled caller got %v", err)
	}
	close(release)
	if err := <-second; err != nil {
		t.Fatalf("other caller got %v", err)
	}
}

func TestDoJoinsCallOfSameWakeChannel(t *testing.T) {
	var g Group[string, int]
	var calls atomic.Int32
	release := make(chan struct{})
	fn := func(context.Context) (int, error) {
		calls.Add(1)
		<-release
		return 1, nil
	}
	gen := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { g.Do(context.Background(), "k", g.Token(gen), fn) })
	time.Sleep(20 * time.Millisecond)
	for range 5 {
		tok := g.Token(gen) // drawn after the call started, same channel
		wg.Go(func() { g.Do(context.Background(), "k", tok, fn) })
	}
	other := g.Token(make(chan struct{})) // another channel, drawn late
	wg.Go(func() { g.Do(context.Background(), "k", other, fn) })
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 2 {
		t.Fatalf("fn ran %d times, want 2 (one per wake channel)", n)
	}
}
