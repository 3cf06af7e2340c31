package sqlite

import (
	"bytes"
	"errors"
	"fmt"
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
	} {
		if err := decodeChunk(c.first, c.last, c.data, 0, 1<<62, func(int64, []byte) bool { return true }); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeChunk: no input makes decodeChunk panic or yield bytes beyond
// its data, and whatever encodeChunk writes decodes back.
func FuzzDecodeChunk(f *testing.F) {
	f.Add(int64(1), int64(3), encodeChunk([][]byte{[]byte("a"), []byte("bc"), {}}), int64(1))
	f.Add(int64(7), int64(7), []byte("single"), int64(0))
	f.Fuzz(func(t *testing.T, first, last int64, data []byte, after int64) {
		total := 0
		_ = decodeChunk(first, last, data, after, 1<<62, func(seq int64, b []byte) bool {
			if seq <= after || seq < first || seq > last {
				t.Fatalf("seq %d outside (%d, %d..%d]", seq, after, first, last)
			}
			total += len(b)
			return true
		})
		if total > len(data) {
			t.Fatalf("yielded %d bytes of %d", total, len(data))
		}
		// Split data into entries and back.
		var batch [][]byte
		for i := 0; i < len(data); i += 3 {
			batch = append(batch, data[i:min(i+3, len(data))])
		}
		if len(batch) == 0 {
			return
		}
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
