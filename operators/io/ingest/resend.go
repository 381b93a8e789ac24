package ingest

import "slices"

// Origin is where a message came from, for recognizing a broker's re-sends
// that carry no DUP flag. The zero Origin is unknown (the embedded broker,
// files): such messages are never taken for re-sends.
type Origin struct {
	// Session is the broker session the message was received in: 0 for a
	// source with one connection, i for connection i of a shared
	// subscription (each has its own client id and session).
	Session uint16
	// Conn numbers the session's connections in this process, from 1; it
	// grows with every (re)connect.
	Conn uint32
	// Resumed: the broker resumed the session on this connection (CONNACK
	// session present), so it re-sends what it had sent on the previous
	// connection and not seen acknowledged.
	Resumed bool
}

// ResendSpanMs is how long, in arrival time after the last message of the
// connection an entry was received on, the broker may still re-send it
// without DUP and be recognized. A broker re-sends what it had not seen
// acknowledged when the session resumes, but not necessarily first: aedes
// restores the subscription before it streams its stored queue, so live
// messages come ahead of the re-sends (seen 9,800 messages and 5 s into a
// connection), and a connection that ends before the stream reaches them
// leaves them for the next one: under load, with the agent killed five
// times in 75 s, a reading came back four connections and 63 s after the
// one it was received on. Five minutes leaves room for that; each entry still
// absorbs one message only, and the tail is bounded by resendCarry.
const ResendSpanMs = 5 * 60_000

// resendCarry bounds a session's tail at this many in-flight windows: the
// last window of each of its recent connections whose re-sends have not
// all come back (a connection cut before the broker's stream reached them
// leaves them to the next one).
const resendCarry = 8

// session is what a Dedup knows of one broker session's connections.
type session struct {
	conn uint32 // current connection; 0 before the first
	last int64  // arrival of the latest message received on it
	// ring holds the hashes of the last MaxInflight messages received on
	// the current connection, kept or dropped: only those can be
	// unacknowledged at the broker, whose in-flight window stops sending
	// once MaxInflight messages wait for their acks.
	ring []uint64
	head int
	n    int
	tail *resendTail // what the broker may re-send on this connection
}

func (s *session) push(h uint64, size int) {
	if s.ring == nil {
		s.ring = make([]uint64, size)
	}
	if s.n < len(s.ring) {
		s.ring[(s.head+s.n)%len(s.ring)] = h
		s.n++
		return
	}
	s.ring[s.head] = h
	s.head = (s.head + 1) % len(s.ring)
}

// tailEntry is a logged entry the broker may not have seen acknowledged:
// its hash, and the arrival time until which a re-send of it is
// recognized (ResendSpanMs after its connection's last message).
type tailEntry struct {
	h     uint64
	until int64
}

// resendTail is a multiset of tail entries: each one absorbs at most one
// re-send.
type resendTail struct {
	e     []tailEntry // sorted by hash
	used  []bool
	left  int
	until int64 // the latest entry's until: matching ends after it
}

func newResendTail(es []tailEntry) *resendTail {
	slices.SortFunc(es, func(a, b tailEntry) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return int(a.until - b.until)
	})
	t := &resendTail{e: es, used: make([]bool, len(es)), left: len(es)}
	for _, e := range es {
		t.until = max(t.until, e.until)
	}
	return t
}

// take uses up an entry with hash h still recognized at arrival, the one
// expiring first, reporting whether there was one.
func (t *resendTail) take(h uint64, arrival int64) bool {
	i, _ := slices.BinarySearchFunc(t.e, h, func(e tailEntry, h uint64) int {
		switch {
		case e.h < h:
			return -1
		case e.h > h:
			return 1
		}
		return 0
	})
	for ; i < len(t.e) && t.e[i].h == h; i++ {
		if !t.used[i] && t.e[i].until >= arrival {
			t.used[i] = true
			t.left--
			return true
		}
	}
	return false
}

// unused appends the entries not used up and still recognized at arrival
// to dst.
func (t *resendTail) unused(dst []tailEntry, arrival int64) []tailEntry {
	for i, e := range t.e {
		if !t.used[i] && e.until >= arrival {
			dst = append(dst, e)
		}
	}
	return dst
}

// resent records h as received from o at arrival and reports whether it is
// the broker's re-send of an entry in the session's unacknowledged tail
// (using that entry up).
func (d *Dedup) resent(o Origin, h uint64, arrival int64) bool {
	if d.opts.MaxInflight <= 0 || o.Conn == 0 {
		return false
	}
	for int(o.Session) >= len(d.sessions) {
		d.sessions = append(d.sessions, session{})
	}
	s := &d.sessions[o.Session]
	if s.conn != o.Conn {
		d.connected(s, o, arrival)
	}
	s.last = max(s.last, arrival)
	s.push(h, d.opts.MaxInflight)
	t := s.tail
	if t == nil {
		return false
	}
	if t.left == 0 || arrival > t.until {
		s.tail = nil // matching ends: every entry came back or expired
		return false
	}
	return t.take(h, arrival)
}

// connected starts connection o of session s, whose first message arrived
// at arrival. On a resumed session the broker re-sends what the previous
// connection received without the broker seeing the ack: at most the last
// MaxInflight messages it received (the ring), recognized for ResendSpanMs
// after its last one, plus what the previous tail still holds unused and
// unexpired (that connection ended before the broker's stream reached
// them), at most resendCarry windows, the newest. The first connection of
// a session in this process takes the tail rebuilt from the log (Load).
// Without a resumed session the broker re-sends nothing.
func (d *Dedup) connected(s *session, o Origin, arrival int64) {
	var tail *resendTail
	switch {
	case !o.Resumed:
	case s.conn == 0:
		tail = d.restart
	default:
		var es []tailEntry
		if s.tail != nil && s.tail.left > 0 {
			es = s.tail.unused(es, arrival)
			slices.SortStableFunc(es, func(a, b tailEntry) int { return int(a.until - b.until) })
		}
		until := s.last + ResendSpanMs
		for i := range s.n {
			es = append(es, tailEntry{h: s.ring[(s.head+i)%len(s.ring)], until: until})
		}
		// Newest last: a cut drops the oldest.
		es = es[max(len(es)-resendCarry*d.opts.MaxInflight, 0):]
		if len(es) > 0 {
			tail = newResendTail(es)
		}
	}
	s.conn, s.head, s.n, s.tail = o.Conn, 0, 0, tail
}
