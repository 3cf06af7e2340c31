package sqlite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestChunkRoundTrip(t *testing.T) {
	for _, batch := range [][][]byte{
		{[]byte("one")},
		{nil},
		{[]byte("a"), {}, []byte("ccc"), bytes.Repeat([]byte("x"), 300)},
	} {
		data := encodeChunk(batch)
		first := int64(10)
		last := first + int64(len(batch)) - 1
		var got [][]byte
		if err := decodeChunk(first, last, data, 0, 1<<62, func(seq int64, b []byte) bool {
			if want := first + int64(len(got)); seq != want {
				t.Fatalf("seq %d, want %d", seq, want)
			}
			got = append(got, b)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(batch) {
			t.Fatalf("decoded %q, want %q", got, batch)
		}
		if len(batch) < 4 {
			continue
		}
		// A window inside the chunk (its second and third entries), and
		// a stop after the first of them.
		var seqs []int64
		if err := decodeChunk(first, last, data, first, first+2, func(seq int64, b []byte) bool {
			seqs = append(seqs, seq)
			return len(seqs) < 1
		}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(seqs) != fmt.Sprint([]int64{first + 1}) {
			t.Fatalf("window: %v, want [%d]", seqs, first+1)
		}
	}
}

// legacyChunk is a chunk of several entries as versions before the shared
// form wrote it: each entry's length and bytes.
func legacyChunk(entries ...[]byte) []byte {
	var data []byte
	for _, e := range entries {
		data = binary.AppendUvarint(data, uint64(len(e)))
		data = append(data, e...)
	}
	return data
}

// A chunk of a model's tokens keeps only what differs from the token
// before, and decodes back, as do entries that repeat, cut or double the
// one before; a chunk written before the
// shared form still decodes, including one whose first entry is 128 bytes
// long (its length starts with 0x80, as chunkShared does).
func TestChunkShared(t *testing.T) {
	var batch [][]byte
	raw := 0
	for i := range maxChunk {
		b := fmt.Appendf(nil, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_7f3a","delta":"w%d ","timestamp":17964304884%02d}`, i, i/3)
		batch = append(batch, b)
		raw += len(b)
	}
	data := encodeChunk(batch)
	if len(data)*4 > raw {
		t.Errorf("a chunk of %d tokens: %d bytes for %d, want under a quarter", len(batch), len(data), raw)
	}
	decode := func(data []byte, n int) [][]byte {
		t.Helper()
		var got [][]byte
		if err := decodeChunk(1, int64(n), data, 0, 1<<62, func(_ int64, b []byte) bool {
			got = append(got, b)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := decode(data, len(batch)); !slices.EqualFunc(got, batch, bytes.Equal) {
		t.Fatalf("decoded %q", got)
	}
	// Entries sharing all of the one before (a repeat, a prefix, a suffix).
	odd := [][]byte{[]byte("abcdef"), []byte("abcdef"), []byte("abcde"), []byte("xabcde"), {}, []byte("q"), nil, []byte("q"),
		[]byte("abab"), []byte("abababab"), []byte("ab-abab-abababab-ab"), []byte("abcdefgh"), []byte("abcdZZZZabcdefgh"), bytes.Repeat([]byte("z"), 300), bytes.Repeat([]byte("z"), 299)}
	if got := decode(encodeChunk(odd), len(odd)); fmt.Sprint(got) != fmt.Sprint(odd) {
		t.Fatalf("decoded %q, want %q", got, odd)
	}
	long := bytes.Repeat([]byte("l"), 128)
	old := legacyChunk(long, []byte("x"), []byte{})
	if old[0] != chunkShared[0] {
		t.Fatalf("the legacy chunk starts with %#x", old[0])
	}
	if got := decode(old, 3); fmt.Sprint(got) != fmt.Sprint([][]byte{long, []byte("x"), {}}) {
		t.Fatalf("legacy chunk decoded as %q", got)
	}
	// A window of the shared chunk: entries are rebuilt from the chunk's
	// first, and only those up to upTo.
	var seqs []int64
	if err := decodeChunk(1, maxChunk, data, 9, 11, func(seq int64, b []byte) bool {
		if !bytes.Equal(b, batch[seq-1]) {
			t.Fatalf("entry %d: %q", seq, b)
		}
		seqs = append(seqs, seq)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seqs) != "[10 11]" {
		t.Fatalf("window: %v", seqs)
	}
}

func TestChunkCorrupt(t *testing.T) {
	good := encodeChunk([][]byte{[]byte("ab"), []byte("c")})
	for name, c := range map[string]struct {
		first, last int64
		data        []byte
	}{
		"overrun":     {1, 2, good[:len(good)-1]},
		"left over":   {1, 2, append(append([]byte{}, good...), 0)},
		"too many":    {1, 3, good},
		"seqs astray": {5, 1, good},
		"huge length": {1, 2, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 'a'}},
		// In the shared form ("a", then a bad entry): a copy beyond the
		// entry before, from its end, of zero bytes, an op past the
		// entry's length, a literal beyond the data, bytes left over, an
		// entry cut short, copies of more than the entry before holds, a
		// prefix longer than it or than the entry, more entries than a
		// chunk holds.
		"shared copy":        {1, 2, []byte{0x80, 0, 1, 0, 3, 'a', 2, 0, 7}},
		"shared copy end":    {1, 2, []byte{0x80, 0, 1, 0, 3, 'a', 3, 0, 5}},
		"shared empty op":    {1, 2, []byte{0x80, 0, 1, 0, 3, 'a', 1, 0, 0}},
		"shared op past":     {1, 2, []byte{0x80, 0, 1, 0, 3, 'a', 1, 0, 6, 'b', 'c'}},
		"shared literal":     {1, 2, []byte{0x80, 0, 1, 0, 3, 'a', 5, 0, 15, 'b'}},
		"shared leftover":    {1, 2, []byte{0x80, 0, 1, 0, 3, 'a', 1, 0, 3, 'b', 'c'}},
		"shared cut":         {1, 2, []byte{0x80, 0, 1, 0, 3, 'a', 1}},
		"shared doubling":    {1, 2, []byte{0x80, 0, 4, 0, 12, 'a', 'b', 'c', 'd', 8, 0, 13, 14}},
		"shared prefix":      {1, 2, []byte{0x80, 0, 1, 0, 3, 'a', 3, 2, 3, 'x'}},
		"shared prefix past": {1, 2, []byte{0x80, 0, 1, 0, 3, 'a', 0, 1}},
		"shared too many":    {1, maxChunk + 1, append([]byte{0x80, 0}, make([]byte, maxChunk+1)...)},
	} {
		if err := decodeChunk(c.first, c.last, c.data, 0, 1<<62, func(int64, []byte) bool { return true }); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeChunk: no input makes decodeChunk panic or yield more than
// maxChunk times its data, and whatever encodeChunk writes decodes back.
func FuzzDecodeChunk(f *testing.F) {
	f.Add(int64(1), int64(3), encodeChunk([][]byte{[]byte("a"), []byte("bc"), {}}), int64(1))
	f.Add(int64(7), int64(7), []byte("single"), int64(0))
	f.Add(int64(1), int64(2), legacyChunk([]byte("ab"), []byte("c")), int64(0))
	f.Add(int64(1), int64(3), encodeChunk([][]byte{[]byte(`{"delta":"a"}`), []byte(`{"delta":"b"}`), []byte(`{"delta":"bb"}`)}), int64(2))
	f.Fuzz(func(t *testing.T, first, last int64, data []byte, after int64) {
		total := 0
		_ = decodeChunk(first, last, data, after, 1<<62, func(seq int64, b []byte) bool {
			if seq <= after || seq < first || seq > last {
				t.Fatalf("seq %d outside (%d, %d..%d]", seq, after, first, last)
			}
			total += len(b)
			return true
		})
		// A chunk in the shared form rebuilds each entry from the one
		// before it and bytes of its own.
		if total > maxChunk*len(data) {
			t.Fatalf("yielded %d bytes of %d", total, len(data))
		}
		// Split data into entries (a chunk's worth at most) and back.
		var batch [][]byte
		for i := 0; i < len(data) && len(batch) < maxChunk; i += 3 {
			batch = append(batch, data[i:min(i+3, len(data))])
		}
		if len(batch) == 0 {
			return
		}
		data = bytes.Join(batch, nil)
		var got [][]byte
		if err := decodeChunk(1, int64(len(batch)), encodeChunk(batch), 0, 1<<62, func(_ int64, b []byte) bool {
			got = append(got, b)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bytes.Join(got, nil), data) || len(got) != len(batch) {
			t.Fatalf("round trip of %d entries gave %d", len(batch), len(got))
		}
	})
}

// mergeJournal merges a run's rows that follow on, up to maxChunk entries,
// and nothing else; a row that does not decode moves as it is, alone.
func TestMergeJournal(t *testing.T) {
	row := func(run string, first int64, entries ...string) journalRow {
		b := make([][]byte, len(entries))
		for i, e := range entries {
			b[i] = []byte(e)
		}
		return journalRow{run: run, first: first, last: first + int64(len(b)) - 1, data: encodeChunk(b)}
	}
	corrupt := journalRow{run: "y", first: 4, last: 6, data: []byte{9}}
	var rows []journalRow
	for i := range 70 { // run x: 70 tokens, one a row, then a gap
		rows = append(rows, row("x", int64(i+1), fmt.Sprint("x", i+1)))
	}
	rows = append(rows,
		row("x", 80, "x80", "x81"), row("x", 82, "x82"),
		row("y", 1, "y1"), row("y", 2, "", "y3"), // an empty entry survives
		corrupt, row("y", 7, "y7"), row("y", 8, "y8"),
		row("z", 5, "z5"))
	var got []journalRow
	if err := mergeJournal(rows, func(c journalRow) error {
		got = append(got, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	seqs := func(prefix string, from, to int) []string {
		var s []string
		for i := from; i <= to; i++ {
			s = append(s, fmt.Sprint(prefix, i))
		}
		return s
	}
	want := []journalRow{
		row("x", 1, seqs("x", 1, 64)...), row("x", 65, seqs("x", 65, 70)...),
		row("x", 80, "x80", "x81", "x82"),
		row("y", 1, "y1", "", "y3"),
		corrupt,
		row("y", 7, "y7", "y8"),
		row("z", 5, "z5"),
	}
	if len(got) != len(want) {
		t.Fatalf("%d chunks, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].run != want[i].run || got[i].first != want[i].first || got[i].last != want[i].last || !bytes.Equal(got[i].data, want[i].data) {
			t.Fatalf("chunk %d: %s %d-%d %q, want %s %d-%d %q", i,
				got[i].run, got[i].first, got[i].last, got[i].data, want[i].run, want[i].first, want[i].last, want[i].data)
		}
	}

	failing := errors.New("insert failed")
	if err := mergeJournal(rows, func(journalRow) error { return failing }); !errors.Is(err, failing) {
		t.Fatalf("a failing put: %v, want %v", err, failing)
	}
}
