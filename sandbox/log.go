package sandbox

import (
	"context"
	"io"
	"log/slog"

	"github.com/goai-sdk/goai/chat"
)

// discardLogger is used when a caller passes no logger.
func orDiscard(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 100}))
}

func logDebug(l *slog.Logger, msg string, args ...any) {
	l.Log(context.Background(), slog.LevelDebug, msg, append([]any{slog.String("category", chat.CatSandbox)}, args...)...)
}

func logWarn(l *slog.Logger, msg string, args ...any) {
	l.Log(context.Background(), slog.LevelWarn, msg, append([]any{slog.String("category", chat.CatErrors)}, args...)...)
}

func logError(l *slog.Logger, msg string, args ...any) {
	l.Log(context.Background(), slog.LevelError, msg, append([]any{slog.String("category", chat.CatErrors)}, args...)...)
}
