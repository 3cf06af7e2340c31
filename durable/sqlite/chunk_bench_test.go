package sqlite

import (
	"fmt"
	"testing"
)

// BenchmarkAppendChunk encodes a chunk of 64 tokens as a model streams
// them (a delta and a timestamp that change); an op is one token.
func BenchmarkAppendChunk(b *testing.B) {
	var batch [][]byte
	for i := range maxChunk {
		batch = append(batch, fmt.Appendf(nil, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_7f3a","delta":"w%d ","timestamp":17964304884%02d}`, i, 3*i))
	}
	var dst []byte
	for b.Loop() {
		dst = appendChunk(dst[:0], batch)
	}
	b.ReportMetric(float64(len(dst))/maxChunk, "B/token")
	b.SetBytes(int64(len(batch[0])) * maxChunk)
}

// BenchmarkDecodeChunk rebuilds that chunk's tokens.
func BenchmarkDecodeChunk(b *testing.B) {
	var batch [][]byte
	for i := range maxChunk {
		batch = append(batch, fmt.Appendf(nil, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_7f3a","delta":"w%d ","timestamp":17964304884%02d}`, i, 3*i))
	}
	data := appendChunk(nil, batch)
	b.SetBytes(int64(len(batch[0])) * maxChunk)
	for b.Loop() {
		if err := decodeChunk(1, maxChunk, data, 0, maxChunk, func(int64, []byte) bool { return true }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeJournalRow encodes a small batch into a new row's data,
// as an append of a few entries to the journal does.
func BenchmarkEncodeJournalRow(b *testing.B) {
	var batch [][]byte
	for i := range 8 {
		batch = append(batch, fmt.Appendf(nil, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_7f3a","delta":"w%d ","timestamp":17964304884%02d}`, i, 3*i))
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = encodeChunk(batch)
	}
}
