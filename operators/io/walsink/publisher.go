package walsink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/operators/io/mqtt5"

	"github.com/eddy-edge/eddy/operators/io/walsink/qos2"
)

// runPublisher is the session's driver: it connects with exponential
// backoff, resumes the session, and publishes committed data in order,
// until Close.
func (s *Sink) runPublisher() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closeCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := s.opts.ReconnectMin
	probed := s.q1 != nil // the window is the QoS 2 session's
	version := s.opts.ProtocolVersion
	for {
		if !probed && version == 4 {
			probed = s.learnLimits(ctx)
		}
		conn, info, err := dial(ctx, &s.opts, version)
		if errors.Is(err, errV5Refused) {
			// Said once: the rest of the run speaks 3.1.1, at once.
			version = 4
			s.version.Store(4)
			s.log.Warn("walsink: the broker refuses MQTT 5 (its CONNACK: unsupported protocol version); speaking MQTT 3.1.1 to it for the rest of this run",
				"broker", s.opts.Broker)
			continue
		}
		if errors.Is(err, errV5Closed) {
			// A broker that closes an MQTT 5 CONNECT unanswered may not
			// speak 5, or may be going down: 3.1.1 at once, kept for the
			// run only if the broker accepts it.
			if c4, info4, err4 := dial(ctx, &s.opts, 4); err4 == nil {
				version = 4
				s.log.Warn("walsink: the broker closed the MQTT 5 CONNECT without a CONNACK and accepts MQTT 3.1.1; speaking MQTT 3.1.1 to it for the rest of this run",
					"broker", s.opts.Broker)
				conn, info, err = c4, info4, nil
			}
		}
		if err == nil {
			s.version.Store(int32(info.version))
		}
		var refused *connackError
		switch {
		case errors.As(err, &refused):
			s.setRefusal(refusalConnack, refused.Error())
		case err == nil && s.refuseMaxQoS(info):
			conn.Close()
			err = errMaxQoS
		case err == nil:
			s.logSession(info.present)
			s.setRefusal(refusalConnack, "")
			s.applyLimits(info)
			// Logged first: whoever sees Connected finds the line too.
			s.log.Info("walsink: connected", "broker", s.opts.Broker, "session_present", info.present, "protocol_version", info.version)
			s.connected.Store(true)
			started := time.Now()
			s.refusals.connected()
			window := s.sess.Window()
			s.answers = 0
			err = s.serve(conn, info.version)
			conn.Close()
			open := s.sess.Inflight()
			unreleased := s.sess.Unreleased()
			s.sess.Disconnected()
			s.connected.Store(false)
			if time.Since(started) > s.opts.ReconnectMax {
				backoff = s.opts.ReconnectMin
			}
			closedByBroker := err != nil && !errors.Is(err, errFatal) && !s.closing()
			// MQTT 5 names its limits and refusals (CONNACK, reason
			// codes): the guesses below are 3.1.1's.
			v311 := info.version == 4
			if closedByBroker && v311 && s.q1 == nil && s.win.closed(open, s.answers) {
				s.sess.SetWindow(s.win.cur)
				s.window.Store(int64(s.win.cur))
				s.log.Warn("walsink: the broker closed the connection with flows open; in-flight window lowered (MQTT 3.1.1 announces no limit)",
					"window", s.win.cur, "was", window, "open_flows", open, "answers", s.answers,
					"published_again", s.sess.Unreleased()-unreleased, "max_inflight", s.opts.MaxInflight)
			}
			// At QoS 2, a refusal is named only once a window of one
			// flow fails too: closes with more open may be a limit.
			if closedByBroker && v311 && (s.q1 != nil || window == 1) && s.refusals.closed(time.Now()) {
				if s.q1 == nil {
					s.setRefusal(refusalQoS, ErrQoS2Refused.Error()+
						`; results stay in the WAL, undelivered: set qos = 1 on this sink (exactly once with ids: no loss, order per key, repeats only of the unacknowledged window, each with the same id), or allow QoS 2 on the broker`)
				} else {
					s.setRefusal(refusalQoS, ErrPublishRefused.Error()+
						"; results stay in the WAL, undelivered: check the broker's policy for this client id and topic, and its payload limit")
				}
			}
		}
		if errors.Is(err, errFatal) {
			s.log.Error("walsink: publisher stopped", "err", err)
			return
		}
		if s.Stats().Refusal == "" && s.downgraded {
			// Gone only by another refusal in between; say it again.
			s.setRefusal(refusalDowngrade, downgradeRefusal)
		}
		select {
		case <-s.closeCh:
			return
		default:
		}
		if s.Stats().Refusal != "" {
			// Said once, at Error, when it began.
			s.log.Debug("walsink: broker connection failed; retrying", "err", err, "backoff", backoff)
		} else {
			s.log.Warn("walsink: broker connection failed; retrying", "err", err, "backoff", backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-s.closeCh:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, s.opts.ReconnectMax)
	}
}

