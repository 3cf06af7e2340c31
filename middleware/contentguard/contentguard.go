// Package contentguard is a chat middleware that filters or rewrites
// streamed assistant text (TanStack AI's contentGuardMiddleware, docs/engine.md
// §9): redact secrets, mask PII, or drop output that matches.
//
// Rules run in order on TEXT_MESSAGE_CONTENT; each sees the previous one's
// output. Two strategies:
//
//   - Delta rewrites each delta on its own: cheap and immediate, but a match
//     split across two deltas is missed.
//   - Buffered (the default) re-applies the rules to all the text of the
//     message so far and emits only the settled prefix, holding back the
//     last BufferSize characters so a match that spans deltas is caught. The
//     held text is flushed at TEXT_MESSAGE_END, RUN_FINISHED, or when a delta
//     of another message arrives. Re-applying the rules costs time linear in
//     the message length per delta.
//
// The guard only changes what the consumer sees: the engine records
// history and tool calls from the unfiltered stream (docs/engine.md §3).
//
// Emitted deltas match @tanstack/ai 0.58.0 exactly for the same rules and
// input, including its lengths in UTF-16 code units, with one exception:
// a cut never splits a character outside the Basic Multilingual Plane
// (0.58.0 can emit half a surrogate pair); such a character is held back
// until the next delta or the flush instead.
package contentguard

