package sqlite

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// A chunk is one row holding consecutive entries of a log, first_seq to
// last_seq: an append of a batch inserts a row per chunk instead of a row
// per entry, and a read decodes a row per chunk. Inserting a row into a
// table clustered by (run, seq) costs about as much as the statement
// itself, so row counts were most of an unpaced producer's store cost.
//
// A chunk of one entry (first_seq = last_seq) holds the entry's bytes as
// they are, which is also what a database written before chunks holds per
// row; a chunk of several holds each entry as its length (uvarint) and
// bytes.

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
	return appendChunk(nil, batch)
}

// appendChunk appends the data of a chunk of several entries to dst.
func appendChunk(dst []byte, batch [][]byte) []byte {
	n := 0
	for _, b := range batch {
		n += binary.MaxVarintLen32 + len(b)
	}
	dst = slices.Grow(dst, n)
	for _, b := range batch {
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		dst = append(dst, b...)
	}
	return dst
}

// decodeChunk calls f for each entry of the chunk first..last whose seq is
// in (after, upTo], in order, until f returns false. The bytes f gets
// alias data.
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
