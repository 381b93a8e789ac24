package walsink

import (
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/eddy-edge/eddy/operators/io/walsink/qos2"
)

// qos1Window is the QoS 1 publishing mode's in-flight window: the messages
// published and not yet PUBACKed, in seq order, each with its packet id and
// a copy of its topic and payload (for re-sending after a reconnect). It is
// pure (no I/O, no clock) and belongs to the publisher goroutine.
//
// Nothing of it is durable: the WAL records only the position below which
// every message is acknowledged (a kindResume record, written per batch of
// PUBACKs, not synced), and a restart publishes again from there: the
// window's messages, with the same payloads and so the same ids.
type qos1Window struct {
	max    int
	msgs   []qos1Msg // unacked, in seq order
	free   []qos1Msg // buffers to reuse
	nextID uint16
}

type qos1Msg struct {
	seq            uint64
	id             uint16
	retain         bool
	topic, payload []byte
}

func newQoS1Window(maxInflight int) *qos1Window {
	return &qos1Window{max: maxInflight, nextID: 1}
}

// canPublish reports whether another message may be in flight.
func (w *qos1Window) canPublish() bool { return len(w.msgs) < w.max }

// publish adds message seq (above every one in the window) and returns it
// with its new packet id; topic and payload are copied.
func (w *qos1Window) publish(seq uint64, topic, payload []byte, retain bool) *qos1Msg {
	if !w.canPublish() {
		panic("walsink: qos1 publish over the window")
	}
	if n := len(w.msgs); n > 0 && w.msgs[n-1].seq >= seq {
		panic(fmt.Sprintf("walsink: qos1 publish seq %d not above %d", seq, w.msgs[n-1].seq))
	}
	var m qos1Msg
	if n := len(w.free); n > 0 {
		m, w.free = w.free[n-1], w.free[:n-1]
	}
	m.seq, m.retain, m.id = seq, retain, w.takeID()
	m.topic = append(m.topic[:0], topic...)
	m.payload = append(m.payload[:0], payload...)
	w.msgs = append(w.msgs, m)
	return &w.msgs[len(w.msgs)-1]
}

// takeID cycles through 1..65535, skipping ids in flight.
func (w *qos1Window) takeID() uint16 {
	return qos2.TakeID(&w.nextID, func(id uint16) bool {
		return slices.ContainsFunc(w.msgs, func(m qos1Msg) bool { return m.id == id })
	})
}

// ack removes the message PUBACK id acknowledges; ok is false for an id not
// in flight (a late PUBACK from before a reconnect: ignored).
func (w *qos1Window) ack(id uint16) (seq uint64, bytes int, ok bool) {
	for i := range w.msgs {
		if w.msgs[i].id == id {
			m := w.msgs[i]
			copy(w.msgs[i:], w.msgs[i+1:])
			w.msgs = w.msgs[:len(w.msgs)-1]
			w.free = append(w.free, m)
			return m.seq, len(m.topic) + len(m.payload), true
		}
	}
	return 0, 0, false
}

// oldest is the lowest seq in flight; ok is false when none is.
func (w *qos1Window) oldest() (uint64, bool) {
	if len(w.msgs) == 0 {
		return 0, false
	}
	return w.msgs[0].seq, true
}

// inflight returns the window in seq order, for re-sending after a
// reconnect (with DUP set). Valid until the next publish or ack.
func (w *qos1Window) inflight() []qos1Msg { return w.msgs }

// openQoS1 starts the QoS 1 mode at Open: open QoS 2 flows of an earlier
// run at QoS 2 are abandoned, durably, and their messages (from the oldest
// on) published again at QoS 1 — the broker may have delivered some, so
// they may repeat, with their ids.
func (s *Sink) openQoS1() error {
	s.q1 = newQoS1Window(s.opts.MaxInflight)
	if len(s.st.flows) > 0 {
		from := s.st.nextAssign
		for seq := range s.st.flows {
			from = min(from, seq)
		}
		s.log.Warn("walsink: switching to QoS 1 with QoS 2 flows open; their messages are published again at QoS 1 and may repeat",
			"open_flows", len(s.st.flows), "from_seq", from)
		s.buf = appendWords(s.buf[:0], kindResume, from)
		if _, err := s.appendLocked(s.buf); err != nil {
			return err
		}
		if err := s.syncWAL(); err != nil {
			return fmt.Errorf("walsink: sync: %w", err)
		}
		s.st.applyResume(from)
	}
	s.q1next = s.st.nextAssign
	return nil
}

