package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/operators/io/source"
)

// logIntake puts received messages into a source's durable ingest log
// before the broker is acked (docs/architecture.md "Exactly once, end to end"), so a
// crash after the ack loses nothing: MQTT cannot replay, the log can.
type logIntake struct {
	log     *ingest.Log
	dedup   *ingest.Dedup
	entries []ingest.Entry
	logger  *slog.Logger
	name    string
	// redelivered counts and logs what dedup dropped or kept unmatched.
	redelivered redeliveries
	// flagged is, per broker session, the connection whose first logged
	// message carries ingest.FlagResumed; flaggedNow the sessions flagged in
	// the batch being appended, unflagged again if its append fails.
	flagged    []uint32
	flaggedNow []uint16
	// indexed is the number of entries dedup's index holds, after the last
	// commit, for eddy_ingest_dedup_indexed_entries.
	indexed atomic.Int64
	// linger is the shortest time between the starts of two commits
	// (ingest { linger }) unless lingerFull says enough waits: what arrives
	// meanwhile shares the next commit, so the log fsyncs (after_fsync) or
	// writes (after_write) at most 1/linger times a second at low rates, and
	// batches are large enough to compress.
	linger time.Duration
	// commits counts Appends that wrote something (each one fsync in
	// after_fsync mode), also as eddy_ingest_commits_total when set.
	commits       atomic.Uint64
	commitsMetric *metrics.Counter
	// holds, if set, says whether the disk budget is reached (then appends
	// wait) and gets this log's own hold while its file system is full.
	holds *disk.Holds

	mu         sync.Mutex // serializes dedup and Append between intake paths
	lastCommit time.Time  // start of the last Append, for linger
	// fullSince is when the log refused a batch as full (ingest.ErrFull),
	// zero while it takes them: one warning when it fills, one line when
	// ingest resumes, rather than one per batch held.
	fullSince time.Time
}

