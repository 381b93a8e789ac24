package broker

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// mochiHandler is the handler of mochi's own logger. It is a filter, not
// just a level, because mochi's warnings cannot be trusted with what a
// client sends: on any error in a client's packet ("error processing
// packet", among them every QoS 1/2 publish an acl refuses from an MQTT
// 3.1.1 client) it logs the whole packet, payload included, as decimal
// bytes — megabytes of log per refused message, and the readings' content
// in the log. mochi has no option for it other than its level, and its
// other warnings are worth keeping. So the handler
//
//   - passes on warnings and errors only (mochi logs every connection at
//     info level, which would drown Eddy's own logs);
//   - drops the records the hook already logs itself, bounded and naming
//     the client (an acl refusal), and those about a connection cut short
//     because the broker is closing;
//   - replaces every packet in a record by its type, topic (cut) and
//     payload size, and cuts long strings;
//   - lets through a burst of each message and then one in a while
//     (lineLimiter), so a client that makes mochi complain in a loop costs
//     bounded log.
type mochiHandler struct {
	min   slog.Level
	next  slog.Handler
	limit *lineLimiter
}

func (h mochiHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.next.Enabled(ctx, l)
}

func (h mochiHandler) Handle(ctx context.Context, r slog.Record) error {
	if closedConnection(r) || loggedByHook(r) {
		return nil
	}
	ok, suppressed := h.limit.allow("mochi: " + r.Message)
	if !ok {
		return nil
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(boundAttr(a))
		return true
	})
	if suppressed > 0 {
		out.AddAttrs(slog.Uint64("suppressed", suppressed))
	}
	return h.next.Handle(ctx, out)
}

func (h mochiHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	bounded := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		bounded[i] = boundAttr(a)
	}
	return mochiHandler{min: h.min, next: h.next.WithAttrs(bounded), limit: h.limit}
}

func (h mochiHandler) WithGroup(name string) slog.Handler {
	return mochiHandler{min: h.min, next: h.next.WithGroup(name), limit: h.limit}
}

// recordError returns the first error among r's attributes, or nil.
func recordError(r slog.Record) error {
	var found error
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok {
			found = err
			return false
		}
		return true
	})
	return found
}

// closedConnection reports a record about a connection read cut short
// because the broker itself is closing: expected at shutdown, not a warning.
func closedConnection(r slog.Record) bool {
	return errors.Is(recordError(r), net.ErrClosed)
}

// loggedByHook reports a record about a refusal the hook has logged
// already: a publish outside the client's acl (mochi disconnects an MQTT
// 3.1.1 client for it and logs the packet).
func loggedByHook(r slog.Record) bool {
	return errors.Is(recordError(r), packets.ErrNotAuthorized)
}

// maxAttrLen bounds a string in a logged record; clients choose topics and
// client ids of up to 64 KiB.
const maxAttrLen = 200

// boundAttr is a with a packet replaced by its summary and a long string
// cut.
func boundAttr(a slog.Attr) slog.Attr {
	switch v := a.Value.Resolve(); v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, cut(v.String()))
	case slog.KindAny:
		switch x := v.Any().(type) {
		case packets.Packet:
			return slog.Group(a.Key, "type", packets.PacketNames[x.FixedHeader.Type],
				"topic", cut(x.TopicName), "bytes", len(x.Payload))
		case *packets.Packet:
			if x != nil {
				return boundAttr(slog.Any(a.Key, *x))
			}
		case error:
			return slog.String(a.Key, cut(x.Error()))
		case []byte:
			return slog.Int(a.Key+"_bytes", len(x))
		}
	case slog.KindGroup:
		attrs := v.Group()
		bounded := make([]any, len(attrs))
		for i, g := range attrs {
			bounded[i] = boundAttr(g)
		}
		return slog.Group(a.Key, bounded...)
	}
	return a
}

// cut returns s, or its first maxAttrLen bytes (at a rune boundary) and a
// mark that it was cut.
func cut(s string) string {
	if len(s) <= maxAttrLen {
		return s
	}
	n := maxAttrLen
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…(cut)"
}

// Defaults of lineLimiter: a burst of 10 lines of one kind, then one every
// 6 s (10 a minute).
const (
	logBurst = 10
	logEvery = 6 * time.Second
	// logKinds bounds the kinds a lineLimiter tracks; beyond it they share
	// one budget.
	logKinds = 64
)

// lineLimiter bounds the log lines of each kind (a refusal's reason, a
// mochi message): a burst, then one per interval; the lines held back are
// counted and reported on the next one let through. Safe for concurrent
// use.
type lineLimiter struct {
	burst int
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	kinds map[string]*lineBudget
}

type lineBudget struct {
	tokens     float64
	last       time.Time
	suppressed uint64
}

func newLineLimiter() *lineLimiter {
	return &lineLimiter{burst: logBurst, every: logEvery, now: time.Now, kinds: map[string]*lineBudget{}}
}

// allow reports whether a line of kind may be logged now and, if so, how
// many of that kind were held back since the last one logged.
func (l *lineLimiter) allow(kind string) (ok bool, suppressed uint64) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.kinds[kind]
	if b == nil {
		if len(l.kinds) >= logKinds {
			kind = "other"
			b = l.kinds[kind]
		}
		if b == nil {
			b = &lineBudget{tokens: float64(l.burst), last: now}
			l.kinds[kind] = b
		}
	}
	b.tokens = min(float64(l.burst), b.tokens+float64(now.Sub(b.last))/float64(l.every))
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}