// closing reports whether Close was called.
func (s *Sink) closing() bool {
	select {
	case <-s.closeCh:
		return true
	default:
		return false
	}
}

// learnLimits asks the broker for its in-flight limit on an MQTT 5
// connection of its own (probeLimits) and caps the window at it. It
// reports false when the broker could not be reached, to be asked again.
func (s *Sink) learnLimits(ctx context.Context) bool {
	lim, err := probeLimits(ctx, &s.opts)
	var dialErr *dialError
	switch {
	case errors.As(err, &dialErr):
		return false
	case err != nil:
		s.log.Debug("walsink: the broker announces no limits (MQTT 5 probe)", "err", err)
		return true
	}
	if s.win.announce(lim.receiveMax) {
		s.sess.SetWindow(s.win.cur)
		s.window.Store(int64(s.win.cur))
		s.log.Info("walsink: in-flight window set to the broker's announced limit (MQTT 5 Receive Maximum), below max_inflight",
			"window", s.win.cur, "max_inflight", s.opts.MaxInflight)
	} else {
		s.log.Debug("walsink: broker limits", "receive_maximum", lim.receiveMax, "maximum_qos", lim.maxQoS)
	}
	return true
}

// errMaxQoS ends a connection whose broker announced a Maximum QoS below
// the sink's QoS: nothing is published on it (the refusal says why).
var errMaxQoS = errors.New("walsink: the broker's Maximum QoS is below the sink's QoS")

// refuseMaxQoS names, at connect time and before any publish, a broker
// whose MQTT 5 CONNACK announces a Maximum QoS below the sink's QoS, and
// reports whether it did. The connection is then closed and tried again
// with backoff (the broker's settings may change); the refusal is logged
// once, when it begins.
func (s *Sink) refuseMaxQoS(info connackInfo) bool {
	if info.version != 5 || info.limits.maxQoS >= int(s.opts.QoS) {
		return false
	}
	msg := fmt.Sprintf("walsink: the broker announces Maximum QoS %d in its MQTT 5 CONNACK and this sink publishes at qos = %d: nothing is published; results stay in the WAL, undelivered",
		info.limits.maxQoS, s.opts.QoS)
	if info.limits.maxQoS == 1 {
		msg += ": set qos = 1 on this sink (exactly once with ids: no loss, order per key, repeats only of the unacknowledged window, each with the same id), or allow QoS 2 on the broker (mosquitto: max_qos 2)"
	} else {
		msg += ": allow QoS 1 or 2 on the broker (mosquitto: max_qos)"
	}
	s.setRefusal(refusalConnack, msg)
	return true
}

