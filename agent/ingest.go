package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/broker"
	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/ingest"
	"github.com/eddy-edge/eddy/operators/source"
)

// logIntake puts received messages into a source's durable ingest log
// before the broker is acked (DESIGN.md "Exactly once, end to end"), so a
// crash after the ack loses nothing: MQTT cannot replay, the log can.
type logIntake struct {
	log       *ingest.Log
	dedup     *ingest.Dedup
	dedupOpts ingest.DedupOptions
	entries   []ingest.Entry
	logger    *slog.Logger
	name      string
	dups      func()

	mu sync.Mutex // serializes dedup and Append between intake paths
}

func (in *logIntake) entry(topic string, payload []byte, arrival int64, dup bool) ingest.Entry {
	e := ingest.Entry{Arrival: arrival, Topic: unsafe.Slice(unsafe.StringData(topic), len(topic)), Payload: payload}
	if dup {
		e.Flags |= ingest.FlagDup
	}
	return e
}

// appendMessages appends msgs, dropping redeliveries of what the log
// already holds, and acks every message once it is durable. While the log is
// full it waits, holding the messages unacked at the broker (never dropping
// them), until retention truncates it or ctx ends.
func (in *logIntake) appendMessages(ctx context.Context, msgs []source.Message) error {
	in.mu.Lock()
	in.entries = in.entries[:0]
	for i := range msgs {
		m := &msgs[i]
		e := in.entry(m.Topic, m.Payload, m.Arrival, m.Dup)
		if in.dedup.Observe(&e) {
			in.dups()
			continue
		}
		in.entries = append(in.entries, e)
	}
	err := in.appendLocked(ctx)
	if err != nil {
		in.forgetUnlogged()
	}
	in.mu.Unlock()
	if err != nil {
		return err
	}
	// Acks go out in the order received, after the append is durable.
	for i := range msgs {
		msgs[i].Ack()
	}
	return nil
}

// forgetUnlogged rebuilds the dedup filter from the log after a failed
// append: it had remembered the failed messages as logged, and their resends
// (the broker's, or a dedup_key producer's) must not be dropped.
func (in *logIntake) forgetUnlogged() {
	d := ingest.NewDedup(in.dedupOpts)
	if err := d.Load(in.log); err != nil {
		in.logger.Warn("ingest dedup: cannot rebuild from the log; forgetting what it held", "source", in.name, "err", err)
		d = ingest.NewDedup(in.dedupOpts)
	}
	in.dedup = d
}

// dedupOptions builds the redelivery filter's options of an MQTT source:
// with dedup_key, the message id is the JSON field it names (the value's
// kind and text, so 7 and "7" differ), remembered for dedup_window.
func dedupOptions(m *config.MQTTSource) ingest.DedupOptions {
	if m.DedupKey == "" {
		return ingest.DedupOptions{}
	}
	schema := event.NewSchema()
	slot := schema.Slot(event.Path(strings.Split(m.DedupKey, ".")))
	dec := decode.NewJSON(schema)
	var rec event.Record
	var key []byte
	return ingest.DedupOptions{
		Window:   config.DedupMaxIDs,
		WindowMs: m.DedupWindow.Milliseconds(),
		// Called by the goroutine that owns the filter only, so one record
		// and key buffer serve every message.
		Key: func(_, payload []byte) ([]byte, bool) {
			rec.Reset(schema.Len())
			rec.Payload = append(rec.Payload, payload...)
			if dec.Decode(&rec) != nil {
				return nil, false // malformed: kept, and dead-lettered downstream
			}
			v := rec.Fields[slot]
			if v.IsNull() {
				return nil, false
			}
			key = append(key[:0], byte(v.Kind))
			key = v.AppendText(key)
			return key, true
		},
	}
}

