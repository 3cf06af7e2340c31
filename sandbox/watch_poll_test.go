package sandbox_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/sandboxtest"
)

func TestItem16DiffSnapshots(t *testing.T) {
	a := sandbox.ParseFindOutput("1\t10\t./a\n2\t20\t./b\n")
	b := sandbox.ParseFindOutput("2.5\t25\t./b\n3\t30\t./c\n")
	ts := time.UnixMilli(42)
	got := sandbox.DiffSnapshots("/workspace", a, b, ts)
	want := []sandbox.WatchEvent{
		{Type: sandbox.FileChange, Path: "/workspace/b", Timestamp: ts},
		{Type: sandbox.FileCreate, Path: "/workspace/c", Timestamp: ts},
		{Type: sandbox.FileDelete, Path: "/workspace/a", Timestamp: ts},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := sandbox.DiffSnapshots("/workspace", a, a, ts); len(got) != 0 {
		t.Fatalf("identical snapshots: got %v", got)
	}
}

func TestItem17PollNormalisesAndEmits(t *testing.T) {
	h := sandboxtest.NewFakeHandle()
	exec, done := scriptFind(
		ok("1\t1\t./a.js\n"),
		ok("1\t1\t./a.js\n2\t2\t./b.js\n"),
		ok("9\t1\t./a.js\n2\t2\t./b.js\n"),
		ok("2\t2\t./b.js\n"),
	)
	h.ExecFunc = exec
	var c collector
	w := pollWatch(t, h, &c, sandbox.WatchOptions{})
	wait(t, done)
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	want := []string{"create /workspace/b.js", "change /workspace/a.js", "delete /workspace/a.js"}
	if got := c.pairs(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	cmd := h.Execs()[0]
	wantCmd := `find . -type f -not -path '*/.git/*' -not -path '*/node_modules/*' -printf '%T@\t%s\t%p\n'`
	if cmd != wantCmd {
		t.Fatalf("command %q, want %q", cmd, wantCmd)
	}
}

func TestItem18NonZeroEmptyKeepsSnapshot(t *testing.T) {
	h := sandboxtest.NewFakeHandle()
	log, rec := sandboxtest.NewLogger()
	exec, done := scriptFind(
		ok("1\t1\t./a\n"),
		exit(1, ""),
		ok("1\t1\t./a\n"),
	)
	h.ExecFunc = exec
	var c collector
	w := pollWatch(t, h, &c, sandbox.WatchOptions{Logger: log})
	wait(t, done)
	w.Stop()
	if got := c.pairs(); len(got) != 0 {
		t.Fatalf("events %v", got)
	}
	warns := rec.Find(slog.LevelWarn, "non-zero")
	if len(warns) != 1 || warns[0].Category != chat.CatErrors {
		t.Fatalf("warns %+v", rec.Records())
	}
}

func TestItem19FailedSeedThenBaseline(t *testing.T) {
	for name, first := range map[string]step{"throws": throw("boom"), "empty": exit(2, "")} {
		t.Run(name, func(t *testing.T) {
			h := sandboxtest.NewFakeHandle()
			log, rec := sandboxtest.NewLogger()
			exec, done := scriptFind(first, ok("1\t1\t./a\n1\t1\t./b\n"), ok("1\t1\t./a\n1\t1\t./b\n1\t1\t./c\n"))
			h.ExecFunc = exec
			var c collector
			w := pollWatch(t, h, &c, sandbox.WatchOptions{Logger: log})
			wait(t, done)
			w.Stop()
			if got := c.pairs(); !slices.Equal(got, []string{"create /workspace/c"}) {
				t.Fatalf("events %v", got)
			}
			if name == "throws" && len(rec.Find(slog.LevelWarn, "initial `find` poll threw")) != 1 {
				t.Fatalf("logs %+v", rec.Records())
			}
		})
	}
}

func TestItem20PartialPollNeverDeletes(t *testing.T) {
	h := sandboxtest.NewFakeHandle()
	exec, done := scriptFind(
		ok("1\t1\t./a\n1\t1\t./b\n"),
		exit(1, "1\t1\t./a\n"),       // partial: b missing, no delete
		ok("1\t1\t./a\n1\t1\t./b\n"), // complete, b still there: nothing
		exit(1, "1\t1\t./a\n"),       // partial again
		ok("1\t1\t./a\n"),            // complete: now b is deleted
	)
	h.ExecFunc = exec
	var c collector
	w := pollWatch(t, h, &c, sandbox.WatchOptions{})
	wait(t, done)
	w.Stop()
	if got := c.pairs(); !slices.Equal(got, []string{"delete /workspace/b"}) {
		t.Fatalf("events %v", got)
	}

	// A partial seed is re-baselined silently by the first complete poll.
	h2 := sandboxtest.NewFakeHandle()
	log, rec := sandboxtest.NewLogger()
	exec2, done2 := scriptFind(
		exit(1, "1\t1\t./a\n"),
		ok("1\t1\t./a\n1\t1\t./b\n"),
		ok("1\t1\t./a\n1\t1\t./b\n1\t1\t./c\n"),
	)
	h2.ExecFunc = exec2
	var c2 collector
	w2 := pollWatch(t, h2, &c2, sandbox.WatchOptions{Logger: log})
	wait(t, done2)
	w2.Stop()
	if got := c2.pairs(); !slices.Equal(got, []string{"create /workspace/c"}) {
		t.Fatalf("events %v", got)
	}
	if len(rec.Find(slog.LevelDebug, "re-baselined after provisional partial seed")) != 1 {
		t.Fatalf("logs %+v", rec.Records())
	}
	if len(rec.Find(slog.LevelDebug, "non-zero exit with partial output")) == 0 {
		t.Fatalf("logs %+v", rec.Records())
	}
}

func TestItem21ThrowsLogLevels(t *testing.T) {
	h := sandboxtest.NewFakeHandle()
	log, rec := sandboxtest.NewLogger()
	exec, done := scriptFind(ok("1\t1\t./a\n"), throw("x"), ok("1\t1\t./a\n"), throw("x"), throw("x"), throw("x"))
	h.ExecFunc = exec
	var c collector
	w := pollWatch(t, h, &c, sandbox.WatchOptions{Logger: log})
	wait(t, done)
	w.Stop()
	if len(c.events()) != 0 {
		t.Fatalf("events %v", c.pairs())
	}
	n := 0
	for _, r := range rec.Find(slog.LevelDebug, "poll threw") {
		if r.Message == "sandbox watch: `find` poll threw" {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("debug throws = %d: %+v", n, rec.Records())
	}
	warns := rec.Find(slog.LevelWarn, "poll threw repeatedly")
	if len(warns) != 1 || warns[0].Attrs["consecutiveThrows"] != "3" {
		t.Fatalf("warns %+v", rec.Records())
	}
}

func TestItem22CancelledContextNoExec(t *testing.T) {
	h := sandboxtest.NewFakeHandle()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var c collector
	for _, mode := range []sandbox.WatchMode{sandbox.WatchAuto, sandbox.WatchPoll} {
		w, err := sandbox.WatchWorkspace(ctx, h, sandbox.WatchOptions{Mode: mode, OnEvent: c.add})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.Execs()) != 0 || h.FSCalls() != 0 || len(c.events()) != 0 {
		t.Fatalf("execs %v fs %d events %v", h.Execs(), h.FSCalls(), c.pairs())
	}
}

func TestPollStopsOnContextCancel(t *testing.T) {
	h := sandboxtest.NewFakeHandle()
	h.ExecFunc = func(context.Context, string, sandbox.ExecOptions) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Stdout: "1\t1\t./a\n"}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	var c collector
	w, err := sandbox.WatchWorkspace(ctx, h, sandbox.WatchOptions{Mode: sandbox.WatchPoll, Interval: time.Millisecond, OnEvent: c.add})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	cancel()
	w.Stop()
	n := len(h.Execs())
	time.Sleep(20 * time.Millisecond)
	if len(h.Execs()) != n {
		t.Fatal("polling continued after cancel")
	}
}

func TestFindCommandIgnoreList(t *testing.T) {
	got := sandbox.FindCommand([]string{"dist", "it's"})
	if !strings.Contains(got, `-not -path '*/dist/*' -not -path '*/it'\''s/*'`) {
		t.Fatal(got)
	}
	if strings.Contains(sandbox.FindCommand(nil), "-not") {
		t.Fatal("empty ignore list should not filter")
	}
}

func FuzzParseFindOutput(f *testing.F) {
	f.Add("1\t10\t./a\n2\t20\t./b/c d\n")
	f.Add("\n\nbad line\n1\t2\n1\t2\t.\n1\t2\t./\n1\t2\t..x\n")
	f.Add("1.5\t3\t./x\ty\n")
	f.Fuzz(func(t *testing.T, out string) {
		s := sandbox.ParseFindOutput(out)
		paths := s.Paths()
		if len(paths) != s.Len() {
			t.Fatalf("paths %d != len %d", len(paths), s.Len())
		}
		for _, p := range paths {
			sig, ok := s.Get(p)
			if !ok || strings.Count(sig, "\t") != 1 || strings.Contains(p, "\n") || strings.Contains(sig, "\n") {
				t.Fatalf("bad entry %q -> %q", p, sig)
			}
		}
		// Diffing a snapshot with itself is empty; with empty is all creates.
		if evs := sandbox.DiffSnapshots("/w", s, s, time.Time{}); len(evs) != 0 {
			t.Fatalf("self diff %v", evs)
		}
		evs := sandbox.DiffSnapshots("/w", sandbox.NewFileSnapshot(0), s, time.Time{})
		if len(evs) != s.Len() {
			t.Fatalf("creates %d != %d", len(evs), s.Len())
		}
	})
}
