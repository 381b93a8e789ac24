package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
)

// DefaultDedupWindow is how many recent entries a Dedup remembers when
// DedupOptions.Window is zero.
const DefaultDedupWindow = 65536

// KeyFunc extracts a producer-assigned message id (e.g. a JSON field) from
// a message. ok is false when the message carries none. It must be
// deterministic: Load calls it again on the logged messages.
type KeyFunc func(topic, payload []byte) (key []byte, ok bool)

// DedupOptions configure a Dedup.
type DedupOptions struct {
	// Window is how many of the most recent entries are remembered. Zero:
	// DefaultDedupWindow. Memory is 16 bytes per entry, about 40 while
	// redeliveries are looked up (always, with Key).
	Window int
	// WindowMs, if positive, also forgets entries that arrived more than
	// this many milliseconds before the newest one seen (by Entry.Arrival,
	// so the filter itself reads no clock).
	WindowMs int64
	// Key, if set, is the dedup_key mode: a message for which Key returns
	// an id is a duplicate when an entry with the same topic and id is
	// remembered, whether or not the broker marked it DUP. Messages without
	// an id fall back to the content check.
	Key KeyFunc
}

// Dedup recognizes messages that repeat recent entries of the log: the
// broker's redeliveries after a reconnect (paho does not deduplicate
// inbound QoS 2, and an ack lost with the connection makes the broker send
// an already appended QoS 1/2 message again).
//
// By content, a message is a duplicate only when the broker marked it
// redelivered (FlagDup) and an entry with the same topic and payload is
// remembered; a repeated payload without DUP is new data. Identity is a
// 64-bit hash of (topic, payload), so a DUP message is wrongly dropped with
// probability at most Window / 2^64 (about 3.6e-15 for the default window)
// — or when it is byte-identical to a different recent message on the same
// topic, so payloads should carry a timestamp or sequence number.
//
// A QoS 1 producer that re-sends after its own reconnect sends a new
// PUBLISH without DUP: only the dedup_key mode (DedupOptions.Key) catches
// that, and only within the window.
//
// The hash seed is random per process; the history is rebuilt from the log
// tail by Load after a restart, so nothing is forgotten across restarts.
//
// A Dedup is not safe for concurrent use; the goroutine that batches
// messages for Append owns it.
type Dedup struct {
	opts DedupOptions
	seed maphash.Seed
	ring []dedupSlot // remembered entries, oldest at head
	head int
	n    int
	// counts maps a hash to the remembered entries with that hash, for
	// lookups. Without a KeyFunc only DUP-marked messages are looked up,
	// which come in bursts after a reconnect: the map is built from the
	// ring at the first and dropped after a window without any, so the
	// steady stream costs no map update per message.
	counts   map[uint64]uint32
	sinceDup int   // entries remembered since the last lookup
	newest   int64 // latest arrival seen
}

type dedupSlot struct {
	hash    uint64
	arrival int64
}

// NewDedup returns an empty filter.
func NewDedup(opts DedupOptions) *Dedup {
	if opts.Window <= 0 {
		opts.Window = DefaultDedupWindow
	}
	d := &Dedup{opts: opts, seed: maphash.MakeSeed(), ring: make([]dedupSlot, opts.Window)}
	if opts.Key != nil {
		d.counts = make(map[uint64]uint32, opts.Window) // every message is looked up
	}
	return d
}

// Observe reports whether e repeats a remembered entry. If it does, drop it
// and still ack it to the broker (the broker waits for that ack). If not,
// Observe remembers e: the caller must then append it, retrying a batch
// that failed with ErrFull rather than dropping it, since the filter now
// counts it as logged. Observe does not allocate in steady state.
func (d *Dedup) Observe(e *Entry) bool {
	d.forgetBefore(e.Arrival)
	h, keyed := d.hash(e)
	if keyed || e.Flags&FlagDup != 0 {
		if d.counts == nil {
			d.counts = make(map[uint64]uint32, d.n)
			for i := range d.n {
				d.counts[d.ring[(d.head+i)%len(d.ring)].hash]++
			}
		}
		d.sinceDup = 0
		if d.counts[h] > 0 {
			return true
		}
	} else if d.counts != nil && d.opts.Key == nil {
		if d.sinceDup++; d.sinceDup > len(d.ring) {
			d.counts = nil // a window without a redelivery: back to the ring alone
		}
	}
	d.remember(h, e.Arrival)
	return false
}

// Load remembers the last Window entries of l (in AfterWrite mode after a
// restart: everything the previous process logged). Call it after Open and
// before the first Observe.
func (d *Dedup) Load(l *Log) error {
	from := l.FirstOffset()
	if last := l.LastOffset(); last >= uint64(d.opts.Window) && last-uint64(d.opts.Window)+1 > from {
		from = last - uint64(d.opts.Window) + 1
	}
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
		d.forgetBefore(e.Arrival)
		h, _ := d.hash(&e)
		d.remember(h, e.Arrival)
	}
}

// Len is the number of entries remembered.
func (d *Dedup) Len() int { return d.n }

// hash is the identity of e: (topic, id) in dedup_key mode when e has an
// id, else (topic, payload). The two are kept apart by a tag byte and the
// topic by its length.
func (d *Dedup) hash(e *Entry) (uint64, bool) {
	tag, body := byte('p'), e.Payload
	if d.opts.Key != nil {
		if k, ok := d.opts.Key(e.Topic, e.Payload); ok {
			tag, body = 'k', k
		}
	}
	var h maphash.Hash
	h.SetSeed(d.seed)
	var pre [5]byte
	pre[0] = tag
	binary.LittleEndian.PutUint32(pre[1:], uint32(len(e.Topic)))
	h.Write(pre[:])
	h.Write(e.Topic)
	h.Write(body)
	return h.Sum64(), tag == 'k'
}

func (d *Dedup) remember(h uint64, arrival int64) {
	if d.n == len(d.ring) {
		d.forgetOldest()
	}
	d.ring[(d.head+d.n)%len(d.ring)] = dedupSlot{hash: h, arrival: arrival}
	d.n++
	if d.counts != nil {
		d.counts[h]++
	}
}

// forgetBefore applies WindowMs relative to the newest arrival seen.
func (d *Dedup) forgetBefore(arrival int64) {
	if d.opts.WindowMs <= 0 {
		return
	}
	d.newest = max(d.newest, arrival)
	for d.n > 0 && d.ring[d.head].arrival < d.newest-d.opts.WindowMs {
		d.forgetOldest()
	}
}

func (d *Dedup) forgetOldest() {
	if d.counts != nil {
		s := d.ring[d.head]
		if c := d.counts[s.hash]; c <= 1 {
			delete(d.counts, s.hash)
		} else {
			d.counts[s.hash] = c - 1
		}
	}
	d.head = (d.head + 1) % len(d.ring)
	d.n--
}
