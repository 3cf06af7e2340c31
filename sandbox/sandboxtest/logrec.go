package sandboxtest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Record is one captured log record.
type Record struct {
	Level    slog.Level
	Message  string
	Category string
	Attrs    map[string]string
}

// LogRecorder is a slog.Handler that keeps every record (all levels).
type LogRecorder struct {
	mu   sync.Mutex
	recs []Record
}

type attrHandler struct {
	r     *LogRecorder
	attrs []slog.Attr
}

func (h attrHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h attrHandler) Handle(ctx context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(h.attrs...)
	return h.r.Handle(ctx, rec)
}
func (h attrHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return attrHandler{h.r, append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}
func (h attrHandler) WithGroup(string) slog.Handler { return h }

// NewLogger returns a logger writing into a new recorder.
func NewLogger() (*slog.Logger, *LogRecorder) {
	r := &LogRecorder{}
	return slog.New(r), r
}

func (r *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *LogRecorder) Handle(_ context.Context, rec slog.Record) error {
	out := Record{Level: rec.Level, Message: rec.Message, Attrs: map[string]string{}}
	add := func(a slog.Attr) bool {
		v := a.Value.Resolve()
		out.Attrs[a.Key] = fmt.Sprint(v.Any())
		if a.Key == "category" {
			out.Category = v.String()
		}
		return true
	}
	rec.Attrs(add)
	r.mu.Lock()
	r.recs = append(r.recs, out)
	r.mu.Unlock()
	return nil
}

func (r *LogRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return attrHandler{r, attrs}
}

func (r *LogRecorder) WithGroup(string) slog.Handler { return r }

// Records returns a copy of the records.
func (r *LogRecorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.recs...)
}

// Find returns the records at level whose message contains substr.
func (r *LogRecorder) Find(level slog.Level, substr string) []Record {
	var out []Record
	for _, rec := range r.Records() {
		if rec.Level == level && strings.Contains(rec.Message, substr) {
			out = append(out, rec)
		}
	}
	return out
}

// Count returns the number of records at level or above.
func (r *LogRecorder) Count(min slog.Level) int {
	n := 0
	for _, rec := range r.Records() {
		if rec.Level >= min {
			n++
		}
	}
	return n
}
