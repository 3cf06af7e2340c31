package sandbox_test

import (
	"slices"
	"testing"

	"github.com/goai-sdk/goai/sandbox"
)

// Drain reports what changed before it was called even when no raw event
// was delivered for it; Stop does not.
func TestNativeDrainSweepsUndeliveredChanges(t *testing.T) {
	for _, drain := range []bool{true, false} {
		h := nativeFake()
		h.SetFile("/workspace/kept.txt", "x")
		h.SetFile("/workspace/gone.txt", "x")
		var c collector
		w := nativeWatch(t, h, &c, sandbox.WatchOptions{})
		// Changes whose raw events are still in flight.
		h.SetFile("/workspace/new.txt", "x")
		h.RemoveFile("/workspace/gone.txt")
		stop := w.Stop
		if drain {
			stop = w.Drain
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		got := c.pairs()
		want := []string{"create /workspace/new.txt", "delete /workspace/gone.txt"}
		if !drain {
			want = nil
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("drain=%v: got %q, want %q", drain, got, want)
		}
		// A second Drain (or Stop) is a no-op.
		if err := w.Drain(); err != nil || len(c.pairs()) != len(want) {
			t.Errorf("second drain: %v, %q", err, c.pairs())
		}
	}
}

// The poll path polls once more on Drain.
func TestPollDrainPollsOnceMore(t *testing.T) {
	h := nativeFake()
	h.Caps.NativeWatch = false
	fn, done := scriptFind(ok("1\t1\t./a.txt\n"), ok("1\t1\t./a.txt\n2\t2\t./b.txt\n"))
	h.ExecFunc = fn
	var c collector
	w, err := sandbox.WatchWorkspace(t.Context(), h, sandbox.WatchOptions{Mode: sandbox.WatchPoll, Interval: 1 << 40, OnEvent: c.add})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Drain(); err != nil {
		t.Fatal(err)
	}
	if got := c.pairs(); !slices.Equal(got, []string{"create /workspace/b.txt"}) {
		t.Errorf("got %q", got)
	}
	select {
	case <-done:
		t.Error("more polls than the seed and the final one")
	default:
	}
}
