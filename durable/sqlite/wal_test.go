package sqlite

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// walRestarts reads the checkpoint sequence of the WAL file's header, which
// SQLite increments each time a writer starts the WAL over from its
// beginning; ok is false while the file has no header.
func walRestarts(t testing.TB, path string) (seq uint32, ok bool) {
	t.Helper()
	f, err := os.Open(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hdr [32]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return 0, false
	}
	return binary.BigEndian.Uint32(hdr[12:16]), true
}

// TestWALRestartsUnderSteadyWrites keeps the writer busy without a pause,
// with producers that queue their next append as soon as one is stored,
// and a reader reading, and waits for the WAL to start over once it has
// passed Options.WALLimit. A passive checkpoint on the checkpointer's
// connection runs while the writer commits, so it never ends with every
// frame copied, and SQLite starts the WAL over only after one that did:
// under steady load the WAL grew without bound (about 25 MB a second at
// 100 streams paced at 10 ms).
func TestWALRestartsUnderSteadyWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "goai.db")
	s, err := Open(path, &Options{WALLimit: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	entry := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"token"}`)
	for p := range 16 {
		wg.Add(1)
		take := func() [][]byte { return [][]byte{entry} }
		done := func(err error) bool {
			if err != nil || stop.Load() {
				if err != nil {
					t.Error(err)
				}
				wg.Done()
				return false
			}
			return true
		}
		s.AppendQueued(fmt.Sprint("run-", p), durable.AppendOptions{}, take, done)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if _, err := s.Snapshot(context.Background(), "run-0"); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	first, ok := walRestarts(t, path)
	for ; !ok; first, ok = walRestarts(t, path) {
		time.Sleep(time.Millisecond)
	}
	hang := time.After(60 * time.Second) // a hang guard, not a timing assertion
	for seq, _ := walRestarts(t, path); seq == first; seq, _ = walRestarts(t, path) {
		select {
		case <-hang:
			t.Fatal("the WAL never started over while the writer was busy")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
