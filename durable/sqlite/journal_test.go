package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a log destination the writer goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// journalHarness appends single entries (a journal row each) and reads
// back what a store and the file hold.
type journalHarness struct {
	t    *testing.T
	s    *Store
	db   *sql.DB // a connection of the test's own, to look at the tables
	want map[string][]string
}

func (h *journalHarness) append(run string) {
	h.t.Helper()
	e := fmt.Sprintf("%s%d", run, len(h.want[run]))
	if _, err := h.s.Append(context.Background(), run, [][]byte{[]byte(e)}); err != nil {
		h.t.Fatal(err)
	}
	h.want[run] = append(h.want[run], e)
}

// settle waits until the writer has compacted the journal the appends so
// far filled. A compaction runs after the commit that fills the journal
// unless a write is waiting: this write, if it was queued first, and the
// compaction then follows its commit. So it asks the writer, in a write,
// until the writer's count of journal rows is below the journal's size.
func (h *journalHarness) settle() {
	h.t.Helper()
	for range 100 {
		var rows int
		if err := h.s.exec(context.Background(), noRun, func(*writeTx) error { rows = h.s.jt.rows; return nil }); err != nil {
			h.t.Fatal(err)
		}
		if rows < h.s.opts.JournalRows {
			return
		}
	}
	h.t.Fatal("the writer never compacted the full journal")
}

// fill appends the journal's size in rows (two runs interleaved), which
// makes the writer compact it, and waits for that compaction.
func (h *journalHarness) fill() {
	h.t.Helper()
	for range h.s.opts.JournalRows / 2 {
		h.append("a")
		h.append("b")
	}
	h.settle()
	if n := h.journalRows(); n != 0 {
		h.t.Fatalf("journal rows after a compaction: %d", n)
	}
}

func (h *journalHarness) journalRows() int {
	h.t.Helper()
	var n int
	if err := h.db.QueryRow(`SELECT count(*) FROM goai_chunk_journal`).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// check reads every log back through the store.
func (h *journalHarness) check(s *Store) {
	h.t.Helper()
	for run, want := range h.want {
		snap, err := s.Snapshot(context.Background(), run)
		if err != nil {
			h.t.Fatal(err)
		}
		var got []string
		for _, e := range snap {
			got = append(got, string(e.Data))
		}
		if !slices.Equal(got, want) {
			h.t.Fatalf("log %s: %q, want %q", run, got, want)
		}
	}
}

func newJournalHarness(t *testing.T, path string, logs *syncBuffer) *journalHarness {
	s, err := Open(path, &Options{JournalRows: 4, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &journalHarness{t: t, s: s, db: db, want: map[string][]string{}}
}

// TestCompactionFromCopies: a compaction moves the rows the writer keeps
// copies of, and when the journal holds a row the writer has no copy of,
// it finds out before committing and moves the table's rows instead:
// nothing is dropped.
func TestCompactionFromCopies(t *testing.T) {
	var logs syncBuffer
	h := newJournalHarness(t, filepath.Join(t.TempDir(), "goai.db"), &logs)
	compact := func() {
		t.Helper()
		h.fill()
		h.check(h.s)
	}
	compact() // Open compacted from the table: the writer has had copies since
	compact()
	if strings.Contains(logs.String(), "did not know") {
		t.Fatalf("a compaction from copies fell back to the table:\n%s", logs.String())
	}

	// A row put in the journal through the writer's own connection
	// without a copy (a write the writer's bookkeeping missed): the same
	// connection, so the data version check does not see it.
	err := h.s.exec(context.Background(), noRun, func(tx *writeTx) error {
		if _, err := tx.Exec(`INSERT INTO goai_logs (run_id, last_seq, created_at, id) VALUES ('c', 0, 0, ` + newLogID + `)`); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO goai_chunk_journal (run_id, first_seq, last_seq, data) VALUES ('c', 1, 1, 'c0')`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	h.want["c"] = []string{"c0"}
	compact()
	if !strings.Contains(logs.String(), "did not know") {
		t.Fatalf("no warning of the fallback:\n%s", logs.String())
	}
	compact() // copies are whole again
	if n := strings.Count(logs.String(), "did not know"); n != 1 {
		t.Fatalf("%d fallbacks, want 1:\n%s", n, logs.String())
	}
}

// TestCompactionKeepsAnotherWritersRows: rows another process put in the
// journal since the writer's last transaction are moved with the writer's
// own, found through the pager's data version before the copies are trusted.
func TestCompactionKeepsAnotherWritersRows(t *testing.T) {
	var logs, otherLogs syncBuffer
	path := filepath.Join(t.TempDir(), "goai.db")
	h := newJournalHarness(t, path, &logs)
	other := newJournalHarness(t, path, &otherLogs)
	other.want = h.want // one file, one set of logs
	h.fill()            // the writer has copies from here on
	other.append("x")
	other.append("x")
	h.fill()
	h.check(h.s)
	h.check(other.s)
	if strings.Contains(logs.String(), "did not know") {
		t.Fatalf("another process's rows reached the count check:\n%s", logs.String())
	}
}

func TestGroupByRun(t *testing.T) {
	rows := []journalRow{
		{run: "b", first: 1, last: 1}, {run: "a", first: 1, last: 2}, {run: "c", first: 5, last: 5},
		{run: "b", first: 2, last: 2}, {run: "a", first: 3, last: 3}, {run: "b", first: 3, last: 4},
	}
	out := groupByRun(rows, make([]journalRow, 1))
	var got []string
	for _, r := range out {
		got = append(got, fmt.Sprintf("%s%d-%d", r.run, r.first, r.last))
	}
	if want := "[a1-2 a3-3 b1-1 b2-2 b3-4 c5-5]"; fmt.Sprint(got) != want {
		t.Fatalf("grouped %v, want %s", got, want)
	}
	if len(groupByRun(nil, out)) != 0 {
		t.Fatal("no rows grouped into some")
	}
}
