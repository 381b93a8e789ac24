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

// resendWindows is how many in-flight windows of a resumed connection's
// first messages are matched against the unacknowledged tail. The broker
// re-sends its unacknowledged messages first (MQTT 3.1.1 §4.4), at most one
// window of them, but a broker may deliver live messages among them (aedes
// does, from another code path): a second window leaves room for those.
const resendWindows = 2

// session is what a Dedup knows of one broker session's connections.
type session struct {
	conn uint32 // current connection; 0 before the first
	seen int    // messages received on it
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

// recent appends the ring's hashes to dst.
func (s *session) recent(dst []uint64) []uint64 {
	for i := range s.n {
		dst = append(dst, s.ring[(s.head+i)%len(s.ring)])
	}
	return dst
}

// resendTail is a multiset of hashes of logged entries the broker may not
// have seen acknowledged: each one absorbs at most one re-send.
type resendTail struct {
	h    []uint64 // sorted
	used []bool
	left int
}

func newResendTail(hs []uint64) *resendTail {
	slices.Sort(hs)
	return &resendTail{h: hs, used: make([]bool, len(hs)), left: len(hs)}
}

// take uses up an entry with hash h, reporting whether there was one.
func (t *resendTail) take(h uint64) bool {
	i, found := slices.BinarySearch(t.h, h)
	for ; found && i < len(t.h) && t.h[i] == h; i++ {
		if !t.used[i] {
			t.used[i] = true
			t.left--
			return true
		}
	}
	return false
}

// unused appends the hashes not used up to dst.
func (t *resendTail) unused(dst []uint64) []uint64 {
	for i, h := range t.h {
		if !t.used[i] {
			dst = append(dst, h)
		}
	}
	return dst
}

// resent records h as received from o and reports whether it is the
// broker's re-send of an entry in the session's unacknowledged tail (using
// that entry up).
func (d *Dedup) resent(o Origin, h uint64) bool {
	if d.opts.MaxInflight <= 0 || o.Conn == 0 {
		return false
	}
	for int(o.Session) >= len(d.sessions) {
		d.sessions = append(d.sessions, session{})
	}
	s := &d.sessions[o.Session]
	if s.conn != o.Conn {
		d.connected(s, o)
	}
	s.seen++
	s.push(h, d.opts.MaxInflight)
	t := s.tail
	if t == nil {
		return false
	}
	if t.left == 0 || s.seen > resendWindows*d.opts.MaxInflight {
		s.tail = nil // matching ends: the re-sends came first
		return false
	}
	return t.take(h)
}

// connected starts connection o of session s. On a resumed session the
// broker re-sends what the previous connection received without the broker
// seeing the ack: at most the last MaxInflight messages it received (the
// ring), plus what the previous tail still held if that connection ended
// before its matching did (its re-sends were not all received either). The
// first connection of a session in this process takes the tail rebuilt
// from the log (Load). Without a resumed session the broker re-sends
// nothing.
func (d *Dedup) connected(s *session, o Origin) {
	var tail *resendTail
	switch {
	case !o.Resumed:
	case s.conn == 0:
		tail = d.restart
	default:
		var hs []uint64
		if s.tail != nil && s.tail.left > 0 {
			hs = s.tail.unused(hs)
		}
		hs = s.recent(hs) // newest last: a cut below drops the oldest
		hs = hs[max(len(hs)-resendWindows*d.opts.MaxInflight, 0):]
		if len(hs) > 0 {
			tail = newResendTail(hs)
		}
	}
	s.conn, s.seen, s.head, s.n, s.tail = o.Conn, 0, 0, 0, tail
}
