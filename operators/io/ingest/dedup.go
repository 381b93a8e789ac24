package ingest

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math/bits"
	"slices"
)

// DefaultDedupWindow is how many recent entries the dedup_key filter
// remembers when DedupOptions.Window is zero.
const DefaultDedupWindow = 65536

// KeyFunc extracts a producer-assigned message id (e.g. a JSON field) from
// a message. ok is false when the message carries none. It must be
// deterministic: Load calls it again on the logged messages.
type KeyFunc func(topic, payload []byte) (key []byte, ok bool)

// DedupOptions configure a Dedup.
type DedupOptions struct {
	// IndexMax bounds the entries indexed for DUP lookups (see Dedup),
	// rounded up to a multiple of 65,536. Zero: DefaultIndexMax. Memory is
	// 8 bytes per entry (IndexBytesPerMillion), reserved 65,536 at a time.
	IndexMax int
	// MaxInflight is the broker's in-flight window per connection (QoS 1/2
	// messages it sends before waiting for acks). Positive: a resumed
	// connection's re-sends without DUP are recognized (see Dedup). Zero:
	// they are not.
	MaxInflight int
	// Sessions is how many broker sessions the source reads through (a
	// shared subscription's connections); zero means one. After a restart
	// the last MaxInflight×Sessions entries of the log are taken as
	// possibly unacknowledged.
	Sessions int
	// Key, if set, is the dedup_key mode: a message for which Key returns
	// an id is a duplicate when an entry with the same topic and id is
	// remembered (Window, WindowMs), whether or not the broker marked it
	// DUP; a DUP message is looked up by (topic, id) in the index. Messages
	// without an id are identified by content as without Key.
	Key KeyFunc
	// Window is how many of the most recent entries dedup_key remembers.
	// Zero: DefaultDedupWindow. Memory is 16 bytes per entry, about 40
	// once ids are looked up (always). Unused without Key.
	Window int
	// WindowMs, if positive, also forgets ids that arrived more than this
	// many milliseconds before the newest one seen (by Entry.Arrival, so
	// the filter itself reads no clock).
	WindowMs int64
}

// Verdict is what Observe found a message to be.
type Verdict uint8

const (
	// Keep: new data; append it.
	Keep Verdict = iota
	// KeepUnmatched: the broker marked it DUP but it equals no indexed
	// entry. It may never have reached the log (a crash before the append),
	// so it is appended; or its original is older than the index holds.
	KeepUnmatched
	// DropRedelivery: marked DUP and equal to an entry the log holds.
	DropRedelivery
	// DropResend: without DUP, the broker's re-send of an entry not known
	// acknowledged, on a connection that resumed the session.
	DropResend
	// DropKey: dedup_key mode, its (topic, id) was logged within the window.
	DropKey
)

// Dropped reports whether the message is a duplicate: drop it, and still
// ack it to the broker (the broker waits for that ack).
func (v Verdict) Dropped() bool { return v >= DropRedelivery }