// applyLimits takes what an MQTT 5 CONNACK announced: its Receive Maximum
// caps the window (max_inflight above it is lowered, said once: not again
// per connection while the broker announces the same), and its Maximum
// Packet Size bounds the messages published (fill). A 3.1.1 connection
// announces nothing; the limits then stay those the probe learnt.
func (s *Sink) applyLimits(info connackInfo) {
	if info.version != 5 {
		s.maxPacket.Store(0)
		s.aliasMax = 0
		return
	}
	lim := info.limits
	s.maxPacket.Store(lim.maxPacket)
	s.aliasMax = lim.topicAliasMax
	if s.q1 != nil {
		s.q1.max = s.opts.MaxInflight
		if lim.receiveMax > 0 {
			s.q1.max = min(s.q1.max, lim.receiveMax)
		}
		s.window.Store(int64(s.q1.max))
		if s.q1.max < s.opts.MaxInflight && lim.receiveMax != s.loggedRecvMax {
			s.loggedRecvMax = lim.receiveMax
			s.log.Info("walsink: in-flight window lowered to the broker's Receive Maximum (MQTT 5 CONNACK), below max_inflight",
				"window", s.q1.max, "max_inflight", s.opts.MaxInflight)
		}
		return
	}
	if s.win.announce(lim.receiveMax) {
		s.sess.SetWindow(s.win.cur)
		s.window.Store(int64(s.win.cur))
	}
	if lim.receiveMax > 0 && lim.receiveMax < s.opts.MaxInflight && lim.receiveMax != s.loggedRecvMax {
		s.loggedRecvMax = lim.receiveMax
		s.log.Info("walsink: in-flight window lowered to the broker's Receive Maximum (MQTT 5 CONNACK), below max_inflight",
			"window", s.win.cur, "receive_maximum", lim.receiveMax, "max_inflight", s.opts.MaxInflight)
	}
	s.log.Debug("walsink: broker limits", "receive_maximum", lim.receiveMax, "maximum_qos", lim.maxQoS,
		"maximum_packet_size", lim.maxPacket, "topic_alias_maximum", lim.topicAliasMax)
}

// logSession says what a CONNACK's session present flag means for the
// open flows: the broker kept their state (present = 1), or it answers
// present = 0 — harmless with no flow open (some brokers, aedes among
// them, answer so to a client without subscriptions), else those flows'
// QoS 2 state at the broker is gone.
func (s *Sink) logSession(present bool) {
	if present || s.q1 != nil {
		return
	}
	var publishing, releasing int
	s.flowsBuf = s.sess.OpenFlows(s.flowsBuf[:0])
	for _, r := range s.flowsBuf {
		if r.Step == qos2.StepPublishSent {
			publishing++
		} else {
			releasing++
		}
	}
	if publishing+releasing == 0 {
		s.log.Info("walsink: the broker answered session present = 0; no flow was open, nothing to resend")
		return
	}
	s.log.Warn("walsink: the broker answered session present = 0 with flows open: it has no QoS 2 state for them. "+
		"Unacknowledged ones are published again (a broker that had delivered them on receipt delivers them twice); "+
		"acknowledged ones get PUBREL again (a broker that had not delivered them yet lost them)",
		"published_again", publishing, "released_again", releasing)
}

// errFatal marks a WAL failure: the session's records may not be durable,
// so nothing more may be sent.
var errFatal = errors.New("walsink: WAL failed")

// serve runs one connection until it fails or the sink closes: it sends
// what the session has ready (sendReady), then waits for the next event
// (awaitEvent), and again.
func (s *Sink) serve(conn *brokerConn, version byte) error {
	quit := make(chan struct{})
	defer close(quit)
	l, err := s.openLink(conn, version, quit)
	if err != nil {
		return err
	}
	defer l.stopTimers()
	for {
		wait, holdC, again, err := s.sendReady(l)
		if err != nil {
			return err
		}
		if again {
			// fill stopped at a message to dead-letter behind records
			// now written: go on at once, not at the next event.
			continue
		}
		if closed, err := s.awaitEvent(l, wait, holdC); closed || err != nil {
			return err
		}
	}
}

// link is what serve keeps of one connection: the packets read from it,
// its writer, and the timers of the keepalive, the drain rate and the
// group commit.
type link struct {
	conn       net.Conn
	pw         *packetWriter
	in         chan incoming
	dead       *atomic.Bool
	clock      *readClock
	tick       *time.Ticker
	rate       *tokenBucket
	rateTimer  *time.Timer
	holdTimer  *time.Timer
	holdUntil  time.Time // zero: records are not being held
	lastAnswer time.Time // of the last packet from the broker
}

