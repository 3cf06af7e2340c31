package durabletest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
	"go.uber.org/goleak"
)

// wait is how long the suite waits for something that should happen.
// wait guards against hangs only; it is generous because CI machines are
// small and run the race detector.
const wait = 30 * time.Second

// quiet is how long the suite watches for something that should not happen.
const quiet = 150 * time.Millisecond

// leakCheck registers a goroutine-leak check that runs after every cleanup
// registered later (so after the backend is shut down).
func leakCheck(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		if err := goleak.Find(opt); err != nil {
			t.Errorf("goroutine leak: %v", err)
		}
	})
}

func ev(i int) []byte {
	return fmt.Appendf(nil, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"%d"}`, i)
}

func evs(from, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = ev(from + i)
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAppend(t *testing.T, l durable.Log, run string, batch [][]byte) []string {
	t.Helper()
	offs, err := l.Append(ctxT(t), run, batch)
	if err != nil {
		t.Fatalf("Append(%q, %d entries): %v", run, len(batch), err)
	}
	if len(offs) != len(batch) {
		t.Fatalf("Append(%q, %d entries) returned %d offsets", run, len(batch), len(offs))
	}
	return offs
}

func mustClose(t *testing.T, l durable.Log, run string) {
	t.Helper()
	if err := l.Close(ctxT(t), run); err != nil {
		t.Fatalf("Close(%q): %v", run, err)
	}
}

func mustSnapshot(t *testing.T, l durable.Log, run string) []durable.Entry {
	t.Helper()
	es, err := l.Snapshot(ctxT(t), run)
	if err != nil {
		t.Fatalf("Snapshot(%q): %v", run, err)
	}
	return es
}

// reader runs one Read in a goroutine.
type reader struct {
	ch     chan durable.Entry
	done   chan struct{}
	err    error
	cancel context.CancelFunc
}

func startRead(t *testing.T, l durable.Log, run, after string) *reader {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &reader{ch: make(chan durable.Entry, 1<<16), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(r.done)
		for e, err := range l.Read(ctx, run, after) {
			if err != nil {
				r.err = err
				return
			}
			select {
			case r.ch <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// next returns the next entry, failing the test if none arrives.
func (r *reader) next(t *testing.T) durable.Entry {
	t.Helper()
	select {
	case e := <-r.ch:
		return e
	case <-time.After(wait):
		t.Fatalf("no entry within %v", wait)
	}
	return durable.Entry{}
}

// take returns the next n entries.
func (r *reader) take(t *testing.T, n int) []durable.Entry {
	t.Helper()
	out := make([]durable.Entry, 0, n)
	for range n {
		select {
		case e := <-r.ch:
			out = append(out, e)
		case <-r.done:
			// Drain what was sent before the end.
			for len(out) < n {
				select {
				case e := <-r.ch:
					out = append(out, e)
					continue
				default:
				}
				t.Fatalf("read ended after %d of %d entries (err %v)", len(out), n, r.err)
			}
			return out
		case <-time.After(wait):
			t.Fatalf("only %d of %d entries within %v", len(out), n, wait)
		}
	}
	return out
}

// idle asserts that the read neither yields nor ends for a while.
func (r *reader) idle(t *testing.T) {
	t.Helper()
	select {
	case e := <-r.ch:
		t.Fatalf("unexpected entry %s", e.Data)
	case <-r.done:
		t.Fatalf("read ended while the log is open (err %v)", r.err)
	case <-time.After(quiet):
	}
}

// end waits for the read to end and returns its error, failing the test on
// any further entry.
func (r *reader) end(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(wait):
		t.Fatalf("read did not end within %v", wait)
	}
	select {
	case e := <-r.ch:
		t.Fatalf("unexpected entry %s before the end", e.Data)
	default:
	}
	return r.err
}

// readAll reads a log that is expected to end (closed, or failing) within
// the suite's wait.
func readAll(t *testing.T, l durable.Log, run, after string) ([]durable.Entry, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	var out []durable.Entry
	for e, err := range l.Read(ctx, run, after) {
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	if ctx.Err() != nil {
		t.Fatalf("Read(%q, %q) did not end within %v (got %d entries)", run, after, wait, len(out))
	}
	return out, nil
}

func datas(es []durable.Entry) [][]byte {
	out := make([][]byte, len(es))
	for i, e := range es {
		out[i] = e.Data
	}
	return out
}

func offsets(es []durable.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Offset
	}
	return out
}

func equalData(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if !slices.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("%s: got %d entries %q, want %d entries %q", what, len(got), got, len(want), want)
	}
}

func equalStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}
