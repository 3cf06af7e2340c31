// Package conformance holds the differential conformance harness that
// compares goai's wire output with the reference implementation (TanStack AI
// 0.58.0, run by conformance/reference/runner.mjs).
//
// Both sides' streams are passed through Normalize, which turns an SSE or
// NDJSON byte stream into one canonical JSON text per event, so the two can be
// compared line by line with Diff.
//
// # Normalization rules
//
//  1. Frames. SSE: `data:` lines (one optional space after the colon is
//     stripped, several data lines of one frame are joined with "\n") are
//     dispatched at a blank line; `id:`, `event:`, `retry:` and `:` comment
//     lines are ignored; CRLF is accepted. A frame left open at the end of the
//     stream is an error (the reference client raises StreamTruncatedError).
//     NDJSON: one JSON value per non-empty line; a durable-mode wrapper
//     `{"id":…,"chunk":{…}}` is unwrapped to its chunk.
//  2. Clock values. Every object key named "timestamp" or "createdAt" is
//     dropped at any depth (the engine stamps events with Date.now() and
//     MESSAGES_SNAPSHOT rows with metadata.tanstack.createdAt); an object that
//     becomes empty only through such drops is removed as well, so a row whose
//     metadata held nothing but createdAt compares equal to one without
//     metadata. Objects that were empty to begin with are kept.
//  3. Generated ids. Every occurrence of GeneratedIDPattern inside any string
//     (object keys included) is replaced by a placeholder `<id1>`, `<id2>`, …
//     numbered by order of first appearance, walking events in stream order,
//     object keys in sorted order and arrays in order. Equal ids get equal
//     placeholders across the whole stream, so relations survive
//     (`snapshot_chat-1764…-x1y2z3_0` becomes `snapshot_<id1>_0` when the
//     binding's interruptedRunId `chat-1764…-x1y2z3` is `<id1>`). Ids the
//     scenario supplies (`run-1`, `thread-conf`, `msg_a1`, `call_1`) never
//     match the pattern and are compared literally. This rule is deterministic
//     on both sides provided goai mints its ids in the reference's shape
//     `<prefix>-<unix ms>-<base36>` with the prefixes below; if it does not,
//     extend GeneratedIDPattern (or use Options.IDKeys).
//  4. Canonical form. Keys are sorted, no insignificant whitespace, no HTML
//     escaping, numbers keep their literal text.
package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// GeneratedIDPattern matches ids the engines mint themselves: TanStack's
// createId (`chat-`, `stream-`, `thread-`, `msg-`, `interrupt-`),
// generateMessageId (`msg-`), the structured-output fallback (`fallback-`) and
// the client's run ids (`run-`), all `<prefix>-<unix ms>-<base36 random>`.
// Group 1 is the id; the leading group keeps it from matching inside a longer
// word (an underscore is allowed before it, as in `snapshot_<runId>_<i>`).
var GeneratedIDPattern = regexp.MustCompile(`(?:^|[^A-Za-z0-9])((?:msg|chat|run|thread|stream|interrupt|fallback)-[0-9]{10,}-[A-Za-z0-9]+)`)

// droppedKeys are removed at any depth before comparison.
var droppedKeys = map[string]bool{"timestamp": true, "createdAt": true}

// Options tunes Normalize. The zero value is the documented default.
type Options struct {
	// IDKeys, when set, also replaces the whole string value of any object key
	// in this set by a placeholder, whatever its shape (e.g. runId, threadId,
	// messageId, parentMessageId, toolCallId, id). Use it when the two sides
	// mint ids in different shapes. It hides a wrong id that appears only
	// once, so the default leaves it empty.
	IDKeys map[string]bool
}

// Normalize parses stream ("sse" or "ndjson") and returns its canonical form:
// one canonical JSON text per event, each followed by "\n".
func Normalize(stream []byte, format string) ([]byte, error) {
	return NormalizeWith(stream, format, Options{})
}

// NormalizeWith is Normalize with options.
func NormalizeWith(stream []byte, format string, opts Options) ([]byte, error) {
	lines, err := NormalizeLines(stream, format, opts)
	if err != nil {
		return nil, err
	}
	return joinLines(lines), nil
}

// NormalizeLines returns the canonical JSON text of every event.
func NormalizeLines(stream []byte, format string, opts Options) ([]string, error) {
	var raw [][]byte
	var err error
	switch format {
	case "sse":
		raw, err = sseFrames(stream)
	case "ndjson":
		raw, err = ndjsonLines(stream)
	default:
		return nil, fmt.Errorf("conformance: unknown format %q (want sse or ndjson)", format)
	}
	if err != nil {
		return nil, err
	}
	values := make([]any, 0, len(raw))
	for i, r := range raw {
		v, err := decode(r)
		if err != nil {
			return nil, fmt.Errorf("conformance: event %d: %w", i, err)
		}
		if format == "ndjson" {
			v = unwrapDurable(v)
		}
		values = append(values, v)
	}
	return canonicalize(values, opts)
}

// NormalizeJSONArray canonicalizes a JSON array (for example the runner's
// `HOOKS:` line) with the same rules, one element per line.
func NormalizeJSONArray(data []byte, opts Options) ([]byte, error) {
	v, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("conformance: want a JSON array, got %T", v)
	}
	lines, err := canonicalize(arr, opts)
	if err != nil {
		return nil, err
	}
	return joinLines(lines), nil
}