// commitAfter is when the next commit may start (linger); the zero time when
// there is no linger.
func (in *logIntake) commitAfter() time.Time {
	if in.linger <= 0 {
		return time.Time{}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.lastCommit.Add(in.linger)
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
	var seen redeliveryCounts
	for i := range msgs {
		m := &msgs[i]
		e := in.entry(m.Topic, m.Payload, m.Arrival, m.Dup)
		e.Props = m.Props
		if m.TooLarge {
			e.Flags |= ingest.FlagTooLarge // logged cut, so the pipeline dead-letters it, once
		}
		o := ingest.Origin{Session: m.Conn.Session, Conn: m.Conn.Seq, Resumed: m.Resumed}
		v := in.dedup.Observe(&e, o)
		seen.add(v)
		if v.Dropped() {
			continue
		}
		if m.Resumed {
			in.flagResumed(&e, o)
		}
		in.entries = append(in.entries, e)
	}
	err := in.appendLocked(ctx)
	if err != nil {
		in.forgetUnlogged()
	}
	in.noteIndex(&seen)
	in.mu.Unlock()
	if err != nil {
		return err
	}
	in.redelivered.record(&seen)
	// Acks go out in the order received, after the append is durable.
	source.AckAll(msgs)
	return nil
}

// noteIndex notes, for a batch with unmatched DUP messages, how far back
// the log and its index reach. in.mu is held.
func (in *logIntake) noteIndex(c *redeliveryCounts) {
	if c.unmatched > 0 {
		c.logFirst, c.index = in.log.FirstOffset(), in.dedup.Stats()
	}
}

// flagResumed sets ingest.FlagResumed on e when it is the first message
// logged from connection o, whose session the broker resumed.
func (in *logIntake) flagResumed(e *ingest.Entry, o ingest.Origin) {
	for int(o.Session) >= len(in.flagged) {
		in.flagged = append(in.flagged, 0)
	}
	if in.flagged[o.Session] == o.Conn {
		return
	}
	in.flagged[o.Session] = o.Conn
	in.flaggedNow = append(in.flaggedNow, o.Session)
	e.Flags |= ingest.FlagResumed
}

// forgetUnlogged tells the dedup filter that the batch was not appended:
// it had counted the batch's messages as logged, and their re-sends (the
// broker's, or a dedup_key producer's) must not be dropped. A connection
// whose flagged first message was in the batch is flagged again.
func (in *logIntake) forgetUnlogged() {
	if err := in.dedup.Discard(); err != nil {
		in.logger.Warn("ingest dedup: cannot rebuild the dedup_key window from the log; it starts empty", "source", in.name, "err", err)
	}
	for _, s := range in.flaggedNow {
		in.flagged[s] = 0
	}
	in.flaggedNow = in.flaggedNow[:0]
}

// dedupOptions builds the redelivery filter's options of an MQTT source:
// the broker's in-flight window for re-sends without DUP (not for the
// embedded broker, whose sensors re-send with DUP), and with dedup_key the
// message id, the JSON field it names (the value's kind and text, so 7 and
// "7" differ), remembered for dedup_window.
func dedupOptions(m *config.MQTTSource) ingest.DedupOptions {
	opts := ingest.DedupOptions{MaxInflight: m.MaxInflight, Sessions: m.Connections}
	if m.Broker == config.Embedded {
		opts.MaxInflight = 0
	}
	if m.DedupKey == "" {
		return opts
	}
	schema := event.NewSchema()
	slot := schema.Slot(event.Path(strings.Split(m.DedupKey, ".")))
	dec := decode.NewJSON(schema)
	var rec event.Record
	var key []byte
	opts.Window, opts.WindowMs = config.DedupMaxIDs, m.DedupWindow.Milliseconds()
	// Called by the goroutine that owns the filter only, so one record and
	// key buffer serve every message.
	opts.Key = func(_, payload []byte) ([]byte, bool) {
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
	}
	return opts
}

func (in *logIntake) appendLocked(ctx context.Context) error {
	if len(in.entries) == 0 {
		return nil
	}
	for {
		wait := 200 * time.Millisecond
		// Taken before the append: a Truncate between the two wakes the
		// retry at once rather than after wait.
		freed := in.log.Freed()
		switch err := in.appendOnce(); {
		case err == nil || !in.waitsFor(err):
			if err == nil && !in.fullSince.IsZero() {
				in.logger.Info("ingest log has room again: ingest resumes", "source", in.name,
					"held", time.Since(in.fullSince).Round(time.Millisecond), "bytes", in.log.SizeBytes())
				in.fullSince = time.Time{}
			}
			return err
		case errors.Is(err, ingest.ErrFull):
			if in.fullSince.IsZero() {
				in.logger.Warn("ingest log full: holding messages unacked until checkpoints let it shrink", "source", in.name,
					"bytes", in.log.SizeBytes())
				in.fullSince = time.Now()
			}
		default:
			wait = noSpaceRetry // the disk is full, or the budget reached: see appendOnce
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-freed:
		case <-time.After(wait):
		}
	}
}

// noSpaceRetry is how often an ingest log whose disk is full (or whose
// disk budget is reached) tries its batch again.
const noSpaceRetry = time.Second

// errBudgetReached refuses a batch while the disk budget is reached.
var errBudgetReached = errors.New("disk budget reached")

// appendOnce appends in.entries, unless the disk budget is reached. A
// batch the file system had no room for (ingest.ErrNoSpace: undone, the log
// stays usable) puts this log in the disk-full state, which the next
// successful append ends.
func (in *logIntake) appendOnce() error {
	if in.holds != nil && in.holds.Reason(disk.BudgetPlace) != "" {
		return errBudgetReached
	}
	if in.linger > 0 {
		in.lastCommit = time.Now()
	}
	first, last, err := in.log.Append(in.entries)
	place := disk.IngestPlace(in.name)
	switch {
	case err == nil:
		in.dedup.Appended(first, last)
		in.indexed.Store(int64(in.dedup.Len()))
		in.flaggedNow = in.flaggedNow[:0]
		in.commits.Add(1)
		if in.commitsMetric != nil {
			in.commitsMetric.Inc()
		}
		if in.holds != nil && in.holds.Release(place) {
			in.logger.Info("disk has room again: ingest resumes", "source", in.name, "path", in.log.Dir())
		}
	case errors.Is(err, ingest.ErrNoSpace) && in.holds != nil:
		if in.holds.Hold(place, in.log.Dir()+": "+err.Error()) {
			in.logger.Warn("disk full: ingest holds messages unacked at the broker until space frees",
				"source", in.name, "path", in.log.Dir(), "err", err)
		}
	}
	return err
}

// waitsFor reports whether appendLocked waits and retries after err: the
// log is full, its disk is, or the disk budget is reached.
func (in *logIntake) waitsFor(err error) bool {
	return errors.Is(err, ingest.ErrFull) || errors.Is(err, errBudgetReached) ||
		(in.holds != nil && errors.Is(err, ingest.ErrNoSpace))
}

// lingerBatch and lingerBytes start a commit before linger has passed,
// once that many waiting messages, or messages of that many bytes (topic and
// payload), wait. Every commit's fsync writes the log's last page again (4
// KiB on the device however little was appended), and batches compress to a
// few bytes per reading: at 256 readings of ~90 bytes a commit appended ~1.3
// KiB, so that page was three quarters of the ingest log's writes. 768
// readings (or 64 KiB) compress to a page or more, so the rewrite costs at
// most about as much as the data. Both stay below the in-flight window the
// README asks of the upstream broker (1,000), so a connection is not held
// waiting for lingerQuiet; a smaller window still is (a stock mosquitto's
// 20), and lingerQuiet ends the linger for it.
const (
	lingerBatch = 768
	lingerBytes = 64 << 10
)

// lingerFull reports whether n messages of size bytes start a commit.
func lingerFull(n, size int) bool { return n >= lingerBatch || size >= lingerBytes }

// lingerQuiet ends a linger early once no message arrived for that long: a
// sender whose in-flight window is full (mosquitto allows 20 unacked
// messages per client by default, a sensor may allow one) sends nothing more
// until this commit acks what it has, so lingering on would only cap it at
// its window per linger — and let a stock broker's queue overflow. Paced
// streams, whose gaps are shorter, still share one commit per linger.
const lingerQuiet = 20 * time.Millisecond

// lingerTimer waits until a commit may start, reusing one timer.
type lingerTimer struct{ t *time.Timer }

// wait returns a channel that fires at until, or nil when until has passed
// (a nil channel never fires: the caller commits at once).
func (lt *lingerTimer) wait(until time.Time) <-chan time.Time {
	d := time.Until(until)
	if d <= 0 {
		return nil
	}
	if lt.t == nil {
		lt.t = time.NewTimer(d)
	} else {
		lt.t.Reset(d)
	}
	return lt.t.C
}

func (lt *lingerTimer) stop() {
	if lt.t != nil {
		lt.t.Stop()
	}
}

// maxDeferred bounds the embedded broker's publishes waiting for a commit;
// beyond it the publish hook waits, stalling the publishing connection, up
// to maxDeferredWait, after which the publish is refused (the sensor
// re-sends it after reconnecting).
const (
	maxDeferred     = 8192
	maxDeferredWait = 5 * time.Second
)

// errIntakeStopped refuses publishes that arrive after the intake stopped.
var errIntakeStopped = errors.New("ingest intake stopped")

// errIntakeBusy refuses a publish that found no room for maxDeferredWait.
var errIntakeBusy = errors.New("ingest intake busy: too many publishes wait for a commit")

// groupCommit appends messages from the embedded broker's publish hook,
// which must not ack the sensor before the message is durable: every
// message waiting when a commit starts shares its one Append (one fsync).
// A QoS 1 publish is deferred (broker.SubscribeDeferred), so even one
// connection's publishes accumulate while a commit runs or lingers.
type groupCommit struct {
	in      *logIntake
	mu      sync.Mutex
	pending []pendingEntry
	stopped bool          // run ended: refuse what comes
	kick    chan struct{} // capacity 1: pending is not empty
	full    chan struct{} // lingerFull: commit without lingering
	room    chan struct{} // one token per entry not yet done
	arrived atomic.Int64  // UnixNano of the last publish queued, for lingerQuiet
	bytes   int           // topic and payload bytes of pending, for lingerBytes
}

type pendingEntry struct {
	topic   string
	payload []byte
	arrival int64
	dup     bool
	done    broker.Completion
}

func newGroupCommit(in *logIntake) *groupCommit {
	return &groupCommit{in: in, kick: make(chan struct{}, 1), full: make(chan struct{}, 1), room: make(chan struct{}, maxDeferred)}
}

// appendDeferred is the broker subscriber: it queues a publish for the next
// commit, which completes it. It blocks only while maxDeferred publishes
// wait already.
func (g *groupCommit) appendDeferred(topic string, payload []byte, dup bool, done broker.Completion) {
	select {
	case g.room <- struct{}{}:
	default:
		t := time.NewTimer(maxDeferredWait)
		defer t.Stop()
		select {
		case g.room <- struct{}{}:
		case <-t.C:
			done.Done(errIntakeBusy)
			return
		}
	}
	now := time.Now()
	g.arrived.Store(now.UnixNano())
	p := pendingEntry{topic: topic, payload: payload, arrival: now.UnixMilli(), dup: dup, done: done}
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		g.finish(&p, errIntakeStopped)
		return
	}
	wasFull := lingerFull(len(g.pending), g.bytes)
	g.pending = append(g.pending, p)
	g.bytes += len(topic) + len(payload)
	full := !wasFull && lingerFull(len(g.pending), g.bytes)
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
	if full {
		select {
		case g.full <- struct{}{}:
		default:
		}
	}
}

