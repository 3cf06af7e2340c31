package flight

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestDoCoalesces(t *testing.T) {
	var g Group[string, int]
	var calls atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	results := make([]int, 10)
	for i := range results {
		wg.Go(func() {
			v, err := g.Do(context.Background(), "k", func(context.Context) (int, error) {
				calls.Add(1)
				<-release
				return 42, nil
			})
			if err != nil {
				t.Error(err)
			}
			results[i] = v
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("fn ran %d times, want 1", n)
	}
	for _, v := range results {
		if v != 42 {
			t.Fatalf("results %v", results)
		}
	}
	// A later call runs again.
	v, _ := g.Do(context.Background(), "k", func(context.Context) (int, error) { return 7, nil })
	if v != 7 {
		t.Fatalf("later call got %d", v)
	}
}

func TestCallerCancelDoesNotFailOthers(t *testing.T) {
	var g Group[string, int]
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "k", func(fctx context.Context) (int, error) {
			<-release
			return 1, fctx.Err()
		})
		first <- err
	}()
	time.Sleep(20 * time.Millisecond)
	second := make(chan error, 1)
	go func() {
		_, err := g.Do(context.Background(), "k", func(context.Context) (int, error) { return 2, nil })
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
