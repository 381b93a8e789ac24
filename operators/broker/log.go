package broker

import (
	"context"
	"log/slog"
)

// minLevelHandler passes on records at or above min only: mochi logs every
// connection at info level, which would drown Eddy's own logs.
type minLevelHandler struct {
	min  slog.Level
	next slog.Handler
}

func (h minLevelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.next.Enabled(ctx, l)
}

func (h minLevelHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.next.Handle(ctx, r)
}

func (h minLevelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevelHandler{min: h.min, next: h.next.WithAttrs(attrs)}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{min: h.min, next: h.next.WithGroup(name)}
}
