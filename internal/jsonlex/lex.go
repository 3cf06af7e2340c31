// Package jsonlex is a small allocation-conscious JSON scanner used on the
// hot decode paths (adapter chunks, scenario files). It validates as it goes
// and hands out raw value bytes, so callers decode only the keys they know.
package jsonlex

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// SyntaxError reports malformed JSON at a byte offset.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.Msg)
}

// ErrMaxDepth is returned when nesting exceeds MaxDepth.
var ErrMaxDepth = errors.New("json nesting too deep")

// MaxDepth bounds nesting so hostile input cannot exhaust the stack.
const MaxDepth = 1000

// Scanner walks a JSON document held in memory.
type Scanner struct {
	data []byte
	pos  int
}

// New returns a scanner over data.
func New(data []byte) *Scanner { return &Scanner{data: data} }

// Reset points the scanner at new data.
func (s *Scanner) Reset(data []byte) { s.data, s.pos = data, 0 }

// Pos is the current byte offset.
func (s *Scanner) Pos() int { return s.pos }

func (s *Scanner) errf(format string, args ...any) error {
	return &SyntaxError{Offset: s.pos, Msg: fmt.Sprintf(format, args...)}
}

// SkipSpace advances over JSON whitespace.
func (s *Scanner) SkipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// Peek returns the next non-space byte, or 0 at the end.
func (s *Scanner) Peek() byte {
	s.SkipSpace()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// AtEOF reports whether only whitespace remains.
func (s *Scanner) AtEOF() bool { return s.Peek() == 0 && s.pos >= len(s.data) }

// Expect consumes byte c (after whitespace).
func (s *Scanner) Expect(c byte) error {
	if s.Peek() != c {
		if s.pos >= len(s.data) {
			return s.errf("unexpected end of input, want %q", c)
		}
		return s.errf("unexpected %q, want %q", s.data[s.pos], c)
	}
	s.pos++
	return nil
}

// ObjectStart consumes '{'.
func (s *Scanner) ObjectStart() error { return s.Expect('{') }

// NextKey advances to the next key of an object whose '{' was consumed.
// first must be true on the first call. It returns ok=false at '}'.
// The key bytes are only valid until the next call when they needed unescaping.
func (s *Scanner) NextKey(first bool) (key []byte, ok bool, err error) {
	c := s.Peek()
	if c == '}' {
		s.pos++
		return nil, false, nil
	}
	if !first {
		if c != ',' {
			if c == 0 {
				return nil, false, s.errf("unexpected end of input in object")
			}
			return nil, false, s.errf("unexpected %q in object, want ',' or '}'", c)
		}
		s.pos++
		s.SkipSpace()
	}
	key, err = s.String(nil)
	if err != nil {
		return nil, false, err
	}
	if err := s.Expect(':'); err != nil {
		return nil, false, err
	}
	return key, true, nil
}

// ArrayStart consumes '['.
func (s *Scanner) ArrayStart() error { return s.Expect('[') }

// NextElem reports whether another array element follows (consuming ',').
func (s *Scanner) NextElem(first bool) (bool, error) {
	c := s.Peek()
	if c == ']' {
		s.pos++
		return false, nil
	}
	if !first {
		if c != ',' {
			if c == 0 {
				return false, s.errf("unexpected end of input in array")
			}
			return false, s.errf("unexpected %q in array, want ',' or ']'", c)
		}
		s.pos++
	}
	return true, nil
}

// IsNull consumes a null literal if one is next.
func (s *Scanner) IsNull() bool {
	if s.Peek() == 'n' && len(s.data)-s.pos >= 4 && string(s.data[s.pos:s.pos+4]) == "null" {
		s.pos += 4
		return true
	}
	return false
}

// String decodes a JSON string. When the string has no escapes the result
// aliases the input; otherwise it is appended to buf.
func (s *Scanner) String(buf []byte) ([]byte, error) {
	if s.Peek() != '"' {
		if s.pos >= len(s.data) {
			return nil, s.errf("unexpected end of input, want string")
		}
		return nil, s.errf("unexpected %q, want string", s.data[s.pos])
	}
	s.pos++
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if c == '"' {
			out := s.data[start:s.pos]
			s.pos++
			if !utf8.Valid(out) {
				return append(buf[:0], []byte(string([]rune(string(out))))...), nil
			}
			return out, nil
		}
		if c == '\\' {
			return s.stringSlow(append(buf[:0], s.data[start:s.pos]...))
		}
		if c < 0x20 {
			return nil, s.errf("control character in string")
		}
		s.pos++
	}
	return nil, s.errf("unterminated string")
}

