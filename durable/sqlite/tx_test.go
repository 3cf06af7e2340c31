package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
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
