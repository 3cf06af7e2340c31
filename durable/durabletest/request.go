package durabletest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// Requests checks a durable.RequestStore: a stored request reads back
// byte for byte (binary, NUL and invalid UTF-8 included), a second save
// replaces the first, an unknown run is ErrRunNotFound, and a request goes
// with its run's record when finished runs are pruned, while a running
// run's request stays.
func Requests(t *testing.T, newStore func(t *testing.T) durable.Store) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := newStore(t).(durable.RequestStore)
		ctx := ctxT(t)
		body := []byte("{\"messages\":[{\"role\":\"user\",\"content\":\"h\u00e9 \\u0000\"}]}\x00\xff")
		if err := s.SaveRequest(ctx, "req-run-1", body); err != nil {
			t.Fatal(err)
		}
		got, err := s.LoadRequest(ctx, "req-run-1")
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("LoadRequest = %q, %v; want %q", got, err, body)
		}
		if err := s.SaveRequest(ctx, "req-run-1", []byte(`{"second":true}`)); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.LoadRequest(ctx, "req-run-1"); string(got) != `{"second":true}` {
			t.Fatalf("after a second save: %q", got)
		}
		if _, err := s.LoadRequest(ctx, "req-unknown"); !errors.Is(err, durable.ErrRunNotFound) {
			t.Fatalf("unknown run: %v, want ErrRunNotFound", err)
		}
	})
	t.Run("PrunedWithItsRun", func(t *testing.T) {
		st := newStore(t)
		p, ok := st.(durable.Pruner)
		if !ok {
			t.Skip("store does not prune")
		}
		s := st.(durable.RequestStore)
		ctx := ctxT(t)
		for _, id := range []string{"req-done", "req-live"} {
			mustCreate(t, st, durable.RunRecord{RunID: id, ThreadID: "th", Status: durable.StatusRunning, StartedAt: ms(0)})
			if err := s.SaveRequest(ctx, id, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		mustUpdate(t, st, "req-done", durable.RunPatch{Status: durable.Set(durable.StatusCompleted), FinishedAt: durable.Set(ms(10))})
		if _, err := p.Prune(ctx, ms(10).Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadRequest(ctx, "req-done"); !errors.Is(err, durable.ErrRunNotFound) {
			t.Fatalf("a pruned run's request: %v, want ErrRunNotFound", err)
		}
		if _, err := s.LoadRequest(ctx, "req-live"); err != nil {
			t.Fatalf("a running run's request was pruned: %v", err)
		}
	})
}
