package sqlite

import (
	"context"
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