import (
	"regexp"
	"strings"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// Strategy selects how rules are applied.
type Strategy string

const (
	// Buffered applies rules to the accumulated message text (default).
	Buffered Strategy = "buffered"
	// Delta applies rules to each delta independently.
	Delta Strategy = "delta"
)

// DefaultBufferSize is how many characters Buffered holds back by default.
const DefaultBufferSize = 50

// Rule rewrites text: Pattern's matches are all replaced by Replacement
// (regexp.Expand syntax: $1, ${name}), or, when Pattern is nil, Func
// returns the new text.
type Rule struct {
	Pattern     *regexp.Regexp
	Replacement string
	Func        func(text string) string
}

func (r Rule) apply(s string) string {
	switch {
	case r.Pattern != nil:
		return r.Pattern.ReplaceAllString(s, r.Replacement)
	case r.Func != nil:
		return r.Func(s)
	}
	return s
}

// FilteredInfo describes text a rule changed.
type FilteredInfo struct {
	MessageID string
	Original  string // the delta (Delta) or the message text so far (Buffered)
	Filtered  string // Original after the rules
	Strategy  Strategy
}

// Options configure the guard.
type Options struct {
	Rules []Rule
	// Strategy defaults to Buffered.
	Strategy Strategy
	// BufferSize is how many characters (UTF-16 code units, as in the
	// reference) Buffered holds back; make it at least the longest text a
	// rule can match, or the start of a match may be emitted before the
	// match completes. 0 means DefaultBufferSize, a negative value holds
	// nothing back.
	BufferSize int
	// BlockOnMatch drops changed output instead of emitting the rewrite:
	// Delta drops the delta; Buffered stops emitting the message once its
	// text so far matches and drops the rest at the flush.
	BlockOnMatch bool
	// OnFiltered is told about every change (it cannot alter the output).
	OnFiltered func(c *chat.Context, info FilteredInfo)
}

// Name is the middleware's name.
const Name = "content-guard"

// New returns the content guard middleware. It may serve many runs at
// once; the buffered state is per run.
func New(opts Options) *chat.Middleware {
	g := &guard{rules: opts.Rules, block: opts.BlockOnMatch, notify: opts.OnFiltered, buffer: opts.BufferSize}
	if g.buffer == 0 {
		g.buffer = DefaultBufferSize
	} else if g.buffer < 0 {
		g.buffer = 0
	}
	if opts.Strategy == Delta {
		return &chat.Middleware{Name: Name, OnChunk: g.delta, ChunkTypes: []agui.EventType{agui.TextMessageContent}}
	}
	// The per-run buffer lives in the run's capability store under a key
	// private to this middleware value.
	g.state = chat.NewCapability[*buffer]("content-guard-buffer")
	return &chat.Middleware{
		Name:    Name,
		Setup:   func(c *chat.Context) error { g.state.Provide(c, &buffer{}); return nil },
		OnChunk: g.buffered,
		// What it buffers, and what flushes the buffer.
		ChunkTypes: []agui.EventType{agui.TextMessageContent, agui.TextMessageEnd, agui.RunFinished},
	}
}

type guard struct {
	rules  []Rule
	block  bool
	notify func(*chat.Context, FilteredInfo)
	buffer int
	state  *chat.Capability[*buffer]
}

func (g *guard) apply(s string) string {
	for _, r := range g.rules {
		s = r.apply(s)
	}
	return s
}

func (g *guard) filtered(c *chat.Context, id, original, filtered string, s Strategy) {
	if g.notify != nil {
		g.notify(c, FilteredInfo{MessageID: id, Original: original, Filtered: filtered, Strategy: s})
	}
}

func (g *guard) delta(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
	if ev.Type != agui.TextMessageContent {
		return chat.Pass, nil
	}
	out := ev.Delta
	for _, r := range g.rules {
		if r.Pattern != nil && !r.Pattern.MatchString(out) {
			continue // a delta is short: matching first saves the copy
		}
		out = r.apply(out)
	}
	if out == ev.Delta {
		return chat.Pass, nil
	}
	g.filtered(c, ev.MessageID, ev.Delta, out, Delta)
	if g.block {
		return chat.Drop(), nil
	}
	rewritten := *ev
	rewritten.Delta = out
	rewritten.Content = ""
	return chat.Replace(rewritten), nil
}

// buffer is one run's buffered-strategy state.
type buffer struct {
	raw     strings.Builder // the message's unfiltered text so far
	emitted int             // UTF-16 units of the filtered text already emitted
	msgID   string
}

func (b *buffer) reset() {
	b.raw.Reset()
	b.emitted = 0
	b.msgID = ""
}

func (g *guard) buffered(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
	b, ok := g.state.GetOptional(c)
	if !ok {
		return chat.Pass, nil
	}
	switch ev.Type {
	case agui.TextMessageEnd, agui.RunFinished:
		if f, ok := g.flush(c, b); ok {
			return chat.Replace(f, *ev), nil
		}
		return chat.Pass, nil
	case agui.TextMessageContent:
	default:
		return chat.Pass, nil
	}
	var pending []agui.Event
	if b.msgID != "" && ev.MessageID != b.msgID {
		if f, ok := g.flush(c, b); ok {
			pending = append(pending, f)
		}
	}
	b.raw.WriteString(ev.Delta)
	b.msgID = ev.MessageID
	raw := b.raw.String() // no copy: a Builder never rewrites what it returned
	out := g.apply(raw)
	safe := max(0, utf16Len(out)-g.buffer)
	if safe <= b.emitted {
		return held(pending), nil
	}
	if g.block && out != raw {
		g.filtered(c, ev.MessageID, raw, out, Buffered)
		return held(pending), nil
	}
	from, _ := cut(out, b.emitted)
	to, units := cut(out, safe)
	if to <= from {
		return held(pending), nil
	}
	if out != raw {
		g.filtered(c, ev.MessageID, raw, out, Buffered)
	}
	b.emitted = units
	emit := *ev
	emit.Delta = out[from:to]
	emit.Content = out[:to]
	return chat.Replace(append(pending, emit)...), nil
}

// held is the result when the current delta emits nothing.
func held(pending []agui.Event) chat.ChunkAction {
	if len(pending) > 0 {
		return chat.Replace(pending...)
	}
	return chat.Drop()
}

// flush emits what the buffer still holds and resets it.
func (g *guard) flush(c *chat.Context, b *buffer) (agui.Event, bool) {
	if b.raw.Len() == 0 {
		return agui.Event{}, false
	}
	defer b.reset()
	raw := b.raw.String()
	out := g.apply(raw)
	if g.block && out != raw {
		g.filtered(c, b.msgID, raw, out, Buffered)
		return agui.Event{}, false
	}
	from, _ := cut(out, b.emitted)
	if from >= len(out) {
		return agui.Event{}, false
	}
	if out != raw {
		g.filtered(c, b.msgID, raw, out, Buffered)
	}
	return agui.Event{Type: agui.TextMessageContent, MessageID: b.msgID, Delta: out[from:], Content: out,
		Timestamp: time.Now().UnixMilli()}, true
}

// utf16Len is the length of s in UTF-16 code units (JavaScript's length).
func utf16Len(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			n = i
			for _, r := range s[i:] {
				n++
				if r >= 0x10000 {
					n++
				}
			}
			return n
		}
	}
	return n
}

// cut returns the byte offset just after the first n UTF-16 code units of
// s, and how many units precede it: n, or n-1 when n falls inside a
// surrogate pair (the character is not split).
func cut(s string, n int) (int, int) {
	u := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if u+w > n {
			return i, u
		}
		u += w
	}
	return len(s), u
}