func (g *groupCommit) isFull() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return lingerFull(len(g.pending), g.bytes)
}

// finish completes p and frees its room.
func (g *groupCommit) finish(p *pendingEntry, err error) {
	p.done.Done(err)
	<-g.room
}

// run commits batches until ctx ends, then refuses what is left and what
// comes later.
func (g *groupCommit) run(ctx context.Context) {
	defer g.stop(ctx.Err())
	var batch []pendingEntry
	var lt lingerTimer
	defer lt.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.kick:
		}
		// Linger: let more publishes join this commit, until the senders go
		// quiet (lingerQuiet).
		if ch := lt.wait(g.in.commitAfter()); ch != nil && !g.isFull() {
			var quiet lingerTimer
		linger:
			for {
				idle := time.Since(time.Unix(0, g.arrived.Load()))
				if idle >= lingerQuiet {
					break
				}
				select {
				case <-ch:
					break linger
				case <-g.full:
					break linger
				case <-quiet.wait(time.Now().Add(lingerQuiet - idle)):
				case <-ctx.Done():
					quiet.stop()
					return
				}
			}
			quiet.stop()
		}
		select {
		case <-g.full: // taken with this batch
		default:
		}
		g.mu.Lock()
		batch, g.pending, g.bytes = g.pending, batch[:0], 0
		g.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		for rest := batch; len(rest) > 0; {
			n := batchFits(len(rest), g.in.log.MaxBatchBytes(), func(i int) int { return len(rest[i].topic) + len(rest[i].payload) })
			g.commit(ctx, rest[:n])
			rest = rest[n:]
		}
		clear(batch)
	}
}

