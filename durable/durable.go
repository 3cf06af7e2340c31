// Package durable is the storage layer for durable runs: a per-run,
// append-only delivery log with opaque offsets (see [Log]), a run store
// with fencing claims (see [RunStore]), and a thread store a reloading
// client hydrates from (see [ThreadStore]).
//
// Log entries are opaque bytes: in goai each one is the encoded wire JSON of
// one AG-UI event, but this package never looks inside them. A read ends only
// when the producer closes the log, never because of what an entry contains,
// because an agent loop emits one terminal event per iteration.
//
// This package holds the interfaces, the error values, the fencing helper
// [Fence] and an in-memory backend ([Memory]) for tests and single-process
// use. Persistent backends live in durable/sqlite and durable/postgres, and
// durable/durabletest is the conformance suite every backend runs.
package durable

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"
	"unicode/utf8"
)

// Read sentinels, honoured by every backend.
const (
	// FromStart reads the whole log: Read(ctx, runID, FromStart) starts at
	// the first entry.
	FromStart = "-1"
	// Now reads only entries appended after the read starts.
	Now = "now"
)

// Entry is one stored log entry.
type Entry struct {
	// Offset is the opaque, backend-minted position of this entry. Passing
	// it back to Read resumes strictly after this entry. It is non-empty,
	// free of NUL, CR and LF and of surrounding white space, so it can be
	// written on an SSE "id:" line as is.
	Offset string
	// Data is the entry's payload as appended. Entries yielded by Read
	// must be treated as read-only; Snapshot returns copies.
	Data []byte
}

// Producer identifies one append request of one writer, so that a retried
// append is stored once (an idempotent append). ID names the writer (for
// example a UUID per producer instance) and Seq numbers its requests.
type Producer struct {
	ID  string
	Seq int64
}

// AppendOptions are the optional parts of an append.
type AppendOptions struct {
	// Producer, when its ID is non-empty, makes the append idempotent: a
	// repeat of the same (run, Producer.ID, Producer.Seq) stores nothing and
	// returns the offsets minted by the first attempt.
	Producer Producer
	// Epoch, when positive, fences the append: it is stored only if the
	// run's record has DriverEpoch == Epoch, checked atomically with the
	// insert. Otherwise the append stores nothing and fails with a
	// *ClaimLostError. Fencing needs a backend that is also a RunStore.
	Epoch int64
}

// Log is a set of per-run, append-only, totally ordered delivery logs.
//
// Implementations are safe for concurrent use. A log comes into existence
// with its first non-empty append (or with Close) and is terminal once
// closed: later appends fail with ErrLogClosed.
type Log interface {
	// Append stores batch at the end of runID's log, in order, and returns
	// one distinct offset per entry. An empty batch stores nothing and
	// returns no offsets.
	Append(ctx context.Context, runID string, batch [][]byte) ([]string, error)

	// AppendWith is Append with options (idempotency, fencing).
	AppendWith(ctx context.Context, runID string, batch [][]byte, opts AppendOptions) ([]string, error)

	// Read yields the entries strictly after offset after (or from the
	// sentinels FromStart / Now), then tails live entries as they are
	// appended, ending only when the log is closed and fully delivered.
	// While the log is open and caught up it parks. It ends quietly, with
	// no error, when ctx is done.
	//
	// A malformed, foreign (minted for another run or backend) or future
	// offset yields an error wrapping ErrInvalidOffset; a concrete offset
	// for a run with no log yields ErrRunNotFound. A sentinel read of a run
	// that has no data yet waits a bounded time (the backend's first-chunk
	// deadline) for the first entry and then fails with ErrRunNotFound.
	// After yielding an error the sequence ends.
	Read(ctx context.Context, runID, after string) iter.Seq2[Entry, error]

	// Close terminalizes runID's log and wakes its readers, which end once
	// they have delivered everything. Closing a closed log is a no-op;
	// closing an unknown run creates an empty closed log.
	Close(ctx context.Context, runID string) error

	// Snapshot returns a copy of everything stored for runID now, without
	// waiting, open log or not. An unknown run yields an empty slice and no
	// error.
	Snapshot(ctx context.Context, runID string) ([]Entry, error)
}