// openLink starts reading conn (until quit closes), tells the session it
// is connected, re-sends the QoS 1 window, and starts the timers.
func (s *Sink) openLink(conn *brokerConn, version byte, quit chan struct{}) (*link, error) {
	l := &link{conn: conn, in: make(chan incoming, 256), dead: new(atomic.Bool), clock: conn.clock}
	if l.clock == nil {
		l.clock = newReadClock()
	}
	go readPackets(conn, version, l.in, quit, l.dead, l.clock)
	go func() {
		// Close ends a write blocked on a broker that stopped reading at
		// once, rather than after the write deadline (the keepalive).
		select {
		case <-s.closeCh:
			_ = conn.SetDeadline(time.Now())
		case <-quit:
		}
	}()
	var w io.Writer = conn.Conn
	if conn.v5 != nil {
		w = conn.v5
	}
	l.pw = newPacketWriter(w, version, s.aliasMax)
	if version == 5 && s.opts.MessageExpiry > 0 {
		l.pw.expiry = s.expiryInterval
	}
	s.sess.Connected(time.Now())
	s.retried.Store(s.sess.Retried())
	if s.q1 != nil {
		if err := s.resendQoS1(l.pw); err != nil {
			return nil, fmt.Errorf("walsink: send: %w", err)
		}
	}

	l.tick = time.NewTicker(max(s.opts.KeepAlive/4, 100*time.Millisecond))
	l.rate = newTokenBucket(s.opts.DrainRate, time.Now())
	l.rateTimer = time.NewTimer(time.Hour)
	l.holdTimer = time.NewTimer(time.Hour)
	l.lastAnswer = time.Now()
	return l, nil
}

func (l *link) stopTimers() {
	l.tick.Stop()
	l.rateTimer.Stop()
	l.holdTimer.Stop()
}

// sendReady starts the flows the window and the drain rate allow and
// writes their records, or holds the records for the group commit. It
// returns how long the drain rate makes the next message wait (0: none
// waits), the hold's timer channel (nil: not holding), and whether to go
// on at once.
func (s *Sink) sendReady(l *link) (wait time.Duration, holdC <-chan time.Time, again bool, err error) {
	// curMu spans both: a flow started by fill must reach the state
	// (flushReady) before drop_oldest or segment deletion looks at it.
	s.curMu.Lock()
	defer s.curMu.Unlock()
	switch {
	case s.q1 != nil:
		wait, err = s.fillQoS1(l.rate, l.conn, l.pw)
	case s.sess.Releasing() > 0 && time.Since(l.lastAnswer) < groupCommitHold:
		// PUBRELs are out: new flows wait for their PUBCOMPs, so the
		// window's flows start together and their PUBRECs share one
		// fsync. Flows started as each slot frees would split the
		// window into groups in opposite phases, each with its own
		// fsync (twice the fsyncs at 20 in flight). A broker that
		// stops answering holds them back by at most the bound
		// (checked again at the next event or tick).
	default:
		wait, err = s.fill(l.rate)
	}
	if err == nil {
		// Group commit: while answers to packets already out are on
		// their way, hold the records (at most groupCommitHold) so one
		// write and one fsync take the whole window's steps. Records
		// that need no fsync (new flows' PUBLISH steps after PUBCOMPs)
		// are held too: the window's flows then move in step, and its
		// PUBRECs come back together, to share one fsync.
		now := time.Now()
		if s.q1 == nil && s.sess.HasRecords() && s.sess.Awaiting() > 0 {
			if l.holdUntil.IsZero() {
				l.holdUntil = now.Add(groupCommitHold)
			}
		} else {
			l.holdUntil = time.Time{}
		}
		if !l.holdUntil.IsZero() && now.Before(l.holdUntil) {
			l.holdTimer.Reset(l.holdUntil.Sub(now))
			holdC = l.holdTimer.C
		} else {
			l.holdUntil = time.Time{}
			err = s.flushReady(l.conn, l.pw, l.dead) // at QoS 1: keepalive only
		}
	}
	again = s.fillAgain && holdC == nil
	s.fillAgain = false
	return wait, holdC, again, err
}

