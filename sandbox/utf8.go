package sandbox

import (
	"errors"
	"io"
	"iter"
	"unicode/utf8"
)

// NewUTF8Reader wraps r so that every Read returns only whole UTF-8
// sequences: a rune split across underlying reads is held back until it is
// complete, invalid bytes become U+FFFD and a truncated sequence at EOF
// becomes U+FFFD.
func NewUTF8Reader(r io.Reader) io.Reader {
	return &utf8Reader{r: r, buf: make([]byte, 32*1024)}
}

type utf8Reader struct {
	r       io.Reader
	buf     []byte
	pending []byte // carried-over incomplete sequence (< utf8.UTFMax bytes)
	out     []byte // decoded bytes not yet returned
	err     error
}

func (u *utf8Reader) Read(p []byte) (int, error) {
	for len(u.out) == 0 {
		if u.err != nil {
			return 0, u.err
		}
		n, err := u.r.Read(u.buf)
		data := append(u.pending, u.buf[:n]...)
		u.pending = nil
		atEOF := err != nil
		u.out, u.pending = decodeUTF8(u.out[:0], data, atEOF)
		u.pending = append([]byte(nil), u.pending...)
		if err != nil {
			u.err = err
		}
	}
	n := copy(p, u.out)
	u.out = u.out[n:]
	return n, nil
}

// decodeUTF8 appends the valid prefix of data to dst with invalid bytes
// replaced by U+FFFD. Unless atEOF, an incomplete sequence at the end is
// returned as rest.
func decodeUTF8(dst, data []byte, atEOF bool) (out, rest []byte) {
	for len(data) > 0 {
		if data[0] < utf8.RuneSelf {
			dst = append(dst, data[0])
			data = data[1:]
			continue
		}
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size <= 1 {
			if !atEOF && !utf8.FullRune(data) {
				return dst, data
			}
			// One U+FFFD per maximal invalid subpart (as TextDecoder does):
			// the longest prefix that could still have become a rune.
			m := 1
			for m < len(data) && m < utf8.UTFMax && !utf8.FullRune(data[:m+1]) {
				m++
			}
			dst = utf8.AppendRune(dst, utf8.RuneError)
			data = data[m:]
			continue
		}
		dst = append(dst, data[:size]...)
		data = data[size:]
	}
	return dst, nil
}

// Chunks streams r as UTF-8-safe string chunks, ending at EOF. A read error
// other than EOF is yielded once, last.
func Chunks(r io.Reader) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		ur := r
		if _, ok := r.(*utf8Reader); !ok {
			ur = NewUTF8Reader(r)
		}
		buf := make([]byte, 32*1024)
		for {
			n, err := ur.Read(buf)
			if n > 0 && !yield(string(buf[:n]), nil) {
				return
			}
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield("", err)
				return
			}
		}
	}
}
