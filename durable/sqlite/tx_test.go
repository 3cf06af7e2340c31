package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goai-sdk/goai/durable"
)

// A writer transaction runs on the writer's connection; a statement of the
// readers' pool would run outside it, so it is refused.
func TestWriteTxRefusesReaderStatements(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "goai.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	err = s.exec(context.Background(), noRun, func(tx *writeTx) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("%v", v)
			}
		}()
		tx.Stmt(s.st.runGet) // the writer's: allowed
		tx.Stmt(s.st.readRun)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "not prepared on the writer's connection") {
		t.Fatalf("a reader's statement in a write transaction: %v", err)
	}
	// The failed op's transaction was rolled back: the writer goes on.
	if _, err := s.Append(context.Background(), "r", [][]byte{[]byte("x")}); err != nil {
		t.Fatal(err)
	}
}

// The pager's data version, by which the writer learns of other
// processes' commits, moves with the writer's own commits too: those must
// not pass for another's, or every append would read its log's tail and
// state from the database again. A commit, a rolled-back op and a
// compaction all leave the writer's memory of a log in place; another
// process's commit clears it.
func TestOwnCommitsAreNotForeignWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "goai.db")
	s, err := Open(path, &Options{JournalRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx := context.Background()
	known := func() bool {
		t.Helper()
		var ok bool
		if err := s.exec(ctx, noRun, func(*writeTx) error { _, ok = s.jt.tail("r"); return nil }); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for i := range 4 { // past JournalRows: compactions run between them
		if _, err := s.Append(ctx, "r", [][]byte{fmt.Appendf(nil, "e%d", i)}); err != nil {
			t.Fatal(err)
		}
		if !known() {
			t.Fatalf("after append %d the writer forgot the log's tail", i)
		}
	}
	if err := s.exec(ctx, noRun, func(*writeTx) error { return fmt.Errorf("fail") }); err == nil {
		t.Fatal("a failing op succeeded")
	}
	if !known() {
		t.Fatal("after a rolled-back op the writer forgot the log's tail")
	}

	other, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Shutdown()
	if _, err := other.Append(ctx, "r", [][]byte{[]byte("theirs")}); err != nil {
		t.Fatal(err)
	}
	if known() {
		t.Fatal("after another process's commit the writer still trusts its memory of the log")
	}
	offs, err := s.Append(ctx, "r", [][]byte{[]byte("ours")})
	if err != nil {
		t.Fatal(err)
	}
	if want := durable.FormatOffset(scheme, "r", 6); offs[0] != want {
		t.Fatalf("append after another process's: offset %s, want %s", offs[0], want)
	}
}

// A transaction's queued journal rows go in as few statements as the
// prepared sizes allow, in the order they were queued; while any is
// queued, no other statement may run (it would not see them).
func TestJournalRowsQueuedThenInserted(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "goai.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	errRollback := errors.New("rolled back on purpose")
	for _, n := range []int{1, 3, 64, 65, 130} {
		err := s.exec(context.Background(), noRun, func(tx *writeTx) error {
			for i := range n {
				tx.queueJournal(fmt.Sprint("run-", i%7), int64(i+1), int64(i+1), []byte{byte(i)})
			}
			if err := tx.flushQueued(); err != nil {
				return err
			}
			if len(tx.journal) != 0 {
				t.Errorf("%d rows: %d arguments left queued after the flush", n, len(tx.journal))
			}
			rows, err := tx.Query(`SELECT run_id, first_seq, last_seq, data FROM goai_chunk_journal ORDER BY rowid`)
			if err != nil {
				return err
			}
			defer rows.Close()
			i := 0
			for ; rows.Next(); i++ {
				var run string
				var first, last int64
				var data []byte
				if err := rows.Scan(&run, &first, &last, &data); err != nil {
					return err
				}
				if run != fmt.Sprint("run-", i%7) || first != int64(i+1) || last != first || len(data) != 1 || data[0] != byte(i) {
					t.Errorf("%d rows: row %d is %s %d..%d %v", n, i, run, first, last, data)
				}
			}
			if i != n {
				t.Errorf("%d rows queued, %d inserted", n, i)
			}
			return errors.Join(rows.Err(), errRollback)
		})
		if !errors.Is(err, errRollback) {
			t.Fatal(err)
		}
	}
	err = s.exec(context.Background(), noRun, func(tx *writeTx) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("%v", v)
			}
		}()
		tx.queueJournal("r", 1, 1, []byte("x"))
		tx.Stmt(s.st.tailGet)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "rows queued") {
		t.Fatalf("a statement run with journal rows queued: %v", err)
	}
	// The op's transaction was rolled back with its queued row.
	if _, err := s.Append(context.Background(), "r", [][]byte{[]byte("y")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Snapshot(context.Background(), "r")
	if err != nil || len(got) != 1 || string(got[0].Data) != "y" {
		t.Fatalf("after the rolled-back op: %v %v", got, err)
	}
}