// awaitEvent waits for the next thing to act on: a packet from the
// broker, the keepalive's tick, new work, the drain rate's or the hold's
// timer, or Close (closed). It steps the packets read.
func (s *Sink) awaitEvent(l *link, wait time.Duration, holdC <-chan time.Time) (closed bool, err error) {
	var rateC <-chan time.Time
	if wait > 0 {
		l.rateTimer.Reset(wait)
		rateC = l.rateTimer.C
	}
	select {
	case ev := <-l.in:
		l.lastAnswer = time.Now()
		if err := s.step(ev); err != nil {
			return false, err
		}
		// Take every packet already here, so their steps share one
		// WAL write and fsync.
		if _, err := s.stepQueued(l.in); err != nil {
			return false, err
		}
		if !l.holdUntil.IsZero() {
			// Answers are coming: hold on for the rest (at most one
			// bound per answer still awaited, since nothing new is
			// sent while holding).
			l.holdUntil = time.Now().Add(groupCommitHold)
		}
	case <-l.tick.C:
		// The keepalive rule: any bytes from the broker prove it
		// alive, not only a PINGRESP (package qos2, Tick). Packets
		// already read are taken first (select may pick the tick over
		// them), and the reader's clock counts bytes not yet taken:
		// the broker's answers waiting here must not look like
		// silence.
		if n, err := s.stepQueued(l.in); err != nil {
			return false, err
		} else if n > 0 {
			l.lastAnswer = time.Now()
		}
		s.sess.Received(l.clock.latest())
		s.sess.Tick(time.Now())
	case <-s.work:
	case <-rateC:
	case <-holdC:
	case <-s.closeCh:
		return true, nil
	}
	if wait > 0 && !l.rateTimer.Stop() {
		select {
		case <-l.rateTimer.C:
		default:
		}
	}
	if holdC != nil && !l.holdTimer.Stop() {
		select {
		case <-l.holdTimer.C:
		default:
		}
	}
	return false, nil
}

// groupCommitHold bounds how long flow records wait for the next answer to
// packets already sent before they are written and synced without the
// rest: a broker that stops answering some flows delays the others by at
// most this much per fsync after its last answer. The hold ends as soon as
// every answer is in, so the bound matters only when answers are late: 5
// ms from the start of the hold, the bound before, ran out on a loaded
// 2-core machine (load average 30) in about half the runs, doubling the
// fsyncs at 20 in flight (BENCHMARKS.md, WAL sink write amplification).
const groupCommitHold = 20 * time.Millisecond

// stepQueued steps every packet already read and waiting in in, and
// returns how many.
func (s *Sink) stepQueued(in <-chan incoming) (int, error) {
	for n := 0; ; n++ {
		select {
		case ev := <-in:
			if err := s.step(ev); err != nil {
				return n, err
			}
		default:
			return n, nil
		}
	}
}

func (s *Sink) step(ev incoming) error {
	if ev.err != nil {
		var de *disconnectError
		if errors.As(ev.err, &de) {
			s.countReason("disconnect", de.code)
		}
		return ev.err
	}
	if ev.hasReason && ev.reason != 0 {
		if err := s.answerReason(ev); err != nil {
			return err
		}
	}
	if ev.puback || ev.typ == qos2.Pubrec || ev.typ == qos2.Pubcomp {
		s.answers++
		if s.answers == 1 && s.q1 == nil && s.win.firstAnswer() {
			s.sess.SetWindow(s.win.cur)
			s.window.Store(int64(s.win.cur))
			s.log.Info("walsink: the broker answers again; in-flight window back at its announced limit", "window", s.win.cur)
		}
		s.refusals.ackReceived()
		s.setRefusal(refusalQoS, "")
	}
	if ev.puback {
		if s.q1 == nil {
			// The broker took the message at QoS 1 (RabbitMQ's MQTT
			// plugin does): it has it, once, and keeps no QoS 2 state, so
			// the flow is done. No new flow starts: every one would be
			// QoS 1 without this mode's bounds.
			if !s.downgraded {
				s.downgraded = true
				s.setRefusal(refusalDowngrade, downgradeRefusal)
			}
			return s.sess.Step(qos2.Puback, ev.id)
		}
		s.ackQoS1(ev.id)
		return nil
	}
	return s.sess.Step(ev.typ, ev.id)
}

// answerReason counts and logs the reason code of an MQTT 5 PUBACK, PUBREC
// or PUBCOMP other than success. One of 0x80 and above on a PUBACK or
// PUBREC is the broker refusing the message (not authorized, quota
// exceeded, packet too large, …): it is named as the sink's refusal, and
// the connection dropped, so the message stays in the WAL and is published
// again after the reconnect's backoff, never lost. 0x10 "no matching
// subscribers" is success: the broker took the message.
func (s *Sink) answerReason(ev incoming) error {
	packet := "pubcomp"
	switch {
	case ev.puback:
		packet = "puback"
	case ev.typ == qos2.Pubrec:
		packet = "pubrec"
	case ev.typ != qos2.Pubcomp:
		return nil
	}
	s.countReason(packet, ev.reason)
	name := mqtt5.ReasonName(ev.reason)
	if ev.reason < 0x80 || packet == "pubcomp" {
		// 0x10 on PUBACK or PUBREC, or 0x92 "packet identifier not
		// found" on a PUBCOMP (a flow the broker had finished): no error.
		s.log.Debug("walsink: broker answer", "packet", packet, "reason", name, "id", ev.id)
		return nil
	}
	s.setRefusal(refusalQoS, fmt.Sprintf("walsink: the broker refuses this sink's publishes: %s reason %s (%#02x); results stay in the WAL, undelivered, and are published again after a reconnect: check the broker's policy for this client id and topic, and its limits", packet, name, ev.reason))
	return fmt.Errorf("walsink: the broker refused a publish: %s reason %s (%#02x)", packet, name, ev.reason)
}

