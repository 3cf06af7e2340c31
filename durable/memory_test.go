package durable_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/durabletest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryConformance(t *testing.T) {
	durabletest.Run(t, func(t *testing.T) durable.Log { return durable.NewMemory(nil) }, nil)
}

func TestMemoryRunStoreConformance(t *testing.T) {
	durabletest.RunStore(t, func(t *testing.T) durable.Store { return durable.NewMemory(nil) }, nil)
}

func TestMemoryQueuedAppends(t *testing.T) {
	durabletest.QueuedAppends(t, func(t *testing.T) durable.Store { return durable.NewMemory(nil) })
}

func TestMemoryThreadStoreConformance(t *testing.T) {
	durabletest.Threads(t, func(t *testing.T) durable.ThreadStore { return durable.NewMemory(nil) })
}

func TestMemoryFirstChunkDeadlineOption(t *testing.T) {
	d := 300 * time.Millisecond
	durabletest.Run(t, func(t *testing.T) durable.Log {
		return durable.NewMemory(&durable.MemoryOptions{FirstChunkDeadline: d})
	}, &durabletest.Options{FirstChunkDeadline: d})
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Item 10 (memory): closed logs are evicted after the retention or beyond
// MaxLogs, oldest first; open logs never are.
func TestMemoryEviction10(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	m := durable.NewMemory(&durable.MemoryOptions{Now: clk.Now, MaxLogs: 4})
	offs, _ := m.Append(ctx, "closed-old", [][]byte{[]byte("x")})
	m.Append(ctx, "open-old", [][]byte{[]byte("x")})
	m.Close(ctx, "closed-old")
	clk.Add(5*time.Minute - time.Millisecond)
	m.Append(ctx, "trigger-1", [][]byte{[]byte("x")})
	if s, _ := m.Snapshot(ctx, "closed-old"); len(s) != 1 {
		t.Fatal("closed log evicted before the retention")
	}
	clk.Add(time.Millisecond)
	m.Append(ctx, "trigger-2", [][]byte{[]byte("x")})
	if s, _ := m.Snapshot(ctx, "closed-old"); len(s) != 0 {
		t.Fatal("closed log kept past the retention")
	}
	for _, err := range m.Read(ctx, "closed-old", offs[0]) {
		if !errors.Is(err, durable.ErrRunNotFound) {
			t.Fatalf("read of an evicted log: %v, want ErrRunNotFound", err)
		}
	}
	if s, _ := m.Snapshot(ctx, "open-old"); len(s) != 1 {
		t.Fatal("open log evicted")
	}
	// Beyond MaxLogs: the oldest closed go first, open ones stay.
	for i := range 3 {
		id := fmt.Sprint("c", i)
		m.Append(ctx, id, [][]byte{[]byte("x")})
		clk.Add(time.Second)
		m.Close(ctx, id)
	}
	for i := range 6 {
		m.Append(ctx, fmt.Sprint("open", i), [][]byte{[]byte("x")})
	}
	for i := range 3 {
		if s, _ := m.Snapshot(ctx, fmt.Sprint("c", i)); len(s) != 0 {
			t.Fatalf("closed log c%d kept beyond MaxLogs", i)
		}
	}
	for _, id := range []string{"open-old", "trigger-1", "trigger-2", "open0", "open5"} {
		if s, _ := m.Snapshot(ctx, id); len(s) != 1 {
			t.Fatalf("open log %s evicted", id)
		}
	}
}

func TestOffsetCodec(t *testing.T) {
	for _, run := range []string{"r", "a:b", "sp ace", "ü%/", "x:1:2"} {
		off := durable.FormatOffset("s", run, 42)
		if !durable.ValidOffset(off) {
			t.Fatalf("offset %q not valid", off)
		}
		seq, err := durable.ParseOffset("s", run, off)
		if err != nil || seq != 42 {
			t.Fatalf("ParseOffset(%q) = %d, %v", off, seq, err)
		}
		if _, err := durable.ParseOffset("s", run+"x", off); !errors.Is(err, durable.ErrInvalidOffset) {
			t.Fatalf("foreign run accepted: %v", err)
		}
		if _, err := durable.ParseOffset("t", run, off); !errors.Is(err, durable.ErrInvalidOffset) {
			t.Fatalf("foreign scheme accepted: %v", err)
		}
		mint := durable.NewOffsetMinter("s", run)
		for _, seq := range []int64{1, 9, 10, 42, 1 << 40} {
			if got, want := mint.Offset(seq), durable.FormatOffset("s", run, seq); got != want {
				t.Fatalf("minted %q for seq %d of %q, FormatOffset gives %q", got, seq, run, want)
			}
		}
		// A batch's offsets share one string: each must still be its own
		// seq's, across the seqs where the digits grow.
		for _, first := range []int64{1, 7, 95, 999_998, 1<<62 - 2} {
			data := [][]byte{[]byte("a"), nil, []byte("c"), []byte("d"), []byte("e")}
			es := mint.AppendEntries([]durable.Entry{{Offset: "kept"}}, first, data)
			if len(es) != 1+len(data) || es[0].Offset != "kept" {
				t.Fatalf("AppendEntries lost or added entries: %+v", es)
			}
			for i, e := range es[1:] {
				if want := durable.FormatOffset("s", run, first+int64(i)); e.Offset != want || string(e.Data) != string(data[i]) {
					t.Fatalf("entry %d from seq %d of %q: %q %q, want %q %q", i, first, run, e.Offset, e.Data, want, data[i])
				}
			}
		}
	}
	tag := strings.TrimSuffix(durable.FormatOffset("s", "r", 1), "1")
	for _, bad := range []string{"s:v1:r:0", "s:v1:r:01", "s:v1:r:-1", "s:v1:r:", "s:v1:r", "s:v1:r:1x", "s:v1:r:99999999999999999999",
		tag + "0", tag + "01", tag + "-1", tag, tag + "1x", tag + "99999999999999999999", tag[1:] + "1", "x" + tag + "1", tag + ":1",
		"s:v2:r:1", "t:v1:r:1", "s:v1:q:1"} {
		if _, err := durable.ParseOffset("s", "r", bad); !errors.Is(err, durable.ErrInvalidOffset) {
			t.Fatalf("ParseOffset(%q) accepted", bad)
		}
	}
}

// TestOffsetForm pins the offsets' form: a client may hold one across an
// upgrade, so a change to it must be deliberate. It also reads the form
// minted before (docs/durable.md §1.3), for the run it names only.
func TestOffsetForm(t *testing.T) {
	for _, c := range []struct {
		scheme, run string
		seq         int64
		want        string
	}{
		{"sqlite", "load-abcdefgh-12-34", 57, "vQwp567P:57"},
		{"memory", "run-1", 1, "NWmDaF4i:1"},
		{"pg", "run-1", 10, "ONvleT8u:10"},
	} {
		if got := durable.FormatOffset(c.scheme, c.run, c.seq); got != c.want {
			t.Errorf("FormatOffset(%q, %q, %d) = %q, want %q", c.scheme, c.run, c.seq, got, c.want)
		}
	}
	for _, c := range []struct {
		run, off string
		seq      int64
	}{
		{"run-1", "sqlite:v1:run-1:7", 7},
		{"a b:c", "sqlite:v1:a+b%3Ac:12", 12},
	} {
		if seq, err := durable.ParseOffset("sqlite", c.run, c.off); err != nil || seq != c.seq {
			t.Errorf("ParseOffset(%q) of run %q = %d, %v; want %d", c.off, c.run, seq, err, c.seq)
		}
		if _, err := durable.ParseOffset("sqlite", c.run+"x", c.off); !errors.Is(err, durable.ErrInvalidOffset) {
			t.Errorf("ParseOffset(%q) accepted for another run: %v", c.off, err)
		}
		if _, err := durable.ParseOffset("memory", c.run, c.off); !errors.Is(err, durable.ErrInvalidOffset) {
			t.Errorf("ParseOffset(%q) accepted for another scheme: %v", c.off, err)
		}
	}
}

// FuzzParseOffset: ParseOffset never panics, and what it accepts is an
// offset of the run in one of its two forms, with a seq of 1 or more.
func FuzzParseOffset(f *testing.F) {
	for _, s := range []string{"", "s:v1:r:1", durable.FormatOffset("s", "r", 12), "s:v1:r%3A:9", "abcdefgh:1", ":", "s:v1::"} {
		f.Add("r", s)
	}
	f.Fuzz(func(t *testing.T, run, off string) {
		seq, err := durable.ParseOffset("s", run, off)
		if err != nil {
			if !errors.Is(err, durable.ErrInvalidOffset) {
				t.Fatalf("ParseOffset(%q, %q): %v is not ErrInvalidOffset", run, off, err)
			}
			return
		}
		if seq < 1 {
			t.Fatalf("ParseOffset(%q, %q) = %d", run, off, seq)
		}
		if off != durable.FormatOffset("s", run, seq) && !strings.HasPrefix(off, "s:v1:") {
			t.Fatalf("ParseOffset(%q, %q) = %d: neither form of that seq", run, off, seq)
		}
	})
}

func TestValidOffsetAndRunID(t *testing.T) {
	for _, bad := range []string{"", "a\nb", "a\rb", "a\x00b", "\n", "x\r"} {
		if durable.ValidOffset(bad) || durable.ValidRunID(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, bad := range []string{" a", "a ", "a\t"} {
		if durable.ValidOffset(bad) {
			t.Errorf("offset %q accepted", bad)
		}
	}
	for _, good := range []string{"a", "s:v1:r%20x:12", "ü", "sqlite:v1:load-dncdf8cm2p0f-0-10:123456"} {
		if !durable.ValidOffset(good) || !durable.ValidRunID(good) {
			t.Errorf("%q refused", good)
		}
	}
	// A NUL, CR or LF anywhere in a long offset (the bytes are checked
	// eight at a time, then one at a time), and Unicode spaces at its ends.
	long := "sqlite:v1:load-dncdf8cm2p0f-0-10:123456"
	for i := range len(long) {
		for _, c := range "\x00\r\n" {
			bad := long[:i] + string(c) + long[i+1:]
			if durable.ValidOffset(bad) || durable.ValidRunID(bad) {
				t.Errorf("%q accepted", bad)
			}
		}
	}
	for _, bad := range []string{"\u00a0" + long, long + "\u2003", "\u3000x"} {
		if durable.ValidOffset(bad) {
			t.Errorf("offset %q accepted", bad)
		}
	}
}

// FuzzValidOffset: ValidOffset is its definition (docs/durable.md §1.3):
// non-empty, no NUL, CR or LF, equal to its trimmed form.
func FuzzValidOffset(f *testing.F) {
	for _, s := range []string{"", "a", "s:v1:r:1", " a", "a\n", "0123456789\r", "ü", "\u00a0a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := s != "" && !strings.ContainsAny(s, "\x00\r\n") && strings.TrimSpace(s) == s
		if got := durable.ValidOffset(s); got != want {
			t.Fatalf("ValidOffset(%q) = %v, want %v", s, got, want)
		}
	})
}

func BenchmarkMemory(b *testing.B) {
	durabletest.Bench(b, func(tb testing.TB) durable.Log { return durable.NewMemory(nil) })
}

func TestKeepClosed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := durable.NewMemory(nil)
	m.Append(ctx, "closed", [][]byte{[]byte("x")})
	m.Close(ctx, "closed")
	m.Append(ctx, "open", [][]byte{[]byte("x")})
	done := make(chan struct{})
	go func() {
		defer close(done)
		durable.KeepClosed(ctx, m, -time.Second, 10*time.Millisecond, nil)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s, _ := m.Snapshot(ctx, "closed"); len(s) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("closed log not pruned")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s, _ := m.Snapshot(ctx, "open"); len(s) != 1 {
		t.Fatal("open log pruned")
	}
	cancel()
	<-done
}

func TestMemoryRequestStoreConformance(t *testing.T) {
	durabletest.Requests(t, func(t *testing.T) durable.Store { return durable.NewMemory(nil) })
}

// A thread's runs are indexed by thread: the index follows creation and
// pruning, and a log pruned and created again is evicted by its new close.
func TestMemoryIndexesFollowPrune(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	m := durable.NewMemory(&durable.MemoryOptions{Now: clk.Now, MaxLogs: 2, Retention: -1})
	at := func(s int) time.Time { return time.Unix(1_000_000+int64(s), 0) }
	for i, owner := range []string{"ann", "bob"} {
		if _, err := m.CreateOrResume(ctx, durable.RunRecord{RunID: fmt.Sprint("r", i), ThreadID: "t", Owner: owner, StartedAt: at(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Update(ctx, "r0", durable.RunPatch{Status: durable.Set(durable.StatusCompleted), FinishedAt: durable.Set(at(2))}); err != nil {
		t.Fatal(err)
	}
	if owner, _, _ := m.ThreadOwner(ctx, "t"); owner != "ann" {
		t.Fatalf("thread owner %q, want the first run's (ann)", owner)
	}
	if _, err := m.Prune(ctx, at(3)); err != nil {
		t.Fatal(err)
	}
	rs, _ := m.ListByThread(ctx, "t")
	if len(rs) != 1 || rs[0].RunID != "r1" {
		t.Fatalf("thread runs after the prune: %+v, want r1 alone", rs)
	}
	if owner, _, _ := m.ThreadOwner(ctx, "t"); owner != "bob" {
		t.Fatalf("thread owner after the prune %q, want bob", owner)
	}
	if active, ok, _ := m.FindActiveRun(ctx, "t"); !ok || active.RunID != "r1" {
		t.Fatalf("active run %+v %v, want r1", active, ok)
	}

	// "a" closes, is pruned and is written and closed again: its first
	// close no longer speaks for it, its second does.
	m.Append(ctx, "a", [][]byte{[]byte("1")})
	m.Close(ctx, "a")
	clk.Add(time.Second)
	if _, err := m.Prune(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	m.Append(ctx, "a", [][]byte{[]byte("2")})
	m.Append(ctx, "b", [][]byte{[]byte("x")})
	m.Close(ctx, "b")
	m.Close(ctx, "a")
	m.Append(ctx, "c", [][]byte{[]byte("x")}) // two logs: evicts the oldest closed, b
	if s, _ := m.Snapshot(ctx, "b"); len(s) != 0 {
		t.Fatal("b, closed first, was kept")
	}
	if s, _ := m.Snapshot(ctx, "a"); len(s) != 1 || string(s[0].Data) != "2" {
		t.Fatalf("a after its second close: %q, want its second life", s)
	}
}

// BenchmarkValidOffset checks an offset as the SQLite store mints them,
// which a server does for every entry it sends.
func BenchmarkValidOffset(b *testing.B) {
	off := durable.FormatOffset("sqlite", "load-dncdf8cm2p0f-0-10", 123456)
	for b.Loop() {
		if !durable.ValidOffset(off) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkAppendEntries mints the offsets of an unpaced append's batch
// (32 entries) into a slice that is reused; an op is one entry.
func BenchmarkAppendEntries(b *testing.B) {
	mint := durable.NewOffsetMinter("sqlite", "load-dncdf8cm2p0f-0-10")
	data := make([][]byte, 32)
	for i := range data {
		data[i] = []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"w7 ","timestamp":1796430488456}`)
	}
	var es []durable.Entry
	first := int64(1)
	for b.Loop() {
		es = mint.AppendEntries(es[:0], first, data)
		first += int64(len(data))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(data)), "ns/entry")
}