func (v Verdict) String() string {
	switch v {
	case Keep:
		return "keep"
	case KeepUnmatched:
		return "keep_unmatched"
	case DropRedelivery:
		return "drop_redelivery"
	case DropResend:
		return "drop_resend"
	case DropKey:
		return "drop_key"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Dedup recognizes messages the log already holds: the broker's
// redeliveries after a reconnect (an ack lost with the connection, or with
// the process, makes the broker send an appended QoS 1/2 message again;
// paho does not deduplicate inbound QoS 2). Identity is a 64-bit hash of
// (topic, payload), or of (topic, id) in dedup_key mode. Two rules, exact
// for brokers that set DUP on redeliveries and for those that do not:
//
// DUP rule: a message the broker marked DUP is dropped when it equals an
// entry the index holds, however far back. The index holds the hash of
// each of the log's newest IndexMax entries, whatever their flags: every
// entry the log retains (it is truncated below the oldest retained
// checkpoint) while it holds no more than that; beyond, the oldest block
// of 65,536 is let go when a new one is needed, so at least
// IndexMax−65,535 of the newest are indexed. A DUP message that equals
// none is kept (KeepUnmatched). A message without DUP is never dropped by
// this rule: a repeated payload is new data.
//
// Resend rule (MaxInflight > 0): on a connection where the broker resumed
// the session, a message equal to an entry of the unacknowledged tail is
// the broker's re-send, with or without DUP (aedes re-sends without it).
// The tail is what the broker may re-send: the last MaxInflight messages
// received on each recent connection of the session (the broker's
// in-flight window bounds its unacknowledged messages), or, after a
// restart, the log's last MaxInflight×Sessions entries before its end and
// before each of its last resumed connections (an Append precedes its
// acks, so anything older was acked by the previous process on a
// connection that then delivered MaxInflight more). Each tail entry absorbs
// one re-send, and is recognized for ResendSpanMs of arrival time after
// its connection's last message: a broker may send its re-sends behind
// live messages, or leave them to a later connection when one ends before
// it got to them (aedes does both); the tail holds at most resendCarry
// windows of them, the newest. A message on a connection whose session was
// not resumed, or after its tail entry expired, is kept unless the DUP rule
// drops it. Not covered, as the log does not record which session an entry
// came from: after a restart, a shared subscription's session whose last
// messages lie further back than MaxInflight×Sessions entries (its
// connection delivered far less than the others at the end); and an entry
// whose re-send was dropped and whose ack was lost again when the process
// died before the next connection. Brokers that set DUP are exact there
// too, by the DUP rule.
//
// A wrong drop needs a hash collision with an indexed entry (probability
// below IndexMax/2^64, 2e-14 by default, per DUP message) or a re-send
// match with a byte-identical new message on the same topic within
// ResendSpanMs of a reconnect: payloads should carry a timestamp or
// sequence number.
//
// The hash seeds are random per process; Load rebuilds the index and the
// tail from the log after a restart.
//
// Use: Observe each message of a batch; Append the kept ones; then
// Appended with the offsets, or Discard when the append failed for good.
// A Dedup is not safe for concurrent use; the goroutine that batches
// messages for Append owns it. Steady state allocates nothing.
type Dedup struct {
	opts     DedupOptions
	seeds    [3]maphash.Seed // payloads, ids, topics
	log      *Log
	index    hashIndex
	staged   []uint64   // hashes of the entries kept since the last Appended
	keys     *keyWindow // dedup_key mode
	sessions []session
	restart  *resendTail // the log's tail at Load, for each session's first connection
}

// NewDedup returns an empty filter.
func NewDedup(opts DedupOptions) *Dedup {
	if opts.IndexMax <= 0 {
		opts.IndexMax = DefaultIndexMax
	}
	opts.IndexMax = (max(opts.IndexMax, 1) + indexBlockLen - 1) / indexBlockLen * indexBlockLen
	opts.Sessions = max(opts.Sessions, 1)
	if opts.Window <= 0 {
		opts.Window = DefaultDedupWindow
	}
	d := &Dedup{opts: opts, seeds: [3]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed(), maphash.MakeSeed()}, index: hashIndex{max: opts.IndexMax}}
	if opts.Key != nil {
		d.keys = newKeyWindow(opts.Window, opts.WindowMs)
	}
	return d
}

// Observe classifies e, received from o. Unless the verdict is Dropped, e
// counts as logged from now on: append it, retrying a batch that failed
// with ErrFull rather than dropping it.
func (d *Dedup) Observe(e *Entry, o Origin) Verdict {
	h, keyed := d.hash(e)
	resent := d.resent(o, h, e.Arrival)
	if e.Flags&FlagDup != 0 {
		if resent || d.indexed(h) {
			return DropRedelivery
		}
		d.keep(h, keyed, e.Arrival)
		return KeepUnmatched
	}
	if keyed && d.keys.seen(h, e.Arrival) {
		return DropKey
	}
	if resent {
		return DropResend
	}
	d.keep(h, keyed, e.Arrival)
	return Keep
}

// indexed reports whether an entry with hash h is logged or kept in this
// batch.
func (d *Dedup) indexed(h uint64) bool {
	if d.log != nil {
		d.index.truncate(d.log.FirstOffset())
	}
	return slices.Contains(d.staged, h) || d.index.contains(h)
}

func (d *Dedup) keep(h uint64, keyed bool, arrival int64) {
	d.staged = append(d.staged, h)
	if d.keys != nil {
		d.keys.remember(h, keyed, arrival)
	}
}

// Appended records that the entries kept since the last call were appended
// as offsets first … last (one each, in order).
func (d *Dedup) Appended(first, last uint64) {
	for i, h := range d.staged {
		d.index.add(h, first+uint64(i))
	}
	d.staged = d.staged[:0]
	if d.log != nil {
		d.index.truncate(d.log.FirstOffset())
	}
}

// Discard forgets the entries kept since the last Appended: their append
// failed, they stay unacked, and the broker's re-sends of them must be
// appended. The re-send tails are dropped with them (a re-send then counts
// twice rather than one being lost), and the dedup_key window is rebuilt
// from the log.
func (d *Dedup) Discard() error {
	d.staged = d.staged[:0]
	d.restart = nil
	for i := range d.sessions {
		d.sessions[i].tail = nil
		d.sessions[i].n = 0
	}
	if d.keys == nil || d.log == nil {
		return nil
	}
	d.keys = newKeyWindow(d.opts.Window, d.opts.WindowMs)
	from := d.log.FirstOffset()
	if last := d.log.LastOffset(); last >= uint64(d.opts.Window) {
		from = max(from, last-uint64(d.opts.Window)+1)
	}
	return d.scan(d.log, from, func(_ uint64, h uint64, keyed bool, arrival int64, _ Flags) {
		d.keys.remember(h, keyed, arrival)
	})
}

// Load rebuilds the filter from l after a restart: the index from its
// newest IndexMax entries, the dedup_key window from its last Window, and
// the tail from the last MaxInflight×Sessions entries before its end and
// before each of its recent resumed connections (FlagResumed), at most
// resendCarry such spans, the newest: the last connections before the
// restart, whose re-sends a broker may still owe (see connected). Each span
// is recognized for ResendSpanMs after its last entry's arrival. Call it
// after Open and before the first Observe. Its cost is one read of those
// entries.
func (d *Dedup) Load(l *Log) error {
	d.log = l
	d.index.reset()
	last := l.LastOffset()
	tailN := d.opts.MaxInflight * d.opts.Sessions
	span := uint64(d.opts.IndexMax)
	if d.keys != nil {
		d.keys = newKeyWindow(d.opts.Window, d.opts.WindowMs)
		span = max(span, uint64(d.opts.Window))
	}
	if tailN > 0 {
		// Enough to reach back over resendCarry spans of tailN entries
		// and the connections between them.
		span = max(span, uint64(tailN)*resendCarry*4)
	}
	from := l.FirstOffset()
	if last >= span {
		from = max(from, last-span+1)
	}
	// ring holds the last tailN entries read. At each resumed connection's
	// first entry, and at the end, those not taken yet join the tail,
	// recognized for ResendSpanMs after the newest one's arrival.
	type read struct {
		off     uint64
		h       uint64
		arrival int64
	}
	ring := make([]read, tailN)
	var head, n int
	var taken uint64 // the newest offset in the tail
	var tail []tailEntry
	cut := func() {
		if n == 0 {
			return
		}
		newest := ring[(head+n-1)%len(ring)]
		for i := range n {
			if r := ring[(head+i)%len(ring)]; r.off > taken {
				tail = append(tail, tailEntry{h: r.h, until: newest.arrival + ResendSpanMs})
			}
		}
		taken = newest.off
		// Oldest first: a cut drops the oldest.
		if over := len(tail) - resendCarry*tailN; over > 0 {
			tail = slices.Delete(tail, 0, over)
		}
	}
	err := d.scan(l, from, func(off uint64, h uint64, keyed bool, arrival int64, flags Flags) {
		if last-off < uint64(d.opts.IndexMax) {
			d.index.add(h, off)
		}
		if tailN > 0 {
			if flags&FlagResumed != 0 {
				cut()
			}
			r := read{off: off, h: h, arrival: arrival}
			if n < len(ring) {
				ring[(head+n)%len(ring)] = r
				n++
			} else {
				ring[head] = r
				head = (head + 1) % len(ring)
			}
		}
		if d.keys != nil && last-off < uint64(d.opts.Window) {
			d.keys.remember(h, keyed, arrival)
		}
	})
	if err != nil {
		return err
	}
	cut()
	d.restart = nil
	if len(tail) > 0 {
		d.restart = newResendTail(tail)
	}
	return nil
}

// scan reads l from offset from to its end, calling f with each entry's
// offset, hash, arrival and flags.
func (d *Dedup) scan(l *Log, from uint64, f func(off, h uint64, keyed bool, arrival int64, flags Flags)) error {
	r, err := l.Reader(from)
	if err != nil {
		return fmt.Errorf("ingest: dedup load: %w", err)
	}
	defer r.Close()
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("ingest: dedup load: %w", err)
		}
		h, keyed := d.hash(&e)
		f(e.Offset, h, keyed, e.Arrival, e.Flags)
	}
}