// countReason counts an MQTT 5 reason code in Stats.Reasons and reports it
// to Options.OnReason.
func (s *Sink) countReason(packet string, code byte) {
	name := mqtt5.ReasonName(code)
	s.mu.Lock()
	if s.reasons == nil {
		s.reasons = map[[2]string]uint64{}
	}
	s.reasons[[2]string{packet, name}]++
	s.mu.Unlock()
	if s.opts.OnReason != nil {
		s.opts.OnReason(packet, name)
	}
}

// refusalKind is what a refusal is about: each kind is cleared by its own
// evidence (a CONNACK accepted; a PUBREC or PUBCOMP).
type refusalKind int

const (
	refusalNone refusalKind = iota
	refusalConnack
	refusalQoS
	// refusalDowngrade: the broker answered a QoS 2 PUBLISH with PUBACK.
	// It lasts until Close: the sink publishes nothing more.
	refusalDowngrade
)

// downgradeRefusal is Stats.Refusal for a broker that downgrades QoS 2.
const downgradeRefusal = "walsink: the broker downgrades QoS 2 to 1: set qos = 1 on this sink " +
	"(it answered a QoS 2 PUBLISH with PUBACK: it took the message once, at QoS 1, and keeps no QoS 2 state); " +
	"results stay in the WAL, undelivered, until then"

// setRefusal records (msg non-empty) or clears (msg empty) a refusal of
// kind, logging at Error when one begins or changes and at Info when it
// ends. Clearing a refusal of another kind does nothing.
func (s *Sink) setRefusal(kind refusalKind, msg string) {
	s.mu.Lock()
	prevKind, prev := s.refusalKind, s.refusal
	if msg == "" && prevKind != kind {
		s.mu.Unlock()
		return
	}
	s.refusal, s.refusalKind = msg, kind
	if msg == "" {
		s.refusalKind = refusalNone
	}
	s.mu.Unlock()
	switch {
	case msg != "" && msg != prev:
		s.log.Error(msg, "broker", s.opts.Broker, "client_id", s.opts.ClientID)
	case msg == "" && prev != "":
		s.log.Info("walsink: the broker accepts the session again", "broker", s.opts.Broker)
	}
}

// fill starts flows for committed messages while the session and the drain
// rate allow (the caller holds it back while PUBRELs are out: see sendReady). It returns how long to wait for the next token when the rate
// stopped it with work left. curMu is held; the state learns of the new
// flows when flushReady applies their records.
func (s *Sink) fill(rate *tokenBucket) (time.Duration, error) {
	for s.sess.CanPublish() && !s.downgraded {
		d, ok, err := s.cur.peek()
		if err != nil {
			return 0, fmt.Errorf("%w: read: %w", errFatal, err)
		}
		if !ok {
			return 0, nil
		}
		s.mu.Lock()
		skip := d.seq < s.st.nextAssign || s.st.isAborted(d.seq)
		publishable := d.seq <= s.st.committedSeq
		if skip {
			s.st.nextAssign = max(s.st.nextAssign, d.seq+1)
		}
		s.mu.Unlock()
		if skip {
			s.cur.advance()
			continue
		}
		if reason, detail := s.deadReason(d.seq, d.topic, d.payload); publishable && reason != "" {
			if s.sess.HasRecords() {
				// Its drop record must follow the records of the flows
				// started before it: fill again once they are written.
				s.fillAgain = true
				return 0, nil
			}
			if err := s.deadLetter(d.seq, d.topic, d.payload, reason, detail); err != nil {
				return 0, err
			}
			s.cur.advance()
			continue
		}
		if !publishable || !s.sess.CanPublishSeq(d.seq) {
			// Not committed yet, or its packet id is still held by an
			// open flow: the next event looks again.
			return 0, nil
		}
		if wait := rate.take(time.Now()); wait > 0 {
			return wait, nil
		}
		s.sess.Publish(d.seq, d.topic, d.payload, d.retain)
		s.cur.advance()
	}
	return 0, nil
}

