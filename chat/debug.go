package chat

import (
	"context"
	"log/slog"
)

// Debug categories (docs/engine.md §10).
const (
	CatRequest    = "request"
	CatProvider   = "provider"
	CatOutput     = "output"
	CatMiddleware = "middleware"
	CatTools      = "tools"
	CatAgentLoop  = "agentLoop"
	CatConfig     = "config"
	CatErrors     = "errors"
	CatSandbox    = "sandbox"
)

// Debug selects what the engine logs. The zero value logs only errors.
// Use DebugAll, DebugNone, or set Categories: a category missing from a
// non-nil map is on.
type Debug struct {
	// All turns every category on; None turns every category off,
	// errors included. Both false with nil Categories means errors only.
	All, None  bool
	Categories map[string]bool
	// Logger receives the lines; default slog.Default().
	Logger *slog.Logger
}

// DebugAll logs every category.
func DebugAll(l *slog.Logger) *Debug { return &Debug{All: true, Logger: l} }

// DebugNone logs nothing.
func DebugNone() *Debug { return &Debug{None: true} }

// Logger writes engine debug lines by category. A nil *Logger logs nothing.
type Logger struct {
	l  *slog.Logger
	on uint16 // a bit per category of allCategories that logs
}

var allCategories = []string{CatRequest, CatProvider, CatOutput, CatMiddleware, CatTools, CatAgentLoop, CatConfig, CatErrors, CatSandbox}

var categoryEmoji = map[string]string{
	CatRequest: "📤", CatProvider: "📥", CatOutput: "📨", CatMiddleware: "🧩", CatTools: "🔧",
	CatAgentLoop: "🔁", CatConfig: "⚙️", CatErrors: "❌", CatSandbox: "📦",
}

// NewLogger resolves a Debug option into a Logger.
func NewLogger(d *Debug) *Logger {
	lg := &Logger{}
	if d != nil && d.Logger != nil {
		lg.l = d.Logger
	} else {
		lg.l = slog.Default()
	}
	switch {
	case d == nil:
		lg.on = categoryBit(CatErrors)
	case d.None:
	case d.All:
		for _, c := range allCategories {
			lg.on |= categoryBit(c)
		}
	case d.Categories != nil:
		for _, c := range allCategories {
			v, set := d.Categories[c]
			if !set || v {
				lg.on |= categoryBit(c)
			}
		}
	default:
		lg.on = categoryBit(CatErrors)
	}
	return lg
}

// Enabled reports whether a category logs.
func (lg *Logger) Enabled(cat string) bool { return lg != nil && lg.on&categoryBit(cat) != 0 }

// categoryBit is cat's bit in Logger.on, 0 for a category goai does not
// log. (A mask rather than a map: every run has a Logger.)
func categoryBit(cat string) uint16 {
	for i, c := range allCategories {
		if c == cat {
			return 1 << i
		}
	}
	return 0
}

// Log writes one line in category cat. Errors go to the error level, the
// rest to debug. A panicking handler is swallowed.
func (lg *Logger) Log(cat, msg string, attrs ...slog.Attr) {
	if !lg.Enabled(cat) {
		return
	}
	defer func() { _ = recover() }()
	e := categoryEmoji[cat]
	line := e + " [tanstack-ai:" + cat + "] " + e + " " + msg
	level := slog.LevelDebug
	if cat == CatErrors {
		level = slog.LevelError
	}
	lg.l.LogAttrs(context.Background(), level, line, append(attrs, slog.String("category", cat))...)
}

// Warn writes a misconfiguration warning (gated by the errors category).
func (lg *Logger) Warn(msg string, attrs ...slog.Attr) {
	if !lg.Enabled(CatErrors) {
		return
	}
	defer func() { _ = recover() }()
	lg.l.LogAttrs(context.Background(), slog.LevelWarn, "⚠️ [tanstack-ai:warn] ⚠️ "+msg, append(attrs, slog.String("category", "warn"))...)
}

// Slog returns the underlying slog.Logger.
func (lg *Logger) Slog() *slog.Logger { return lg.l }
