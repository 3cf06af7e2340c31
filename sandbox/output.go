package sandbox

import "unicode/utf8"

// DefaultMaxOutputBytes is how much of each output stream Exec buffers when
// neither ExecOptions nor the provider sets a cap: 1 MiB.
const DefaultMaxOutputBytes = 1 << 20

// UnlimitedOutput as ExecOptions.MaxOutputBytes buffers everything. Only
// for commands whose output size is known to be bounded (the watcher's
// find poll, git plumbing whose output is parsed).
const UnlimitedOutput = -1

// OutputLimit resolves the cap of one Exec: the call's, else the
// provider's, else DefaultMaxOutputBytes. A negative result means no cap.
func OutputLimit(call, provider int64) int64 {
	switch {
	case call != 0:
		return call
	case provider != 0:
		return provider
	}
	return DefaultMaxOutputBytes
}

// CappedBuffer keeps the first Max bytes written to it and counts the rest,
// so a command that prints without end cannot exhaust memory: writes never
// fail and never block. A negative Max keeps everything. Providers use it
// for Exec.
type CappedBuffer struct {
	Max     int64
	buf     []byte
	dropped int64
}

// Write keeps what fits under the cap and discards the rest.
func (b *CappedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if b.Max >= 0 {
		room := b.Max - int64(len(b.buf))
		if room < int64(len(p)) {
			if room < 0 {
				room = 0
			}
			b.dropped += int64(len(p)) - room
			p = p[:room]
		}
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

// Truncated reports whether anything was discarded.
func (b *CappedBuffer) Truncated() bool { return b.dropped > 0 }

// Dropped is the number of bytes discarded.
func (b *CappedBuffer) Dropped() int64 { return b.dropped }

// String returns what was kept. When the cap cut a UTF-8 sequence in two,
// the partial sequence at the end is left out.
func (b *CappedBuffer) String() string {
	out := b.buf
	if b.dropped > 0 {
		for i := 1; i < utf8.UTFMax && i <= len(out); i++ {
			r := out[len(out)-i]
			if !utf8.RuneStart(r) {
				continue
			}
			if !utf8.FullRune(out[len(out)-i:]) {
				out = out[:len(out)-i]
			}
			break
		}
	}
	return string(out)
}