// commit appends part, a batch that fits one append (batchFits), and
// completes its publishes in the order received.
func (g *groupCommit) commit(ctx context.Context, part []pendingEntry) {
	in := g.in
	in.mu.Lock()
	in.entries = in.entries[:0]
	var tooLarge []int // entries the log can never store: refused alone
	var seen redeliveryCounts
	for i := range part {
		p := &part[i]
		e := in.entry(p.topic, p.payload, p.arrival, p.dup)
		if !in.log.Fits(&e) {
			tooLarge = append(tooLarge, i)
			continue
		}
		// Sensors re-send with DUP (the DUP rule); the publish hook
		// knows no broker session, so nothing is matched without it.
		v := in.dedup.Observe(&e, ingest.Origin{})
		seen.add(v)
		if v.Dropped() {
			continue // a re-send of a logged publish whose PUBACK was lost: ack it again
		}
		in.entries = append(in.entries, e)
	}
	err := in.appendLocked(ctx)
	if err != nil {
		in.forgetUnlogged()
	}
	in.noteIndex(&seen)
	in.mu.Unlock()
	if err == nil {
		in.redelivered.record(&seen)
	}
	// In the order received: the broker writes each PUBACK here.
	for i := range part {
		if len(tooLarge) > 0 && tooLarge[0] == i {
			tooLarge = tooLarge[1:]
			g.finish(&part[i], ingest.ErrTooLarge)
			continue
		}
		g.finish(&part[i], err)
	}
}

// stop refuses every waiting publish with err and every later one.
func (g *groupCommit) stop(err error) {
	if err == nil {
		err = errIntakeStopped
	}
	g.mu.Lock()
	pending := g.pending
	g.pending, g.stopped = nil, true
	g.mu.Unlock()
	for i := range pending {
		g.finish(&pending[i], err)
	}
}

// embeddedIntake subscribes to the embedded broker's publish hook at once
// (the broker is listening already: a publish before the subscription would
// be acknowledged and lost) and returns the function that commits what it
// receives to the log until ctx ends. Publishes that arrive before it runs
// wait for its first commit.
func embeddedIntake(b *broker.Broker, filters []string, in *logIntake) func(ctx context.Context) {
	g := newGroupCommit(in)
	unsubscribe := b.SubscribeDeferred(filters, g.appendDeferred)
	return func(ctx context.Context) {
		g.run(ctx)
		unsubscribe()
		g.stop(ctx.Err()) // publishes that raced with unsubscribe
		in.redelivered.stop()
	}
}