// Reasons the publisher dead-letters a message with.
const (
	reasonTooLarge = "too_large"
	reasonExpired  = "expired"
)

// deadReason says why message seq must not be published, if it must not:
// its PUBLISH would be larger than the broker's Maximum Packet Size (MQTT
// 5), or its wait since its commit passed Options.MessageExpiry.
func (s *Sink) deadReason(seq uint64, topic, payload []byte) (reason, detail string) {
	if limit := s.maxPacket.Load(); limit > 0 {
		if size := publishSizeV5(topic, payload, s.opts.MessageExpiry > 0); size > limit {
			return reasonTooLarge, fmt.Sprintf("its MQTT 5 PUBLISH of %d bytes is larger than the broker's Maximum Packet Size (%d bytes)", size, limit)
		}
	}
	if s.opts.MessageExpiry > 0 {
		if waited, ok := s.waited(seq); ok && waited >= s.opts.MessageExpiry {
			return reasonExpired, fmt.Sprintf("it waited %v since its commit, message_expiry is %v", waited.Round(time.Second), s.opts.MessageExpiry)
		}
	}
	return "", ""
}

// waited is how long message seq has waited since its commit (the commit
// record that made it publishable); ok is false when that is not known.
func (s *Sink) waited(seq uint64) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cts := s.st.commitTimes
	i, _ := slices.BinarySearchFunc(cts, seq, func(c commitTime, seq uint64) int { return cmp.Compare(c.seq, seq) })
	if i == len(cts) {
		return 0, false
	}
	return time.Since(time.Unix(0, cts[i].unixNano)), true
}

// expiryInterval is the Message Expiry Interval of message seq's PUBLISH
// now: Options.MessageExpiry less its wait since its commit, in whole
// seconds, at least 1 (a message past it is dead-lettered before its first
// PUBLISH; one already published goes out again, DUP, with what is left).
func (s *Sink) expiryInterval(seq uint64) uint32 {
	left := s.opts.MessageExpiry
	if waited, ok := s.waited(seq); ok {
		left -= waited
	}
	return uint32(max(1, (left+time.Second-1)/time.Second))
}

// deadLetter dead-letters message seq with reason (too_large: its PUBLISH
// is larger than the broker's Maximum Packet Size, which would close the
// connection over it on every retry; expired: it waited longer than
// message_expiry): it is never published, counted (Stats.TooLarge,
// Stats.Expired), logged, and taken out of the backlog. At QoS 2 a drop
// record, not synced, marks it (a crash before the record is durable
// dead-letters it again); at QoS 1 the acknowledged position moves past it.
// The caller advances the cursor. curMu is held.
func (s *Sink) deadLetter(seq uint64, topic, payload []byte, reason, detail string) error {
	bytes := int64(len(topic) + len(payload))
	s.mu.Lock()
	if s.q1 == nil {
		s.buf = appendWords(s.buf[:0], kindDrop, seq, seq, 1, uint64(bytes))
		if _, err := s.appendLocked(s.buf); err != nil {
			s.failLocked(err)
			s.mu.Unlock()
			return fmt.Errorf("%w: %w", errFatal, err)
		}
		s.st.nextAssign = max(s.st.nextAssign, seq+1)
	}
	s.backlogMsgs--
	s.backlogBytes -= bytes
	if s.backlogMsgs <= 0 {
		s.wakeWritersLocked()
	}
	s.mu.Unlock()
	if reason == reasonExpired {
		s.expired.Add(1)
	} else {
		s.tooLarge.Add(1)
	}
	s.log.Warn("walsink: result dead-lettered", "reason", reason, "detail", detail, "topic", string(topic), "seq", seq)
	return nil
}

