package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// MaxLine bounds one SSE data payload or NDJSON line (32 MiB, as the
// OpenAI SDK allows). The buffers grow lazily up to it.
const MaxLine = 32 << 20

// ErrLineTooLong is returned for a line longer than MaxLine.
var ErrLineTooLong = errors.New("stream line exceeds 32 MiB")

// LineReader reads lines without allocating in the steady state.
type LineReader struct {
	r   *bufio.Reader
	buf []byte
}

// NewLineReader wraps r.
func NewLineReader(r *bufio.Reader) *LineReader { return &LineReader{r: r} }

// Next returns the next line without its line ending. The slice is valid
// until the next call. At the end it returns io.EOF (after a last line
// without a newline, if any).
func (l *LineReader) Next() ([]byte, error) {
	line, err := l.r.ReadSlice('\n')
	if err == nil {
		return trimEOL(line), nil
	}
	if err == bufio.ErrBufferFull {
		l.buf = append(l.buf[:0], line...)
		for {
			line, err = l.r.ReadSlice('\n')
			if len(l.buf)+len(line) > MaxLine {
				return nil, ErrLineTooLong
			}
			l.buf = append(l.buf, line...)
			if err == nil {
				return trimEOL(l.buf), nil
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		line = l.buf
	}
	if err == io.EOF && len(line) > 0 {
		return trimEOL(line), nil
	}
	return nil, err
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// SSEReader parses a text/event-stream.
type SSEReader struct {
	lines *LineReader
	event []byte
	data  []byte
	has   bool
}

// NewSSEReader wraps r.
func NewSSEReader(r *bufio.Reader) *SSEReader { return &SSEReader{lines: NewLineReader(r)} }

// Next returns the next event's name ("" if none was given) and its data
// (multi-line data joined by "\n"). Both are valid until the next call.
// Events without data are skipped. It returns io.EOF at the end.
func (s *SSEReader) Next() (event, data []byte, err error) {
	s.event, s.data, s.has = s.event[:0], s.data[:0], false
	for {
		line, err := s.lines.Next()
		if err != nil {
			if err == io.EOF && s.has {
				return s.event, s.data, nil
			}
			return nil, nil, err
		}
		if len(line) == 0 {
			if s.has {
				return s.event, s.data, nil
			}
			s.event = s.event[:0]
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if s.has {
				s.data = append(s.data, '\n')
			}
			if len(s.data)+len(value) > MaxLine {
				return nil, nil, ErrLineTooLong
			}
			s.data = append(s.data, value...)
			s.has = true
		case "event":
			s.event = append(s.event[:0], value...)
		}
	}
}

// NotEOF returns err unless it is io.EOF (a clean end of stream).
func NotEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