// BatchReader is implemented by logs that can hand a reader everything
// they hold at once. A reader that writes each batch out and flushes it
// flushes once per wake-up rather than once per entry, and needs no
// goroutine of its own to gather entries (docs/durable.md §1.6).
type BatchReader interface {
	// ReadBatches is Read, its entries grouped: each batch holds the
	// entries the log had stored after the previous batch when the read
	// looked (for a database backend, at most one page). Concatenated,
	// the batches are exactly what Read yields, and its errors and ending
	// are Read's. Batches are never empty. A batch and its entries are
	// read-only, and the slice is valid only until the loop body returns.
	ReadBatches(ctx context.Context, runID, after string) iter.Seq2[[]Entry, error]
}

// Entries flattens a batched read into Read's sequence, which ends quietly
// once ctx is done, even within a batch: a BatchReader's Read is
// Entries(ctx, ReadBatches(ctx, ...)).
func Entries(ctx context.Context, batches iter.Seq2[[]Entry, error]) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for es, err := range batches {
			if err != nil {
				yield(Entry{}, err)
				return
			}
			for _, e := range es {
				if ctx.Err() != nil || !yield(e, nil) {
					return
				}
			}
		}
	}
}

// QueuedAppender is implemented by logs that can take an append without a
// goroutine waiting for its commit. A producer that appends one token at a
// time otherwise needs a goroutine per append to keep its model from
// waiting on the store (docs/durable.md §1.5).
type QueuedAppender interface {
	// AppendQueued is AppendWith without offsets and without waiting: it
	// queues an append to runID's log and returns. The batch is the
	// caller's until the append runs: then take is called for it, so that
	// a producer's entries gather for as long as they can. done is called
	// once with the outcome; when it returns true after a success the
	// append is queued again, as if queued then, and take and done are
	// called again (after an error it is not). Both run on the store's
	// own goroutine (done also before AppendQueued returns, with take
	// never called, when the store refuses at once), or, in a store whose
	// appends never wait (Memory), on the caller's before AppendQueued
	// returns: they must be quick, must not call the store and must not
	// hold a lock the caller holds. The store keeps no reference to a
	// batch slice after calling done, but take hands over the entries'
	// bytes: the store may keep them as they are, and the caller must not
	// modify them once taken.
	AppendQueued(runID string, opts AppendOptions, take func() [][]byte, done func(err error) (again bool))
}

// Upserter is implemented by logs that can replace stored entries in place
// (UpsertableStreamDurability upstream). Alignment does not need it.
type Upserter interface {
	// Upsert validates the whole batch first and then stores each entry at
	// its offset: a stored offset is replaced in place, and offsets past the
	// tail must continue it without holes. Offsets minted for another run,
	// repeats within the batch and holes are rejected with ErrInvalidOffset
	// and the log unmodified.
	Upsert(ctx context.Context, runID string, entries []Entry) ([]string, error)
}

// Pruner is implemented by logs that support retention of closed logs.
type Pruner interface {
	// Prune deletes every log closed before cutoff (inclusive) and returns
	// how many it deleted, and, in a store that is also a RunStore, the
	// records of the runs that finished (completed, failed or aborted)
	// before cutoff. Open logs and unfinished runs are never pruned.
	Prune(ctx context.Context, cutoff time.Time) (int, error)
}

