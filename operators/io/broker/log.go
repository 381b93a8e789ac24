package broker

import (
	"context"
	"errors"
	"log/slog"
	"net"
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
	if closedConnection(r) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

// closedConnection reports a record about a connection read cut short
// because the broker itself is closing: expected at shutdown, not a warning.
func closedConnection(r slog.Record) bool {
	closed := false
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, net.ErrClosed) {
			closed = true
			return false
		}
		return true
	})
	return closed
}

func (h minLevelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevelHandler{min: h.min, next: h.next.WithAttrs(attrs)}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{min: h.min, next: h.next.WithGroup(name)}
}