func (s *Scanner) stringSlow(out []byte) ([]byte, error) {
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			if !utf8.Valid(out) {
				out = []byte(string([]rune(string(out))))
			}
			return out, nil
		case c == '\\':
			if s.pos+1 >= len(s.data) {
				return nil, s.errf("unterminated escape")
			}
			e := s.data[s.pos+1]
			s.pos += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, err := s.hex4()
				if err != nil {
					return nil, err
				}
				if utf16.IsSurrogate(r) {
					// A valid pair consumes the next escape; anything else
					// becomes U+FFFD and the next escape is read on its own,
					// as encoding/json does.
					pair := rune(-1)
					if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
						save := s.pos
						s.pos += 2
						if v, err := s.hex4(); err == nil {
							pair = v
						}
						s.pos = save
					}
					if d := utf16.DecodeRune(r, pair); d != utf8.RuneError {
						r = d
						s.pos += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				s.pos--
				return nil, s.errf("invalid escape \\%c", e)
			}
		case c < 0x20:
			return nil, s.errf("control character in string")
		default:
			out = append(out, c)
			s.pos++
		}
	}
	return nil, s.errf("unterminated string")
}

func (s *Scanner) hex4() (rune, error) {
	if len(s.data)-s.pos < 4 {
		return 0, s.errf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(s.data[s.pos:s.pos+4]), 16, 32)
	if err != nil {
		return 0, s.errf("invalid \\u escape")
	}
	s.pos += 4
	return rune(v), nil
}

// Number consumes a JSON number and returns its text.
func (s *Scanner) Number() ([]byte, error) {
	s.SkipSpace()
	start := s.pos
	if s.pos < len(s.data) && s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos >= len(s.data) {
		return nil, s.errf("unexpected end of input in number")
	}
	switch c := s.data[s.pos]; {
	case c == '0':
		s.pos++
	case c >= '1' && c <= '9':
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
		}
	default:
		return nil, s.errf("invalid number")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		d := s.pos
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
		}
		if d == s.pos {
			return nil, s.errf("invalid number")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		d := s.pos
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
		}
		if d == s.pos {
			return nil, s.errf("invalid number")
		}
	}
	return s.data[start:s.pos], nil
}

// Int consumes a number and converts it to int64 (fractions truncated).
func (s *Scanner) Int() (int64, error) {
	b, err := s.Number()
	if err != nil {
		return 0, err
	}
	if v, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		return v, nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, s.errf("number %s out of range", b)
	}
	return int64(f), nil
}

// Bool consumes true or false.
func (s *Scanner) Bool() (bool, error) {
	switch s.Peek() {
	case 't':
		if len(s.data)-s.pos >= 4 && string(s.data[s.pos:s.pos+4]) == "true" {
			s.pos += 4
			return true, nil
		}
	case 'f':
		if len(s.data)-s.pos >= 5 && string(s.data[s.pos:s.pos+5]) == "false" {
			s.pos += 5
			return false, nil
		}
	}
	return false, s.errf("want boolean")
}

// Raw consumes any value and returns its exact bytes (validated).
func (s *Scanner) Raw() ([]byte, error) {
	s.SkipSpace()
	start := s.pos
	if err := s.skip(0); err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

func (s *Scanner) skip(depth int) error {
	if depth > MaxDepth {
		return &SyntaxError{Offset: s.pos, Msg: ErrMaxDepth.Error()}
	}
	switch c := s.Peek(); c {
	case '{':
		s.pos++
		for first := true; ; first = false {
			_, ok, err := s.NextKey(first)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
		}
	case '[':
		s.pos++
		for first := true; ; first = false {
			ok, err := s.NextElem(first)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
		}
	case '"':
		_, err := s.skipString()
		return err
	case 't', 'f':
		_, err := s.Bool()
		return err
	case 'n':
		if s.IsNull() {
			return nil
		}
		return s.errf("invalid literal")
	case 0:
		return s.errf("unexpected end of input, want value")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			_, err := s.Number()
			return err
		}
		return s.errf("unexpected %q, want value", c)
	}
}

// skipString validates a string without building it.
func (s *Scanner) skipString() (bool, error) {
	s.pos++ // opening quote
	escaped := false
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return escaped, nil
		case c == '\\':
			if s.pos+1 >= len(s.data) {
				return false, s.errf("unterminated escape")
			}
			switch s.data[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case 'u':
				s.pos += 2
				if _, err := s.hex4(); err != nil {
					return false, err
				}
			default:
				return false, s.errf("invalid escape")
			}
			escaped = true
		case c < 0x20:
			return false, s.errf("control character in string")
		default:
			s.pos++
		}
	}
	return false, s.errf("unterminated string")
}
