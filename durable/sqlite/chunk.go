package sqlite

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// A chunk is one row holding consecutive entries of a log, first_seq to
// last_seq: an append of a batch inserts a row per chunk instead of a row
// per entry, and a read decodes a row per chunk. Inserting a row into a
// table clustered by (run, seq) costs about as much as the statement
// itself, so row counts were most of an unpaced producer's store cost.
//
// A chunk of one entry (first_seq = last_seq) holds the entry's bytes as
// they are, which is also what a database written before chunks holds per
// row. A chunk of several holds, after the two bytes of chunkShared, each
// entry as its length and the length of the prefix it shares with the
// entry before it (uvarints), then the ops that rebuild the rest from that
// entry: copies of its bytes, at the same place counted from the start or
// from the end, and literal bytes. A model's tokens differ from each other
// in a few bytes of their delta and timestamp, so a chunk of them stores a
// quarter of their bytes or less, and every byte not stored is one the
// WAL, its checksums, the checkpoint and the page cache do not handle
// (docs/durable.md §3). Chunks of several written before that hold each
// entry as its length (uvarint) and bytes; they are read as they are.
//
// An op is a uvarint, 3n+k: n bytes, k what they are (opLiteral,
// opCopyStart, opCopyEnd); the n bytes of a literal follow it. An entry's
// prefix and copies take no more bytes in all than the entry before it
// has, so an entry is no longer than that entry and its literals, and a
// chunk (of maxChunk entries at most) rebuilds at most maxChunk times its
// bytes.

// chunkShared starts a chunk of several entries in the shared form. An
// older chunk of several starts with its first entry's length as a
// minimal uvarint, which never begins 0x80 0x00.
var chunkShared = [2]byte{0x80, 0x00}

// maxChunk caps the entries of one chunk, so that a read starting inside
// a chunk decodes little that it skips, and a chunk's row stays a few
// pages long. Reads rely on it to bound their index scans (seqRange):
// it must never shrink below a chunk already stored.
const maxChunk = 64

// seqRange returns, for a read of the entries after seq after up to seq
// upTo (-1: no bound), at most limit of them (0: no limit), the highest
// seq it reads (hi) and the highest last seq of a chunk holding one
// (hiLast). Seqs are dense, so limit entries end at after+limit.
func seqRange(after, upTo int64, limit int) (hi, hiLast int64) {
	const top = 1<<63 - 1
	hi = top
	if upTo >= 0 {
		hi = upTo
	}
	if limit > 0 && after < top-int64(limit) {
		hi = min(hi, after+int64(limit))
	}
	if hi > top-maxChunk {
		return hi, top
	}
	return hi, hi + maxChunk - 1
}

// encodeChunk returns the data of a chunk of batch.
func encodeChunk(batch [][]byte) []byte {
	if len(batch) == 1 {
		if batch[0] == nil {
			return []byte{}
		}
		return batch[0]
	}
	// Sized for the first entry whole and the others as a model's tokens
	// take (chunk_bench_test.go): one allocation, not one per doubling.
	return appendChunk(make([]byte, 0, len(chunkShared)+len(batch[0])+32*len(batch)), batch)
}

// appendChunk appends the data of a chunk of several entries to dst, in
// the shared form.
func appendChunk(dst []byte, batch [][]byte) []byte {
	dst = append(dst, chunkShared[:]...)
	var prev []byte
	for _, b := range batch {
		dst = appendOps(dst, prev, b)
		prev = b
	}
	return dst
}

// The kinds of an op of the shared form.
const (
	opLiteral   = 0 // bytes that follow the op
	opCopyStart = 1 // the entry before's bytes at the same offset from its start
	opCopyEnd   = 2 // the entry before's bytes at the same offset from its end
)

// minCopy is the shortest copy appendOps makes: a shorter one saves less
// than the ops around it cost.
const minCopy = 4

// appendOps appends b's length, the length of the prefix it shares with
// prev, and the ops that rebuild the rest of b from prev.
func appendOps(dst, prev, b []byte) []byte {
	pre := commonPrefix(prev, b)
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	dst = binary.AppendUvarint(dst, uint64(pre))
	shift := len(prev) - len(b) // an end-aligned copy reads prev at i+shift
	budget := len(prev) - pre   // what the entry's copies may still take
	lit := pre                  // where the pending literal starts
	for i := pre; i < len(b); {
		n, kind := 0, 0
		if budget >= minCopy {
			// Most bytes of a literal match neither place: the first
			// byte's comparison says so.
			if i < len(prev) && prev[i] == b[i] {
				n, kind = commonPrefix(prev[i:], b[i:]), opCopyStart
			}
			// Of equal lengths, the two places are one: compared once.
			if j := i + shift; shift != 0 && j >= 0 && j < len(prev) && prev[j] == b[i] {
				if m := commonPrefix(prev[j:], b[i:]); m > n {
					n, kind = m, opCopyEnd
				}
			}
			n = min(n, budget)
		}
		if n < minCopy {
			i++
			continue
		}
		if lit < i {
			dst = binary.AppendUvarint(dst, uint64(i-lit)*3+opLiteral)
			dst = append(dst, b[lit:i]...)
		}
		dst = binary.AppendUvarint(dst, uint64(n)*3+uint64(kind))
		budget -= n
		i += n
		lit = i
	}
	if lit < len(b) {
		dst = binary.AppendUvarint(dst, uint64(len(b)-lit)*3+opLiteral)
		dst = append(dst, b[lit:]...)
	}
	return dst
}

// commonPrefix returns the length of the longest prefix a and b share.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	i := 0
	// Eight bytes at a time, re-slicing so the loads need no bounds checks.
	for len(a) >= 8 {
		if x := binary.LittleEndian.Uint64(a) ^ binary.LittleEndian.Uint64(b[:8]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
		a, b, i = a[8:], b[8:], i+8
	}
	for k := range a {
		if a[k] != b[k] {
			return i + k
		}
	}
	return n
}

