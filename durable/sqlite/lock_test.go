//go:build unix

package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/internal/tail"
)

// A store opened with OneProcess has the file to itself: another such
// Open fails while it is open, and succeeds once it is shut down.
func TestOneProcessLocksTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "goai.db")
	a, err := Open(path, &Options{OneProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := Open(path, &Options{OneProcess: true}); !errors.Is(err, ErrInUse) {
		if b != nil {
			b.Shutdown()
		}
		t.Fatalf("a second OneProcess store on the file: %v, want ErrInUse", err)
	}
	if err := a.Shutdown(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(path, &Options{OneProcess: true})
	if err != nil {
		t.Fatalf("reopening after Shutdown: %v", err)
	}
	if err := b.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// With OneProcess a read resuming at the tail of a log the store appended
// waits for the next append without a query; without it, the read asks
// the file (another process may have appended).
func TestOneProcessResumeAtTheTailWithoutQuery(t *testing.T) {
	for _, one := range []bool{true, false} {
		s, err := Open(filepath.Join(t.TempDir(), "goai.db"), &Options{OneProcess: one})
		if err != nil {
			t.Fatal(err)
		}
		var queries atomic.Int64
		query := s.tail.Query
		s.tail.Query = func(ctx context.Context, runID string, after int64, limit int) (*tail.State, error) {
			queries.Add(1)
			return query(ctx, runID, after, limit)
		}
		ctx := context.Background()
		offs, err := s.Append(ctx, "r", [][]byte{[]byte("1"), []byte("2"), []byte("3")})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() {
			for es, err := range s.ReadBatches(ctx, "r", offs[2]) {
				if err != nil {
					got <- err.Error()
					return
				}
				got <- string(es[0].Data)
				return
			}
		}()
		// The read waits before the append (a wait taken is never missed).
		for s.hub.Waiters() == 0 || !one && queries.Load() == 0 {
			runtime.Gosched()
		}
		if _, err := s.Append(ctx, "r", [][]byte{[]byte("4")}); err != nil {
			t.Fatal(err)
		}
		if g := <-got; g != "4" {
			t.Fatalf("OneProcess %v: woken with %q", one, g)
		}
		if n := queries.Load(); (n == 0) != one {
			t.Errorf("OneProcess %v: the read queried %d times", one, n)
		}
		if err := s.Close(ctx, "r"); err != nil && !errors.Is(err, durable.ErrLogClosed) {
			t.Fatal(err)
		}
		if err := s.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
}