func canonicalize(values []any, opts Options) ([]string, error) {
	ids := &idMap{seen: map[string]string{}}
	out := make([]string, 0, len(values))
	for _, v := range values {
		v = rewrite(v, "", ids, opts)
		s, err := encode(v)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// sseFrames splits an SSE byte stream into the data payload of each frame.
func sseFrames(stream []byte) ([][]byte, error) {
	var frames [][]byte
	var data []string
	open := false
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			if len(data) > 0 {
				frames = append(frames, []byte(strings.Join(data, "\n")))
			}
			data = data[:0]
			open = false
			continue
		}
		open = true
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			data = append(data, value)
		case "id", "event", "retry":
			// Transport details, not part of the event.
		default:
			return nil, fmt.Errorf("conformance: unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if open {
		return nil, fmt.Errorf("conformance: SSE stream ends inside an unterminated frame")
	}
	return frames, nil
}

func ndjsonLines(stream []byte) ([][]byte, error) {
	var out [][]byte
	for _, line := range bytes.Split(stream, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			out = append(out, line)
		}
	}
	return out, nil
}

func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON %q: %w", truncate(string(data), 120), err)
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value %q", truncate(string(data), 120))
	}
	return v, nil
}

func unwrapDurable(v any) any {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 2 {
		return v
	}
	if _, hasID := m["id"]; !hasID {
		return v
	}
	if chunk, ok := m["chunk"].(map[string]any); ok {
		return chunk
	}
	return v
}

type idMap struct {
	seen map[string]string
}

func (m *idMap) placeholder(id string) string {
	if p, ok := m.seen[id]; ok {
		return p
	}
	p := "<id" + strconv.Itoa(len(m.seen)+1) + ">"
	m.seen[id] = p
	return p
}

// replaceGenerated replaces every generated id inside s.
func (m *idMap) replaceGenerated(s string) string {
	locs := GeneratedIDPattern.FindAllStringSubmatchIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range locs {
		start, end := loc[2], loc[3]
		b.WriteString(s[last:start])
		b.WriteString(m.placeholder(s[start:end]))
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}

// rewrite drops clock keys and replaces ids, visiting keys in sorted order so
// that placeholder numbering does not depend on the producer's key order. An
// object left empty only because its clock keys were dropped is removed too
// (so `metadata:{tanstack:{createdAt}}` disappears entirely).
func rewrite(v any, key string, ids *idMap, opts Options) any {
	out, _ := rewriteValue(v, key, ids, opts)
	return out
}

// rewriteValue reports whether v was a non-empty object that is now empty
// because of dropped keys.
func rewriteValue(v any, key string, ids *idMap, opts Options) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			if !droppedKeys[k] {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		out := make(map[string]any, len(keys))
		for _, k := range keys {
			nv, emptied := rewriteValue(t[k], k, ids, opts)
			if emptied {
				continue
			}
			out[ids.replaceGenerated(k)] = nv
		}
		return out, len(t) > 0 && len(out) == 0
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = rewrite(e, key, ids, opts)
		}
		return out, false
	case string:
		if opts.IDKeys[key] {
			return ids.placeholder(t), false
		}
		return ids.replaceGenerated(t), false
	default:
		return v, false
	}
}

func encode(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Diff compares two normalized streams line by line and returns a readable
// unified-style diff ("-" lines only in a, "+" lines only in b, two lines of
// context, "@@ a:<line> b:<line> @@" hunk headers, 1-based). It returns "" when
// the streams are equal.
func Diff(a, b []byte) string {
	al := splitLines(a)
	bl := splitLines(b)
	ops := diffOps(al, bl)
	changed := false
	for _, op := range ops {
		if op.kind != ' ' {
			changed = true
			break
		}
	}
	if !changed {
		return ""
	}
	const context = 2
	show := make([]bool, len(ops))
	for i, op := range ops {
		if op.kind == ' ' {
			continue
		}
		for j := max(0, i-context); j <= min(len(ops)-1, i+context); j++ {
			show[j] = true
		}
	}
	var sb strings.Builder
	for i := 0; i < len(ops); i++ {
		if !show[i] {
			continue
		}
		if i == 0 || !show[i-1] {
			fmt.Fprintf(&sb, "@@ a:%d b:%d @@\n", ops[i].ai+1, ops[i].bi+1)
		}
		sb.WriteByte(ops[i].kind)
		sb.WriteByte(' ')
		sb.WriteString(ops[i].text)
		sb.WriteByte('\n')
	}
	return sb.String()
}

type diffOp struct {
	kind   byte // ' ', '-', '+'
	text   string
	ai, bi int // position in a and b when this op is reached
}

// diffOps computes a minimal line edit script with an LCS table (streams are
// small: a few hundred events at most).
func diffOps(a, b []string) []diffOp {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i], i, j})
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] > lcs[i+1][j]):
			ops = append(ops, diffOp{'+', b[j], i, j})
			j++
		default:
			ops = append(ops, diffOp{'-', a[i], i, j})
			i++
		}
	}
	return ops
}

func splitLines(s []byte) []string {
	t := strings.TrimSuffix(string(s), "\n")
	if t == "" {
		return nil
	}
	return strings.Split(t, "\n")
}

// joinLines is lines, each followed by "\n".
func joinLines(lines []string) []byte {
	var buf bytes.Buffer
	for _, l := range lines {
		buf.WriteString(l)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}