// DedupStats describe a Dedup's index.
type DedupStats struct {
	// Indexed is the number of entries the index holds, from offset
	// IndexFirst (0 when empty).
	Indexed    int
	IndexFirst uint64
	// IndexBytes is the memory its blocks reserve (resident as they fill).
	IndexBytes int64
}

// Stats reports the index's extent.
func (d *Dedup) Stats() DedupStats {
	return DedupStats{Indexed: d.index.n, IndexFirst: d.index.oldest(), IndexBytes: d.index.bytes()}
}

// Len is the number of entries indexed.
func (d *Dedup) Len() int { return d.index.n }

// Close releases the index's memory. The Dedup is empty afterwards.
func (d *Dedup) Close() { d.index.reset() }

// hash is the identity of e: (topic, id) in dedup_key mode when e has an
// id, else (topic, payload). Topic and body are hashed apart, each in one
// call with its own random seed (ids with a third), and combined: equal
// only when both are, but for a chance of 2^-64 per pair.
func (d *Dedup) hash(e *Entry) (uint64, bool) {
	seed, body := d.seeds[0], e.Payload
	if d.opts.Key != nil {
		if k, ok := d.opts.Key(e.Topic, e.Payload); ok {
			seed, body = d.seeds[1], k
		}
	}
	h := maphash.Bytes(seed, body) ^ bits.RotateLeft64(maphash.Bytes(d.seeds[2], e.Topic)*0x9e3779b97f4a7c15, 31)
	return h, seed == d.seeds[1]
}

