// Command loglen measures how the cost of a durable run log grows with its
// length: for each size it appends that many ~100-byte events to one run in
// batches (the producer's batch size, 32), then replays the closed log from
// its start, and reads the last 1,000 entries from an offset (a client
// resuming near the tail). It prints microseconds per event for the whole
// append, for the last 1% of it (the cost at the tail), for the replay, and
// for the tail read, so a reader can see whether they stay flat.
//
//	loglen [-store sqlite|postgres://...] [-sizes 1000,10000,100000,1000000] [-batch 32]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/postgres"
	"github.com/goai-sdk/goai/durable/sqlite"
)

func main() {
	store := flag.String("store", "sqlite", `"sqlite" (a new database in a temporary directory) or a postgres:// URL`)
	sizes := flag.String("sizes", "1000,10000,100000,1000000", "log lengths")
	batch := flag.Int("batch", 32, "events per append")
	flag.Parse()
	if err := run(*store, *sizes, *batch); err != nil {
		fmt.Fprintln(os.Stderr, "loglen:", err)
		os.Exit(1)
	}
}

func open(ctx context.Context, store string) (durable.Log, func(), error) {
	if strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://") {
		st, err := postgres.Open(ctx, store, nil)
		if err != nil {
			return nil, nil, err
		}
		return st, func() { _ = st.Shutdown() }, nil
	}
	if store != "sqlite" {
		return nil, nil, fmt.Errorf("unknown -store %q", store)
	}
	dir, err := os.MkdirTemp("", "goai-loglen-")
	if err != nil {
		return nil, nil, err
	}
	st, err := sqlite.Open(filepath.Join(dir, "runs.db"), nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return st, func() { _ = st.Shutdown(); os.RemoveAll(dir) }, nil
}

func run(store, sizeList string, batchSize int) error {
	ctx := context.Background()
	log, done, err := open(ctx, store)
	if err != nil {
		return err
	}
	defer done()
	var sizes []int
	for _, s := range strings.Split(sizeList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("bad size %q", s)
		}
		sizes = append(sizes, n)
	}
	kind := "sqlite"
	if store != "sqlite" {
		kind = "postgres"
	}
	fmt.Printf("%-8s %9s %14s %14s %14s %16s\n", "store", "events", "append µs/ev", "tail µs/ev", "replay µs/ev", "tail read µs/ev")
	stamp := time.Now().UnixNano()
	for _, n := range sizes {
		runID := fmt.Sprintf("loglen-%d-%d", stamp, n)
		batch := make([][]byte, batchSize)
		tailFrom := n - max(n/100, 1)
		var tailStart time.Time
		offsetAt := max(n-1000, 0) - 1 // the offset after which the tail read starts
		var tailOffset string
		t0 := time.Now()
		for i := 0; i < n; i += batchSize {
			k := min(batchSize, n-i)
			for j := range k {
				batch[j] = fmt.Appendf(batch[j][:0], `{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-000001","delta":"token %08d of the answer"}`, i+j)
			}
			if i <= tailFrom && tailFrom < i+batchSize {
				tailStart = time.Now()
			}
			offs, err := log.Append(ctx, runID, batch[:k])
			if err != nil {
				return fmt.Errorf("append at %d: %w", i, err)
			}
			if offsetAt >= i && offsetAt < i+k {
				tailOffset = offs[offsetAt-i]
			}
		}
		appendDur := time.Since(t0)
		tailDur := time.Since(tailStart)
		if err := log.Close(ctx, runID); err != nil {
			return err
		}
		t1 := time.Now()
		got := 0
		for _, err := range log.Read(ctx, runID, durable.FromStart) {
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			got++
		}
		replayDur := time.Since(t1)
		if got != n {
			return fmt.Errorf("replayed %d events, want %d", got, n)
		}
		after := durable.FromStart
		if tailOffset != "" {
			after = tailOffset
		}
		t2 := time.Now()
		tail := 0
		for _, err := range log.Read(ctx, runID, after) {
			if err != nil {
				return fmt.Errorf("tail read: %w", err)
			}
			tail++
		}
		tailReadDur := time.Since(t2)
		if tail != min(n, 1000) {
			return fmt.Errorf("tail read %d events, want %d", tail, min(n, 1000))
		}
		tailN := n - tailFrom
		fmt.Printf("%-8s %9d %14.2f %14.2f %14.2f %16.2f\n", kind, n,
			us(appendDur, n), us(tailDur, tailN), us(replayDur, n), us(tailReadDur, tail))
	}
	return nil
}

func us(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