// decodeChunk calls f for each entry of the chunk first..last whose seq is
// in (after, upTo], in order, until f returns false. The bytes f gets
// alias data, or a buffer of the chunk's own for one in the shared form.
func decodeChunk(first, last int64, data []byte, after, upTo int64, f func(seq int64, b []byte) bool) error {
	if first == last {
		if first > after && first <= upTo {
			f(first, data)
		}
		return nil
	}
	if last < first || last-first >= int64(len(data)) { // an entry takes a byte at least
		return fmt.Errorf("durable/sqlite: corrupt chunk: seqs %d to %d in %d bytes", first, last, len(data))
	}
	if len(data) >= len(chunkShared) && [2]byte(data) == chunkShared {
		return decodeShared(first, last, data[len(chunkShared):], after, upTo, f)
	}
	rest := data
	for seq := first; seq <= last; seq++ {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return fmt.Errorf("durable/sqlite: corrupt chunk: seqs %d to %d, entry %d overruns its data", first, last, seq)
		}
		b := rest[w : w+int(n) : w+int(n)]
		rest = rest[w+int(n):]
		if seq > upTo {
			return nil
		}
		if seq > after && !f(seq, b) {
			return nil
		}
	}
	if len(rest) != 0 {
		return fmt.Errorf("durable/sqlite: corrupt chunk: seqs %d to %d, %d bytes left over", first, last, len(rest))
	}
	return nil
}

// decodeShared is decodeChunk for a chunk in the shared form, rest being
// its data after chunkShared. It rebuilds the entries up to upTo into one
// buffer, then calls f.
func decodeShared(first, last int64, rest []byte, after, upTo int64, f func(seq int64, b []byte) bool) error {
	if last-first >= maxChunk {
		return fmt.Errorf("durable/sqlite: corrupt chunk: seqs %d to %d, more than %d entries", first, last, maxChunk)
	}
	corrupt := func(seq int64) error {
		return fmt.Errorf("durable/sqlite: corrupt chunk: seqs %d to %d, entry %d overruns its data", first, last, seq)
	}
	var ends [maxChunk]int // where each rebuilt entry ends in buf
	stop := min(last, upTo)
	buf := make([]byte, 0, sharedSize(rest, stop-first+1))
	prevAt, prevEnd := 0, 0
	for seq := first; seq <= stop; seq++ {
		size, pre, tail, ok := entryHead(rest)
		if !ok {
			return corrupt(seq)
		}
		rest = tail
		prevLen := prevEnd - prevAt
		if pre > size || pre > uint64(prevLen) {
			return corrupt(seq)
		}
		at := len(buf)
		buf = append(buf, buf[prevAt:prevAt+int(pre)]...)
		shift := uint64(prevLen) - size // wraps when the entry is longer: an offset from the end, mod 2^64
		budget := uint64(prevLen) - pre
		for done := pre; done < size; {
			op, w := binary.Uvarint(rest)
			if w <= 0 {
				return corrupt(seq)
			}
			rest = rest[w:]
			n, kind := op/3, op%3
			if n == 0 || n > size-done {
				return corrupt(seq)
			}
			switch kind {
			case opLiteral:
				if n > uint64(len(rest)) {
					return corrupt(seq)
				}
				buf = append(buf, rest[:n]...)
				rest = rest[n:]
			default:
				from := done
				if kind == opCopyEnd {
					from += shift
				}
				if n > budget || from >= uint64(prevLen) || n > uint64(prevLen)-from {
					return corrupt(seq)
				}
				budget -= n
				buf = append(buf, buf[prevAt+int(from):prevAt+int(from+n)]...)
			}
			done += n
		}
		ends[seq-first] = len(buf)
		prevAt, prevEnd = at, len(buf)
	}
	if stop == last && len(rest) != 0 {
		return fmt.Errorf("durable/sqlite: corrupt chunk: seqs %d to %d, %d bytes left over", first, last, len(rest))
	}
	at := 0
	for seq := first; seq <= stop; seq++ {
		end := ends[seq-first]
		b := buf[at:end:end]
		at = end
		if seq > after && !f(seq, b) {
			return nil
		}
	}
	return nil
}

// sharedSize returns the bytes that the first n entries of rest (a chunk
// in the shared form, after chunkShared) rebuild into, as their lengths
// say, so that one buffer holds them without growing: at most maxChunk
// times rest's bytes, whatever the lengths claim (decodeShared checks
// them).
func sharedSize(rest []byte, n int64) int {
	limit := uint64(maxChunk) * uint64(len(rest))
	var total uint64
	for ; n > 0; n-- {
		size, pre, tail, ok := entryHead(rest)
		if !ok {
			return int(total)
		}
		rest = tail
		if size >= limit-total {
			return int(limit)
		}
		total += size
		for done := pre; done < size; {
			op, w := binary.Uvarint(rest)
			if w <= 0 || op/3 == 0 {
				return int(total)
			}
			rest = rest[w:]
			if op%3 == opLiteral {
				if op/3 > uint64(len(rest)) {
					return int(total)
				}
				rest = rest[op/3:]
			}
			done += op / 3
		}
	}
	return int(total)
}

// entryHead reads the start of an entry in the shared form: its length
// and its prefix's.
func entryHead(data []byte) (size, pre uint64, rest []byte, ok bool) {
	size, w := binary.Uvarint(data)
	if w <= 0 {
		return 0, 0, data, false
	}
	pre, w2 := binary.Uvarint(data[w:])
	if w2 <= 0 {
		return 0, 0, data, false
	}
	return size, pre, data[w+w2:], true
}