// keyWindow remembers the hashes of the most recent entries for the
// dedup_key mode, which looks up every message carrying an id: a ring of
// them, oldest first, and their counts for lookups.
type keyWindow struct {
	ring     []keySlot
	head, n  int
	counts   map[uint64]uint32
	windowMs int64
	newest   int64 // latest arrival seen
}

type keySlot struct {
	hash    uint64
	arrival int64
	keyed   bool
}

func newKeyWindow(size int, windowMs int64) *keyWindow {
	return &keyWindow{ring: make([]keySlot, size), counts: make(map[uint64]uint32, size), windowMs: windowMs}
}

// seen reports whether an entry with id hash h is remembered, first
// forgetting those the time window has passed.
func (w *keyWindow) seen(h uint64, arrival int64) bool {
	w.forgetBefore(arrival)
	return w.counts[h] > 0
}

func (w *keyWindow) remember(h uint64, keyed bool, arrival int64) {
	w.forgetBefore(arrival)
	if w.n == len(w.ring) {
		w.forgetOldest()
	}
	w.ring[(w.head+w.n)%len(w.ring)] = keySlot{hash: h, arrival: arrival, keyed: keyed}
	w.n++
	if keyed {
		w.counts[h]++
	}
}

func (w *keyWindow) forgetBefore(arrival int64) {
	if w.windowMs <= 0 {
		return
	}
	w.newest = max(w.newest, arrival)
	for w.n > 0 && w.ring[w.head].arrival < w.newest-w.windowMs {
		w.forgetOldest()
	}
}

func (w *keyWindow) forgetOldest() {
	if s := w.ring[w.head]; s.keyed {
		if c := w.counts[s.hash]; c <= 1 {
			delete(w.counts, s.hash)
		} else {
			w.counts[s.hash] = c - 1
		}
	}
	w.head = (w.head + 1) % len(w.ring)
	w.n--
}
