package durable

import (
	"encoding/base64"
	"encoding/binary"
	"hash/fnv"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The offset codec shared by this module's backends. An offset is
// "<tag>:<seq>", seq counting from 1 per run, and tag eight base64url
// characters that name the log: 48 bits of a hash of the backend's scheme
// and the run id (logTag). The tag lets a backend reject an offset minted
// for another run or by another kind of backend, and keeps the offset free
// of white space, NUL, CR and LF and of the ':' separator. Callers outside
// a backend must treat offsets as opaque.
//
// Offsets were "<scheme>:v1:<query-escaped run id>:<seq>" before
// (docs/durable.md §1.3): ParseOffset still reads those, so that a client
// holding one resumes across an upgrade. Every event on the wire carries
// its offset, and that form put the run id in each: about a quarter of an
// unpaced token's bytes.

// offsetTagLen is the length of a log's tag.
const offsetTagLen = 8

// logTag returns the tag of runID's log in a backend identified by scheme:
// the top 48 bits of the 64-bit FNV-1a hash of scheme, a NUL and runID, in
// base64url. It is no secret and guards nothing: a reader of a run may
// read all of it, so a tag that two runs share by chance (one pair in
// 2^48) only lets a client's wrong offset through as a position in the
// right run.
func logTag(scheme, runID string) string {
	h := fnv.New64a()
	h.Write([]byte(scheme))
	h.Write([]byte{0})
	h.Write([]byte(runID))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h.Sum64())
	return base64.RawURLEncoding.EncodeToString(b[:6])
}

// FormatOffset mints the offset of entry seq (from 1) of runID's log in a
// backend identified by scheme (for example "sqlite").
func FormatOffset(scheme, runID string, seq int64) string {
	return NewOffsetMinter(scheme, runID).Offset(seq)
}

// OffsetMinter mints the offsets of one run's log: FormatOffset with the
// log's tag computed once, for a reader that mints one per entry.
type OffsetMinter struct {
	prefix string // "<tag>:"
}

// NewOffsetMinter returns the minter of runID's offsets in scheme.
func NewOffsetMinter(scheme, runID string) OffsetMinter {
	return OffsetMinter{prefix: logTag(scheme, runID) + ":"}
}

// Offset returns FormatOffset(scheme, runID, seq).
func (m OffsetMinter) Offset(seq int64) string {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], seq, 10)
	var b strings.Builder
	b.Grow(len(m.prefix) + len(d))
	b.WriteString(m.prefix)
	b.Write(d)
	return b.String()
}

// AppendEntries appends to dst an entry for each element of data, the
// first at seq first, with the offsets Offset mints. The offsets are minted
// into one string that the entries share: one allocation for the batch,
// not one per entry, on the path every appended event takes.
func (m OffsetMinter) AppendEntries(dst []Entry, first int64, data [][]byte) []Entry {
	if len(data) == 0 {
		return dst
	}
	last := first + int64(len(data)) - 1
	// Seqs are consecutive: the digits are counted up in place, not
	// formatted anew for each entry; a second count finds where each
	// offset ends.
	var digitBuf [20]byte
	var b strings.Builder
	b.Grow(len(data) * (len(m.prefix) + decimalLen(last)))
	digits := strconv.AppendInt(digitBuf[:0], first, 10)
	for range data {
		b.WriteString(m.prefix)
		b.Write(digits)
		digits = decimalIncrement(digits)
	}
	all := b.String()
	dst = slices.Grow(dst, len(data))
	digits = strconv.AppendInt(digitBuf[:0], first, 10)
	at := 0
	for _, d := range data {
		n := len(m.prefix) + len(digits)
		dst = append(dst, Entry{Offset: all[at : at+n], Data: d})
		at += n
		digits = decimalIncrement(digits)
	}
	return dst
}

// decimalIncrement adds one to the non-negative decimal number d, in
// place when it keeps its length.
func decimalIncrement(d []byte) []byte {
	for i := len(d) - 1; i >= 0; i-- {
		if d[i] != '9' {
			d[i]++
			return d
		}
		d[i] = '0'
	}
	// All nines: one more digit.
	d = append(d, '0')
	d[0] = '1'
	return d
}

// decimalLen returns the length of n in decimal.
func decimalLen(n int64) int {
	if n < 0 {
		var digits [20]byte
		return len(strconv.AppendInt(digits[:0], n, 10))
	}
	l := 1
	for n >= 10 {
		n /= 10
		l++
	}
	return l
}

// ParseOffset decodes a concrete (non-sentinel) offset minted by
// FormatOffset for scheme and runID, or in the earlier form, and returns
// its seq. Any other string yields an *OffsetError naming the offset.
func ParseOffset(scheme, runID, off string) (int64, error) {
	bad := func(reason string) (int64, error) {
		return 0, &OffsetError{RunID: runID, Offset: off, Reason: reason}
	}
	if !ValidOffset(off) {
		return bad("malformed")
	}
	var seqText string
	if rest, ok := strings.CutPrefix(off, scheme+":v1:"); ok {
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			return bad("malformed")
		}
		run, err := url.QueryUnescape(rest[:i])
		if err != nil {
			return bad("malformed run id")
		}
		if run != runID {
			return bad("minted for another run")
		}
		seqText = rest[i+1:]
	} else {
		tag, rest, ok := strings.Cut(off, ":")
		if !ok || len(tag) != offsetTagLen {
			return bad("not minted by this " + scheme + " log")
		}
		if tag != logTag(scheme, runID) {
			return bad("minted for another run or by another kind of store")
		}
		seqText = rest
	}
	if seqText == "" || seqText[0] < '1' || seqText[0] > '9' {
		return bad("malformed sequence")
	}
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || seq < 1 {
		return bad("malformed sequence")
	}
	return seq, nil
}

// FutureOffsetError is the error for an offset past the tail of runID's log.
func FutureOffsetError(runID, off string) error {
	return &OffsetError{RunID: runID, Offset: off, Reason: "past the tail of the log"}
}

// PlanUpsert validates an Upsert batch against a log of tail entries (see
// Upserter) and returns the seq of each entry. It rejects offsets not minted
// for runID by scheme, repeats within the batch, and offsets past the tail
// that do not continue it without holes.
func PlanUpsert(scheme, runID string, tail int64, entries []Entry) ([]int64, error) {
	seqs := make([]int64, len(entries))
	seen := make(map[int64]bool, len(entries))
	next := tail + 1
	for i, e := range entries {
		seq, err := ParseOffset(scheme, runID, e.Offset)
		if err != nil {
			return nil, err
		}
		if seen[seq] {
			return nil, &OffsetError{RunID: runID, Offset: e.Offset, Reason: "repeated within the batch"}
		}
		seen[seq] = true
		if seq > tail {
			if seq != next {
				return nil, &OffsetError{RunID: runID, Offset: e.Offset, Reason: "leaves a hole after the tail"}
			}
			next++
		}
		seqs[i] = seq
	}
	return seqs, nil
}

// FormatOffsets returns the offsets of n consecutive entries starting at
// sequence number first.
func FormatOffsets(scheme, runID string, first, n int64) []string {
	mint := NewOffsetMinter(scheme, runID)
	out := make([]string, n)
	for i := range out {
		out[i] = mint.Offset(first + int64(i))
	}
	return out
}
