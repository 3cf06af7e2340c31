package sandbox

import (
	"context"
	"log/slog"

	"github.com/goai-sdk/goai/chat"
)

// runLogHandler routes the sandbox's slog records to a chat run's debug
// logger, by level: debug records to the "sandbox" category (off by
// default), warn records to the engine's warnings and error records to the
// "errors" category (both gated by errors, on by default). Every record is
// also passed to next, the Definition's own logger, when there is one.
type runLogHandler struct {
	lg    *chat.Logger
	next  slog.Handler // nil when the Definition has no logger
	attrs []slog.Attr
}

// newRunLogger returns the logger WithSandbox uses for one run.
func newRunLogger(lg *chat.Logger, def *slog.Logger) *slog.Logger {
	h := &runLogHandler{lg: lg}
	if def != nil {
		h.next = def.Handler()
	}
	return slog.New(h)
}

func (h *runLogHandler) category(l slog.Level) string {
	if l >= slog.LevelWarn {
		return chat.CatErrors
	}
	return chat.CatSandbox
}

func (h *runLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.lg.Enabled(h.category(l)) || (h.next != nil && h.next.Enabled(ctx, l))
}

func (h *runLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if cat := h.category(r.Level); h.lg.Enabled(cat) {
		attrs := make([]slog.Attr, 0, len(h.attrs)+r.NumAttrs())
		keep := func(a slog.Attr) bool {
			if a.Key != "category" { // the engine logger sets its own
				attrs = append(attrs, a)
			}
			return true
		}
		for _, a := range h.attrs {
			keep(a)
		}
		r.Attrs(keep)
		switch {
		case r.Level >= slog.LevelError:
			h.lg.Log(chat.CatErrors, r.Message, attrs...)
		case r.Level >= slog.LevelWarn:
			h.lg.Warn(r.Message, attrs...)
		default:
			h.lg.Log(chat.CatSandbox, r.Message, attrs...)
		}
	}
	if h.next != nil && h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *runLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	if h.next != nil {
		c.next = h.next.WithAttrs(attrs)
	}
	return &c
}

func (h *runLogHandler) WithGroup(name string) slog.Handler {
	c := *h
	if h.next != nil {
		c.next = h.next.WithGroup(name)
	}
	return &c
}