// flushReady persists the session's records (one write, one fsync when
// needed), then sends its packets: the ordering contract of package qos2.
func (s *Sink) flushReady(conn net.Conn, pw *packetWriter, dead *atomic.Bool) error {
	if !s.sess.HasReady() {
		return nil
	}
	rd := s.sess.Ready()
	defer s.sess.Advance()
	if len(rd.Records) > 0 {
		s.mu.Lock()
		s.buf = appendSteps(s.buf[:0], rd.Records)
		_, err := s.appendLocked(s.buf)
		if err == nil {
			for _, r := range rd.Records {
				s.st.applyStep(r)
			}
		}
		s.mu.Unlock()
		if err == nil && rd.MustSync {
			err = s.syncWAL()
		}
		if err != nil {
			s.fail(err)
			return fmt.Errorf("%w: %w", errFatal, err)
		}
	}
	var sendErr error
	if len(rd.Packets) > 0 && dead.Load() {
		// The broker closed the connection meanwhile (the fsync takes
		// longer than its FIN takes to arrive): PUBRECs just before a
		// close may be for messages it dropped, and a PUBREL that never
		// left keeps their flows able to publish again (qos2's
		// Disconnected).
		s.sess.DropPackets()
		rd.Packets = nil
		sendErr = errors.New("connection closed by the broker")
	}
	if len(rd.Packets) > 0 {
		_ = conn.SetWriteDeadline(time.Now().Add(s.opts.KeepAlive))
		for _, p := range rd.Packets {
			if p.Kind == qos2.PacketPublish {
				s.refusals.published(time.Now())
			}
			if sendErr = pw.write(p); sendErr != nil {
				break
			}
		}
		if sendErr == nil {
			sendErr = pw.bw.Flush()
		}
		s.sess.Sent(time.Now())
	}
	if n := len(rd.Completed); n > 0 {
		var bytes int64
		for _, c := range rd.Completed {
			bytes += int64(c.Bytes)
			if s.opts.onComplete != nil {
				s.opts.onComplete(c.Seq)
			}
		}
		s.delivered.Add(uint64(n))
		if s.q1 == nil && s.win.completed(n) {
			s.sess.SetWindow(s.win.cur)
			s.window.Store(int64(s.win.cur))
			if s.win.cur == s.win.limit() {
				s.log.Info("walsink: in-flight window back to its limit", "window", s.win.cur)
			} else {
				s.log.Debug("walsink: in-flight window grown", "window", s.win.cur, "limit", s.win.limit())
			}
		}
		s.mu.Lock()
		s.backlogMsgs -= int64(n)
		s.backlogBytes -= bytes
		if s.backlogMsgs <= 0 {
			if s.backlogMsgs < 0 && !s.warnedCount {
				// A bookkeeping bug (one was found in testing): it costs the disk
				// bound, not liveness, since a blocked Write goes on.
				s.warnedCount = true
				s.log.Error("walsink: backlog count below zero; max_disk is not enforced until it recovers",
					"backlog", s.backlogMsgs)
			}
			s.wakeWritersLocked()
		}
		err := s.collectLocked()
		s.mu.Unlock()
		if err != nil {
			s.fail(err)
			return fmt.Errorf("%w: %w", errFatal, err)
		}
	}
	if s.q1 == nil {
		s.inflight.Store(int64(s.sess.Inflight()))
	}
	if rd.Disconnect {
		return fmt.Errorf("walsink: keepalive expired: no PINGRESP, and nothing else from the broker for %v after the PINGREQ", s.opts.KeepAlive)
	}
	if sendErr != nil {
		return fmt.Errorf("walsink: send: %w", sendErr)
	}
	return nil
}

func (s *Sink) fail(err error) {
	s.mu.Lock()
	s.failLocked(err)
	s.mu.Unlock()
}

func (s *Sink) failLocked(err error) {
	if s.failed == nil {
		s.failed = fmt.Errorf("walsink: publisher stopped after a WAL failure: %w", err)
	}
}

// tokenBucket limits publishing to rate messages per second with a burst of
// a tenth of a second's worth (at least 1). rate 0 is unlimited.
type tokenBucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func newTokenBucket(rate float64, now time.Time) *tokenBucket {
	b := max(1, rate/10)
	return &tokenBucket{rate: rate, burst: b, tokens: b, last: now}
}

// take takes a token at now, or returns how long until one is there.
func (b *tokenBucket) take(now time.Time) time.Duration {
	if b.rate <= 0 {
		return 0
	}
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}
