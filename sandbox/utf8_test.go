package sandbox_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/goai-sdk/goai/sandbox"
)

// chunkReader returns the given chunks one per Read.
type chunkReader struct{ chunks [][]byte }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func TestChunksSplitRune(t *testing.T) {
	euro := []byte("€") // e2 82 ac
	r := &chunkReader{chunks: [][]byte{append([]byte("a"), euro[:1]...), euro[1:2], append(euro[2:], 'b')}}
	var got []string
	for c, err := range sandbox.Chunks(r) {
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(c) {
			t.Fatalf("invalid chunk %q", c)
		}
		got = append(got, c)
	}
	if strings.Join(got, "") != "a€b" {
		t.Fatalf("got %q", got)
	}
	// A truncated sequence at EOF becomes U+FFFD.
	all, _ := io.ReadAll(sandbox.NewUTF8Reader(bytes.NewReader(append([]byte("x"), euro[:2]...))))
	if string(all) != "x\uFFFD" {
		t.Fatalf("got %q", all)
	}
	// A read error is yielded last.
	var errs int
	for _, err := range sandbox.Chunks(iotest.ErrReader(errors.New("boom"))) {
		if err != nil {
			errs++
		}
	}
	if errs != 1 {
		t.Fatal("error not yielded")
	}
}

func FuzzUTF8Reader(f *testing.F) {
	f.Add([]byte("héllo wörld €𝄞"), uint8(1))
	f.Add([]byte{0xff, 0xe2, 0x82, 'a', 0xf0, 0x9d}, uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		n := int(size%7) + 1
		var chunks [][]byte
		for i := 0; i < len(data); i += n {
			chunks = append(chunks, append([]byte(nil), data[i:min(i+n, len(data))]...))
		}
		var out strings.Builder
		for c, err := range sandbox.Chunks(&chunkReader{chunks: chunks}) {
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.ValidString(c) {
				t.Fatalf("invalid chunk %q", c)
			}
			out.WriteString(c)
		}
		// Chunking must not change the decoding: same as decoding at once.
		whole, _ := io.ReadAll(sandbox.NewUTF8Reader(bytes.NewReader(data)))
		if out.String() != string(whole) {
			t.Fatalf("chunked %q != whole %q", out.String(), whole)
		}
		if utf8.Valid(data) && string(whole) != string(data) {
			t.Fatalf("valid input changed: %q -> %q", data, whole)
		}
	})
}