// Errors. Callers branch on these with errors.Is.
var (
	// ErrRunNotFound reports a run with no log (or no record).
	ErrRunNotFound = errors.New("durable: run not found")
	// ErrInvalidOffset reports an offset the log cannot resume from:
	// malformed, minted for another run or backend, or past the tail. The
	// concrete error is an *OffsetError.
	ErrInvalidOffset = errors.New("durable: invalid offset")
	// ErrLogClosed reports an append to a closed log.
	ErrLogClosed = errors.New("durable: log closed")
	// ErrClaimLost reports a fenced write by a driver whose claim was
	// superseded. The concrete error is a *ClaimLostError.
	ErrClaimLost = errors.New("durable: run claim lost")
	// ErrClaimNotAcquired reports a claim refused because the run is unknown
	// or terminal. The concrete error is a *ClaimError.
	ErrClaimNotAcquired = errors.New("durable: run claim not acquired")
	// ErrProducerConflict reports a producer tuple reused for a batch of a
	// different length.
	ErrProducerConflict = errors.New("durable: producer tuple reused with a different batch")
	// ErrStoreClosed reports use of a backend after it was shut down.
	ErrStoreClosed = errors.New("durable: store shut down")
	// ErrStoreUnhealthy reports a store that must not take new runs: its
	// database file was removed or replaced under it, or it failed a
	// probe. A file check, once failed, stays failed.
	ErrStoreUnhealthy = errors.New("durable: store unhealthy")
)

// Healther is implemented by stores that can tell whether they can still
// be trusted with new runs.
type Healther interface {
	// Healthy returns nil, or an error wrapping ErrStoreUnhealthy. With deep
	// false it is cheap enough for every new run (for a file-backed store,
	// a stat that checks the file is still the one it opened); with deep
	// true it also proves the store writable (a write transaction).
	Healthy(ctx context.Context, deep bool) error
}

// CommitStats counts a store's group commits: Writes over Commits is how
// many writes share a transaction, whose fixed cost (its locks and its
// write-ahead log write) is most of what an append costs when each carries
// one token. Few writes per commit under many paced producers says a
// commit gap (sqlite.Options.CommitGap) would pay.
type CommitStats struct {
	Commits int64 // transactions committed that carried writes
	Writes  int64 // writes (appends, and for SQLite every other write) they carried
}

// CommitCounter is implemented by stores that group writes into shared
// transactions. CommitStats is safe to call concurrently with writes.
type CommitCounter interface {
	CommitStats() CommitStats
}

// OffsetError details an invalid offset. It wraps ErrInvalidOffset.
type OffsetError struct {
	RunID  string
	Offset string
	Reason string // e.g. "malformed", "minted for another run", "past the tail"
}

func (e *OffsetError) Error() string {
	return fmt.Sprintf("durable: invalid offset %q for run %q: %s", e.Offset, e.RunID, e.Reason)
}

func (e *OffsetError) Unwrap() error { return ErrInvalidOffset }

// ValidOffset reports whether s is acceptable as an offset on the wire
// (docs/durable.md §1.3): non-empty, free of NUL, CR and LF, and equal to its trimmed form.
// It says nothing about whether a backend minted s.
func ValidOffset(s string) bool {
	// Checked for every entry a server sends: the bytes eight at a time,
	// and the ends for spaces without trimming when they are ASCII.
	if s == "" || hasNulCRLF(s) {
		return false
	}
	first, last := s[0], s[len(s)-1]
	if first < utf8.RuneSelf && last < utf8.RuneSelf {
		return !asciiSpace(first) && !asciiSpace(last)
	}
	return strings.TrimSpace(s) == s
}

// asciiSpace reports whether c is a space as strings.TrimSpace counts
// them among ASCII bytes.
func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// hasNulCRLF reports whether s holds a NUL, CR or LF byte.
func hasNulCRLF(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// hasZero is nonzero when a byte of x is zero.
	hasZero := func(x uint64) uint64 { return (x - ones) &^ x & highs }
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if hasZero(w)|hasZero(w^(ones*'\r'))|hasZero(w^(ones*'\n')) != 0 {
			return true
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c == 0 || c == '\r' || c == '\n' {
			return true
		}
	}
	return false
}

// ValidRunID reports whether id can name a run: non-empty and free of NUL,
// CR and LF.
func ValidRunID(id string) bool {
	return id != "" && !hasNulCRLF(id)
}

// CheckRunID returns an error unless ValidRunID(id).
func CheckRunID(id string) error {
	if !ValidRunID(id) {
		return fmt.Errorf("durable: invalid run id %q", id)
	}
	return nil
}