// resendQoS1 re-sends the window after a (re)connect, in order, DUP set.
func (s *Sink) resendQoS1(pw *packetWriter) error {
	msgs := s.q1.inflight()
	for i := range msgs {
		s.refusals.published(time.Now())
		if err := pw.writeQoS1(&msgs[i], true); err != nil {
			return err
		}
	}
	s.retried.Add(uint64(len(msgs)))
	return pw.bw.Flush()
}

// fillQoS1 publishes committed messages at QoS 1 while the window and the
// drain rate allow, then records the acknowledged position. It returns how
// long to wait for the next token when the rate stopped it. curMu is held.
func (s *Sink) fillQoS1(rate *tokenBucket, conn net.Conn, pw *packetWriter) (time.Duration, error) {
	var wait time.Duration
	sent := 0
	for s.q1.canPublish() {
		d, ok, err := s.cur.peek()
		if err != nil {
			return 0, fmt.Errorf("%w: read: %w", errFatal, err)
		}
		if !ok {
			break
		}
		s.mu.Lock()
		skip := d.seq < s.st.nextAssign || s.st.isAborted(d.seq)
		publishable := d.seq <= s.st.committedSeq
		s.mu.Unlock()
		if skip {
			s.cur.advance()
			s.q1next = max(s.q1next, d.seq+1)
			continue
		}
		if !publishable {
			break
		}
		if reason, detail := s.deadReason(d.seq, d.topic, d.payload); reason != "" {
			if err := s.deadLetter(d.seq, d.topic, d.payload, reason, detail); err != nil {
				return 0, err
			}
			s.cur.advance()
			s.q1next = d.seq + 1
			continue
		}
		if wait = rate.take(time.Now()); wait > 0 {
			break
		}
		m := s.q1.publish(d.seq, d.topic, d.payload, d.retain)
		s.cur.advance()
		s.q1next = d.seq + 1
		if sent == 0 {
			_ = conn.SetWriteDeadline(time.Now().Add(s.opts.KeepAlive))
			s.refusals.published(time.Now())
		}
		if err := pw.writeQoS1(m, false); err != nil {
			return 0, fmt.Errorf("walsink: send: %w", err)
		}
		sent++
	}
	if sent > 0 {
		if err := pw.bw.Flush(); err != nil {
			return 0, fmt.Errorf("walsink: send: %w", err)
		}
		s.sess.Sent(time.Now())
		s.inflight.Store(int64(len(s.q1.inflight())))
	}
	return wait, s.recordResume()
}

// ackQoS1 takes a PUBACK.
func (s *Sink) ackQoS1(id uint16) {
	seq, bytes, ok := s.q1.ack(id)
	if !ok {
		return
	}
	if s.opts.onComplete != nil {
		s.opts.onComplete(seq)
	}
	s.delivered.Add(1)
	s.inflight.Store(int64(len(s.q1.inflight())))
	s.mu.Lock()
	s.backlogMsgs--
	s.backlogBytes -= int64(bytes)
	if s.backlogMsgs <= 0 {
		s.wakeWritersLocked()
	}
	s.mu.Unlock()
}

// recordResume writes the acknowledged position when it moved (one small
// record per batch of PUBACKs, not synced: a process crash keeps it in the
// page cache; power loss may lose the last ones, which then repeat), and
// deletes segments that freed.
func (s *Sink) recordResume() error {
	done := s.q1next
	if oldest, ok := s.q1.oldest(); ok {
		done = oldest
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if done <= s.st.nextAssign {
		return nil
	}
	s.buf = appendWords(s.buf[:0], kindResume, done)
	if _, err := s.appendLocked(s.buf); err != nil {
		s.failLocked(err)
		return fmt.Errorf("%w: %w", errFatal, err)
	}
	s.st.applyResume(done)
	if err := s.collectLocked(); err != nil {
		s.failLocked(err)
		return fmt.Errorf("%w: %w", errFatal, err)
	}
	return nil
}