func (in *logIntake) appendLocked(ctx context.Context) error {
	if len(in.entries) == 0 {
		return nil
	}
	warned := false
	for {
		_, _, err := in.log.Append(in.entries)
		if !errors.Is(err, ingest.ErrFull) {
			return err
		}
		if !warned {
			in.logger.Warn("ingest log full: holding messages unacked until checkpoints let it shrink", "source", in.name,
				"bytes", in.log.SizeBytes())
			warned = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// groupCommit appends messages from the embedded broker's publish hooks,
// which run in one goroutine per sensor connection and must not return
// (ack the sensor) before the message is durable: concurrent hooks share
// one Append, so one fsync serves them all.
type groupCommit struct {
	in      *logIntake
	mu      sync.Mutex
	pending []pendingEntry
	kick    chan struct{}
}

type pendingEntry struct {
	topic   string
	payload []byte
	arrival int64
	done    chan error
}

func newGroupCommit(in *logIntake) *groupCommit {
	return &groupCommit{in: in, kick: make(chan struct{}, 1)}
}

// append is the publish hook's subscriber: it returns once the message is
// in the log, or with an error, which makes the broker refuse the publish
// so the sensor sends it again.
func (g *groupCommit) append(ctx context.Context, topic string, payload []byte) error {
	p := pendingEntry{topic: topic, payload: append([]byte(nil), payload...), arrival: time.Now().UnixMilli(), done: make(chan error, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, p)
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run commits batches until ctx ends.
func (g *groupCommit) run(ctx context.Context) {
	var batch []pendingEntry
	for {
		select {
		case <-ctx.Done():
			g.mu.Lock()
			for _, p := range g.pending {
				p.done <- ctx.Err()
			}
			g.pending = nil
			g.mu.Unlock()
			return
		case <-g.kick:
		}
		g.mu.Lock()
		batch, g.pending = g.pending, batch[:0]
		g.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		in := g.in
		in.mu.Lock()
		in.entries = in.entries[:0]
		for _, p := range batch {
			e := in.entry(p.topic, p.payload, p.arrival, false)
			if in.dedup.Observe(&e) { // only dedup_key can match: the hook sees no DUP flag
				in.dups()
				continue
			}
			in.entries = append(in.entries, e)
		}
		err := in.appendLocked(ctx)
		if err != nil {
			in.forgetUnlogged()
		}
		in.mu.Unlock()
		for _, p := range batch {
			p.done <- err
		}
		clear(batch)
	}
}

// embeddedIntake subscribes to the embedded broker's publish hook and
// commits what it receives to the log until ctx ends.
func embeddedIntake(b *broker.Broker, filters []string, in *logIntake) func(ctx context.Context) {
	return func(ctx context.Context) {
		g := newGroupCommit(in)
		unsubscribe := b.Subscribe(filters, func(topic string, payload []byte) error {
			return g.append(ctx, topic, payload)
		})
		g.run(ctx)
		unsubscribe()
	}
}

// mqttIntake runs an MQTT source and commits its batches to the log.
func mqttIntake(src source.Source, in *logIntake, log *slog.Logger, name string, setErr func(error)) func(ctx context.Context) {
	return func(ctx context.Context) {
		ch := make(chan []source.Message, 4)
		go func() {
			if err := src.Run(ctx, ch); err != nil && ctx.Err() == nil {
				setErr(err)
				log.Error("source stopped", "source", name, "err", err)
			}
			close(ch)
		}()
		for msgs := range ch {
			if err := in.appendMessages(ctx, msgs); err != nil {
				if ctx.Err() == nil {
					log.Error("ingest log append failed: messages stay unacked at the broker", "source", name, "err", err)
				}
				// Unacked messages come back from the broker's session.
			}
		}
	}
}

// readLog feeds the pipelines from the ingest log, starting after the
// restored position: the same loop replays after a restore and then follows
// the live tail. Barriers are injected between batches.
func (s *sourceRunner) readLog(ctx context.Context, logger *slog.Logger) {
	l := s.ilog
	intakeDone := s.intakeDone

	next := s.skipTo + 1
	if first := l.FirstOffset(); first > next {
		if s.skipTo > 0 {
			logger.Warn("the checkpoint's ingest-log position was truncated: restoring its state and resuming from the oldest reading kept",
				"source", s.name, "position", s.skipTo, "first_kept", first)
		}
		next = first
		s.pos = first - 1
	}
	r, err := l.Reader(next)
	if err != nil {
		logger.Error("ingest log unreadable", "source", s.name, "err", err)
		s.err = err
		<-intakeDone
		close(s.drained)
		s.serveBarriersUntilClosed()
		return
	}
	defer r.Close()
	drained := false
	for {
		msgs, err := s.readBatch(r)
		if err != nil {
			logger.Error("ingest log read failed", "source", s.name, "err", err)
			s.err = err
		}
		if len(msgs) > 0 {
			s.pos = msgs[len(msgs)-1].Offset
			rb := &rawBatch{msgs: msgs}
			rb.refs.Store(int32(len(s.outs)))
			s.send(rb)
			select {
			case tr, ok := <-s.ctrl:
				if !ok {
					s.closeOuts()
					return
				}
				s.inject(tr)
			default:
			}
			continue
		}
		// At the end of the log.
		if !drained {
			select {
			case <-intakeDone:
				if l.LastOffset() <= s.pos {
					drained = true
					close(s.drained)
				}
				continue
			default:
			}
		}
		wctx, cancel := context.WithCancel(context.Background())
		waitCh := make(chan error, 1)
		if !drained {
			go func(after uint64) { waitCh <- l.Wait(wctx, after) }(s.pos)
		}
		select {
		case <-waitCh:
		case <-intakeDone:
		case tr, ok := <-s.ctrl:
			cancel()
			if !ok {
				s.closeOuts()
				return
			}
			s.inject(tr)
		}
		cancel()
		if drained {
			intakeDone = nil // already seen; only barriers remain
		}
	}
}

// readBatch reads up to source.MaxBatch entries, copying them out of the
// reader's buffer into one arena per batch.
func (s *sourceRunner) readBatch(r *ingest.Reader) ([]source.Message, error) {
	var msgs []source.Message
	var arena []byte
	for len(msgs) < source.MaxBatch {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return msgs, err
		}
		if arena == nil {
			arena = make([]byte, 0, 64<<10)
		}
		start := len(arena)
		arena = append(arena, e.Payload...)
		payload := arena[start:len(arena):len(arena)]
		msgs = append(msgs, source.Message{Topic: string(e.Topic), Payload: payload, Arrival: e.Arrival, Offset: e.Offset})
	}
	return msgs, nil
}