// mqttIntake runs an MQTT source and commits its batches to the log. With a
// linger, batches that arrive before the next commit may start join it.
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
		var lt, quiet lingerTimer
		defer lt.stop()
		defer quiet.stop()
		defer in.redelivered.stop()
		var acc []source.Message
		for msgs := range ch {
			if timeout := lt.wait(in.commitAfter()); timeout != nil {
				acc = append(acc[:0], msgs...)
				size := messageBytes(msgs)
			gather:
				for !lingerFull(len(acc), size) {
					select {
					case more, ok := <-ch:
						if !ok {
							break gather
						}
						acc = append(acc, more...)
						size += messageBytes(more)
					case <-timeout:
						break gather
					case <-quiet.wait(time.Now().Add(lingerQuiet)): // the broker waits for acks
						break gather
					case <-ctx.Done():
						break gather
					}
				}
				msgs = acc
			}
			for rest := msgs; len(rest) > 0; {
				n := batchFits(len(rest), in.log.MaxBatchBytes(), func(i int) int { return len(rest[i].Topic) + len(rest[i].Props) + len(rest[i].Payload) })
				if err := in.appendMessages(ctx, rest[:n]); err != nil {
					if ctx.Err() == nil {
						log.Error("ingest log append failed: messages stay unacked at the broker", "source", name, "err", err)
					}
					// Unacked messages come back from the broker's session.
					break
				}
				rest = rest[n:]
			}
			clear(acc)
		}
	}
}

// batchFits returns how many of the n messages of a batch, from the
// first, go into one append of at most limit bytes (ingest.Log.MaxBatchBytes),
// each counted as size(i) (its topic and payload) plus ingest.EntryOverhead;
// at least one. A source's batch (up to source.MaxBatch messages) or a
// commit's gathering of several can be larger than a small ingest log can
// ever hold, and would then wait for room for good; split, each part is
// appended and acknowledged in turn, in order.
func batchFits(n int, limit int64, size func(i int) int) int {
	var total int64
	for i := range n {
		total += int64(size(i)) + ingest.EntryOverhead
		if total > limit && i > 0 {
			return i
		}
	}
	return n
}

// messageBytes is the topic and payload bytes of msgs, for lingerBytes.
func messageBytes(msgs []source.Message) int {
	n := 0
	for i := range msgs {
		n += len(msgs[i].Topic) + len(msgs[i].Payload)
	}
	return n
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
		s.pos.Store(first - 1)
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
	drained, caughtUp := false, false
	for {
		msgs, err := s.readBatch(r)
		if err != nil {
			logger.Error("ingest log read failed", "source", s.name, "err", err)
			s.err = err
		}
		if len(msgs) > 0 {
			s.pos.Store(msgs[len(msgs)-1].Offset)
			rb := &stages.SourceBatch{Msgs: msgs}
			rb.Share(len(s.outs))
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
		if !caughtUp {
			// The replay is over: the pipelines' processing time may
			// follow the wall clock from here (Pipeline.HoldProcessingTime).
			caughtUp = true
			s.send(&stages.SourceBatch{CaughtUp: true})
		}
		if !drained {
			select {
			case <-intakeDone:
				if l.LastOffset() <= s.pos.Load() {
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
			go func(after uint64) { waitCh <- l.Wait(wctx, after) }(s.pos.Load())
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
		if msgs == nil {
			// As many as the previous batch: growing from empty took ten
			// allocations for a full batch.
			msgs = make([]source.Message, 0, max(s.batchHint, 16))
		}
		if arena == nil {
			// Sized by the previous batch: a full 64 KiB per small live
			// batch would be most of the agent's garbage at 10k readings/s.
			arena = make([]byte, 0, min(max(s.arenaHint+s.arenaHint/4, 4<<10), 64<<10))
		}
		start := len(arena)
		arena = append(arena, e.Payload...)
		payload := arena[start:len(arena):len(arena)]
		var props []byte
		if len(e.Props) > 0 {
			start = len(arena)
			arena = append(arena, e.Props...)
			props = arena[start:len(arena):len(arena)]
		}
		msgs = append(msgs, source.Message{Topic: s.topics.intern(e.Topic), Payload: payload, Props: props, Arrival: e.Arrival, Offset: e.Offset,
			TooLarge: e.Flags&ingest.FlagTooLarge != 0, ResumeStart: e.Flags&ingest.FlagResumed != 0})
	}
	if len(msgs) > 0 {
		s.arenaHint, s.batchHint = len(arena), len(msgs)
	}
	return msgs, nil
}

// maxInterned bounds the topics a topicInterner keeps; past it, it starts
// over (a fleet of more topics than that just allocates more often).
const maxInterned = 16384

// topicInterner returns one string per distinct topic read from the log,
// so reading a message allocates no topic: sensors publish on a fixed set.
type topicInterner map[string]string

func (ti *topicInterner) intern(b []byte) string {
	if s, ok := (*ti)[string(b)]; ok { // no allocation for the lookup
		return s
	}
	if *ti == nil || len(*ti) >= maxInterned {
		*ti = make(topicInterner)
	}
	s := string(b)
	(*ti)[s] = s
	return s
}
