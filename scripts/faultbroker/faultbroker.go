// Package faultbroker is a small MQTT 3.1.1 broker for tests that injects
// the faults real brokers show under load, on demand: blocks of messages
// already delivered and acknowledged sent again after a reconnect (with
// DUP=1 as mosquitto does, or without it as aedes does), blocks older than
// the client can remember, PINGRESPs held back while PUBLISH packets keep
// flowing, a connection that goes silent, a connection closed.
//
// It is enough of a broker for Eddy's MQTT source and for its exactly-once
// sink as a publisher: CONNECT/CONNACK with persistent sessions (session
// present), SUBSCRIBE with + and # filters, QoS 0, 1 and 2 PUBLISH from
// clients routed to the subscribed sessions, PINGREQ, DISCONNECT. A QoS 2
// PUBLISH is taken as mosquitto takes it: PUBREC, the message held under
// its packet id in the client's session (across its connections) and
// routed at the PUBREL, then PUBCOMP; a PUBLISH of an id already held is
// answered with PUBREC and routed no second time. Messages go to
// subscribers at QoS 1 (or 0 when subscribed at 0) with an in-flight
// window per session; a reconnecting session gets its unacknowledged
// messages again with DUP=1 first, as MQTT 3.1.1 asks. Retained messages,
// wills and authentication are not implemented. Packets are encoded and
// decoded with paho's packets package.
//
// Each message delivered to a session takes the session's next delivery
// sequence number (1, 2, ...); faults name messages by it. The broker keeps
// the last Options.History delivered messages of each session for re-sends.
//
// Start listens on a free loopback port; Stop closes every connection and
// returns once every goroutine of the broker has exited.
package faultbroker

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// Options configure a Broker; zero values take the defaults.
type Options struct {
	// Inflight is the most QoS 1 messages sent to a session and not yet
	// acknowledged (mosquitto's max_inflight_messages). Default 1000.
	Inflight int
	// History is how many delivered messages a session keeps for re-sends.
	// Default 1,000,000.
	History int
}

// Resend is a block of messages a session already delivered and had
// acknowledged, sent again on its client's next connection, before its
// unacknowledged messages and new ones. Only acknowledged messages still
// in the session's history are re-sent; each re-send takes a fresh packet
// id and must be acknowledged again.
type Resend struct {
	// Last, if positive, re-sends the last Last acknowledged messages.
	Last int
	// From and Count, when Count is positive (and Last is not), re-send
	// the acknowledged messages of delivery sequence From to From+Count-1.
	From, Count uint64
	// Dup sets the DUP flag on the re-sent PUBLISH packets (mosquitto);
	// without it they look like new messages (aedes).
	Dup bool
}

// Broker is a running fault-injecting broker.
type Broker struct {
	opts Options
	ln   net.Listener
	wg   sync.WaitGroup

	mu        sync.Mutex
	sessions  map[string]*session
	conns     map[*conn]struct{}
	pingDelay time.Duration
	stopped   bool
}

// message is one message routed to a session.
type message struct {
	topic   string
	payload []byte
}

// delivery is one PUBLISH a session sends or will send.
type delivery struct {
	seq    uint64 // the message's delivery sequence; 0 for QoS 0
	msg    message
	qos    byte
	dup    bool
	resend bool // a fault's re-send: its ack changes nothing
	id     uint16
	order  uint64 // when it was first sent, for re-sending in order
}

// session is a client id's state, kept across its connections.
type session struct {
	id      string
	filters map[string]byte // filter → granted QoS
	queue   []delivery      // not sent yet, in order
	// inflight are the sent QoS 1 deliveries not acknowledged, by packet
	// id.
	inflight map[uint16]delivery
	sends    uint64 // deliveries sent, for their order
	nextID   uint16
	idUsed   [65536]bool // packet ids taken until their PUBACK
	// history holds the last delivered messages: history[i] has sequence
	// histBase+i; acked says whether each was acknowledged.
	history  []message
	acked    []bool
	histBase uint64
	nextSeq  uint64
	resends  []Resend
	conn     *conn
	claim    *conn // the latest connection to CONNECT, owner once CONNACKed
	silent   bool
	// held are the client's incoming QoS 2 messages, by packet id, PUBRECed
	// and not released yet.
	held map[uint16]message
	// counters for tests
	sent, ackedN, resent, pings, connects int
}

// conn is one client connection.
type conn struct {
	b      *Broker
	nc     net.Conn
	w      *bufio.Writer
	wmu    sync.Mutex // guards w
	s      *session   // set after CONNECT, under b.mu
	kick   chan struct{}
	closed chan struct{}
	acked  bool // PUBACKs read since the sender was last woken (reader's own)
	once   sync.Once
}

// Start starts a broker on a free loopback port.
func Start(opts Options) (*Broker, error) {
	if opts.Inflight <= 0 {
		opts.Inflight = 1000
	}
	if opts.History <= 0 {
		opts.History = 1_000_000
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Broker{opts: opts, ln: ln, sessions: map[string]*session{}, conns: map[*conn]struct{}{}}
	b.wg.Go(b.accept)
	return b, nil
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return b.ln.Addr().String() }

// URL is the broker's address for paho: tcp://127.0.0.1:PORT.
func (b *Broker) URL() string { return "tcp://" + b.Addr() }

// Stop closes the listener and every connection and waits for the broker's
// goroutines. Calling it again does nothing.
func (b *Broker) Stop() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.stopped = true
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	_ = b.ln.Close()
	for _, c := range conns {
		c.close()
	}
	b.wg.Wait()
}

// SetPingDelay holds every PINGRESP back by d from now on; PUBLISH packets
// keep flowing meanwhile.
func (b *Broker) SetPingDelay(d time.Duration) {
	b.mu.Lock()
	b.pingDelay = d
	b.mu.Unlock()
}

// SetSilent makes the broker send nothing at all to clientID's connections
// (no PUBLISH, no PINGRESP, no SUBACK) while on, as a broker whose host
// froze; it keeps reading them. Off resumes sending.
func (b *Broker) SetSilent(clientID string, on bool) {
	b.mu.Lock()
	s := b.session(clientID)
	s.silent = on
	c := s.conn
	b.mu.Unlock()
	if c != nil && !on {
		c.wake()
	}
}

// ResendOnReconnect arms r for clientID's next connection that finds its
// session; several armed re-sends go in the order armed.
func (b *Broker) ResendOnReconnect(clientID string, r Resend) {
	b.mu.Lock()
	s := b.session(clientID)
	s.resends = append(s.resends, r)
	b.mu.Unlock()
}

// CloseClient closes clientID's connection, if it has one, without a word
// to it, and reports whether it had one.
func (b *Broker) CloseClient(clientID string) bool {
	b.mu.Lock()
	var c *conn
	if s := b.sessions[clientID]; s != nil {
		c = s.conn
	}
	b.mu.Unlock()
	if c != nil {
		c.close()
	}
	return c != nil
}

// Connected reports whether clientID has a connection.
func (b *Broker) Connected(clientID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[clientID]
	return s != nil && s.conn != nil
}

// Stats are a session's counters.
type Stats struct {
	// Delivered is how many messages took a delivery sequence (sent at
	// least once); Acked how many of those were acknowledged; Resent how
	// many PUBLISH packets faults re-sent; Queued how many wait to be sent;
	// Inflight how many are sent and not acknowledged; Pings how many
	// PINGREQs its connections sent; Connects how many connections
	// CONNECTed to it.
	Delivered, Acked, Resent, Queued, Inflight, Pings, Connects int
	// Connected is whether the client has a connection.
	Connected bool
}

// SessionStats returns clientID's counters (zero if it has no session).
func (b *Broker) SessionStats(clientID string) Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[clientID]
	if s == nil {
		return Stats{}
	}
	return Stats{Delivered: s.sent, Acked: s.ackedN, Resent: s.resent, Queued: len(s.queue), Inflight: len(s.inflight), Pings: s.pings, Connects: s.connects, Connected: s.conn != nil}
}

// Publish routes a message to every session subscribed to topic, at QoS 1
// (or the subscription's 0), as a client's QoS 1 PUBLISH would.
func (b *Broker) Publish(topic string, payload []byte) {
	b.mu.Lock()
	wake := b.routeLocked(message{topic: topic, payload: payload})
	b.mu.Unlock()
	for _, c := range wake {
		c.wake()
	}
}

// session returns clientID's session, made empty if missing; b.mu held.
func (b *Broker) session(clientID string) *session {
	s := b.sessions[clientID]
	if s == nil {
		s = &session{id: clientID, filters: map[string]byte{}, inflight: map[uint16]delivery{}, held: map[uint16]message{}}
		b.sessions[clientID] = s
	}
	return s
}

// routeLocked queues m to every matching session and returns the
// connections to wake; b.mu held.
func (b *Broker) routeLocked(m message) []*conn {
	var wake []*conn
	for _, s := range b.sessions {
		qos, ok := byte(0), false
		for f, q := range s.filters {
			if Match(f, m.topic) {
				qos, ok = max(qos, q), true
			}
		}
		if !ok {
			continue
		}
		if qos == 0 && s.conn == nil {
			continue // QoS 0 is not queued for an absent client
		}
		s.queue = append(s.queue, delivery{msg: m, qos: qos})
		if s.conn != nil {
			wake = append(wake, s.conn)
		}
	}
	return wake
}

// Match reports whether topic matches the MQTT filter (with + and #).
func Match(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && !strings.HasPrefix(filter, "$") {
		return false
	}
	for {
		f, frest, fmore := strings.Cut(filter, "/")
		if f == "#" {
			return true
		}
		t, trest, tmore := strings.Cut(topic, "/")
		if f != "+" && f != t {
			return false
		}
		if !fmore || !tmore {
			// "a/#" also matches "a".
			return fmore == tmore || (fmore && frest == "#")
		}
		filter, topic = frest, trest
	}
}

func (b *Broker) accept() {
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			return
		}
		c := &conn{b: b, nc: nc, w: bufio.NewWriterSize(nc, 64<<10), kick: make(chan struct{}, 1), closed: make(chan struct{})}
		b.mu.Lock()
		if b.stopped {
			b.mu.Unlock()
			_ = nc.Close()
			return
		}
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Go(c.readLoop)
		b.wg.Go(c.sendLoop)
	}
}

func (c *conn) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// close closes the connection; the session stays without it.
func (c *conn) close() {
	c.once.Do(func() {
		close(c.closed)
		_ = c.nc.Close()
		c.b.mu.Lock()
		delete(c.b.conns, c)
		if c.s != nil && c.s.conn == c {
			c.s.conn = nil
		}
		c.b.mu.Unlock()
	})
}

// write writes packets and flushes them, unless the session is silent.
func (c *conn) write(ps ...packets.ControlPacket) error {
	c.b.mu.Lock()
	silent := c.s != nil && c.s.silent
	c.b.mu.Unlock()
	if silent {
		return nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for _, p := range ps {
		if err := p.Write(c.w); err != nil {
			return err
		}
	}
	return c.w.Flush()
}

func (c *conn) readLoop() {
	defer c.close()
	r := bufio.NewReaderSize(c.nc, 64<<10)
	first := true
	for {
		p, err := packets.ReadPacket(r)
		if err != nil {
			return
		}
		if first != isConnect(p) {
			return // CONNECT first, and only once
		}
		first = false
		if err := c.handle(p); err != nil {
			return
		}
		if c.acked && r.Buffered() == 0 {
			// The acks read together free the window together: one wake
			// of the sender for them, not one each.
			c.acked = false
			c.wake()
		}
	}
}

func isConnect(p packets.ControlPacket) bool {
	_, ok := p.(*packets.ConnectPacket)
	return ok
}

var errClose = errors.New("faultbroker: close the connection")

func (c *conn) handle(p packets.ControlPacket) error {
	switch p := p.(type) {
	case *packets.ConnectPacket:
		return c.connect(p)
	case *packets.SubscribePacket:
		ack := packets.NewControlPacket(packets.Suback).(*packets.SubackPacket)
		ack.MessageID = p.MessageID
		c.b.mu.Lock()
		for i, f := range p.Topics {
			q := min(p.Qoss[i], 1)
			c.s.filters[f] = q
			ack.ReturnCodes = append(ack.ReturnCodes, q)
		}
		c.b.mu.Unlock()
		return c.write(ack)
	case *packets.UnsubscribePacket:
		c.b.mu.Lock()
		for _, f := range p.Topics {
			delete(c.s.filters, f)
		}
		c.b.mu.Unlock()
		ack := packets.NewControlPacket(packets.Unsuback).(*packets.UnsubackPacket)
		ack.MessageID = p.MessageID
		return c.write(ack)
	case *packets.PublishPacket:
		if p.Qos == 2 {
			c.b.mu.Lock()
			if _, ok := c.s.held[p.MessageID]; !ok {
				c.s.held[p.MessageID] = message{topic: p.TopicName, payload: p.Payload}
			}
			c.b.mu.Unlock()
			ack := packets.NewControlPacket(packets.Pubrec).(*packets.PubrecPacket)
			ack.MessageID = p.MessageID
			return c.write(ack)
		}
		c.b.Publish(p.TopicName, p.Payload)
		if p.Qos == 1 {
			ack := packets.NewControlPacket(packets.Puback).(*packets.PubackPacket)
			ack.MessageID = p.MessageID
			return c.write(ack)
		}
		return nil
	case *packets.PubackPacket:
		c.b.mu.Lock()
		if c.s.conn == c { // a taken-over connection's acks are stale
			c.s.ack(p.MessageID)
		}
		c.b.mu.Unlock()
		c.acked = true
		return nil
	case *packets.PubrelPacket:
		c.b.mu.Lock()
		m, ok := c.s.held[p.MessageID]
		delete(c.s.held, p.MessageID)
		var wake []*conn
		if ok {
			wake = c.b.routeLocked(m)
		}
		c.b.mu.Unlock()
		for _, w := range wake {
			w.wake()
		}
		ack := packets.NewControlPacket(packets.Pubcomp).(*packets.PubcompPacket)
		ack.MessageID = p.MessageID
		return c.write(ack)
	case *packets.PingreqPacket:
		c.b.mu.Lock()
		d := c.b.pingDelay
		c.s.pings++
		c.b.mu.Unlock()
		resp := packets.NewControlPacket(packets.Pingresp)
		if d <= 0 {
			return c.write(resp)
		}
		c.b.wg.Go(func() {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				_ = c.write(resp)
			case <-c.closed:
			}
		})
		return nil
	case *packets.DisconnectPacket:
		return errClose
	default:
		return fmt.Errorf("faultbroker: unexpected %s", p.String())
	}
}

// connect takes the session over (closing its previous connection), queues
// the session's armed re-sends and its unacknowledged messages ahead of the
// rest, and sends the CONNACK before any of them.
func (c *conn) connect(p *packets.ConnectPacket) error {
	ack := packets.NewControlPacket(packets.Connack).(*packets.ConnackPacket)
	if p.ClientIdentifier == "" {
		ack.ReturnCode = packets.ErrRefusedIDRejected
		_ = c.write(ack)
		return errClose
	}
	b := c.b
	b.mu.Lock()
	s := b.sessions[p.ClientIdentifier]
	var old *conn // a connection the new one takes over
	if s != nil {
		old = s.conn
	}
	if s != nil && p.CleanSession {
		delete(b.sessions, p.ClientIdentifier)
		s = nil
	}
	present := s != nil && (len(s.filters) > 0 || s.nextSeq > 0 || s.connects > 0)
	if s == nil {
		s = b.session(p.ClientIdentifier)
	}
	s.connects++
	// The session is nobody's until the CONNACK is out: no PUBLISH may
	// precede it, and the old connection stops sending.
	s.conn, s.claim, c.s = nil, c, s
	ack.SessionPresent = present
	var front []delivery
	for _, r := range s.resends {
		front = append(front, s.resendBlock(r)...)
	}
	s.resends = nil
	s.resent += len(front)
	again := make([]delivery, 0, len(s.inflight))
	for _, d := range s.inflight {
		d.dup = true
		again = append(again, d)
	}
	slices.SortFunc(again, func(a, b delivery) int { return cmp.Compare(a.order, b.order) })
	front = append(front, again...)
	clear(s.inflight)
	s.queue = append(front, s.queue...)
	b.mu.Unlock()
	if old != nil {
		old.close()
	}
	if err := c.write(ack); err != nil {
		return err
	}
	b.mu.Lock()
	select {
	case <-c.closed: // close ran before the session was c's
	default:
		if s.claim == c { // not taken over meanwhile
			s.conn = c
		}
	}
	b.mu.Unlock()
	c.wake()
	return nil
}

// resendBlock returns r's deliveries; b.mu held.
func (s *session) resendBlock(r Resend) []delivery {
	var from, to uint64 // sequences [from, to)
	switch {
	case r.Last > 0:
		n := 0
		to = s.histBase + uint64(len(s.history))
		for from = to; from > s.histBase && n < r.Last; from-- {
			if s.acked[from-1-s.histBase] {
				n++
			}
		}
	case r.Count > 0:
		from, to = max(r.From, s.histBase), min(r.From+r.Count, s.histBase+uint64(len(s.history)))
	}
	var out []delivery
	for q := from; q < to; q++ {
		if i := q - s.histBase; s.acked[i] {
			out = append(out, delivery{seq: q, msg: s.history[i], qos: 1, dup: r.Dup, resend: true})
		}
	}
	return out
}

// ack records the PUBACK of packet id; b.mu held.
func (s *session) ack(id uint16) {
	d, ok := s.inflight[id]
	if !ok {
		return
	}
	delete(s.inflight, id)
	s.idUsed[id] = false
	if d.resend || d.seq < s.histBase {
		return
	}
	if j := d.seq - s.histBase; !s.acked[j] {
		s.acked[j] = true
		s.ackedN++
	}
}

// take moves up to what the in-flight window allows from the queue into
// flight and returns their packets; b.mu held.
func (s *session) take(window int) []packets.ControlPacket {
	var out []packets.ControlPacket
	for len(s.queue) > 0 && (len(s.inflight) < window || s.queue[0].qos == 0) {
		d := s.queue[0]
		s.queue = s.queue[1:]
		if d.seq == 0 && d.qos == 1 {
			d.seq = s.record(d.msg)
		}
		pp := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
		pp.TopicName, pp.Payload, pp.Qos, pp.Dup = d.msg.topic, d.msg.payload, d.qos, d.dup
		if d.qos == 1 {
			if d.id == 0 {
				d.id = s.freeID()
			}
			pp.MessageID = d.id
			if d.order == 0 {
				s.sends++
				d.order = s.sends
			}
			s.inflight[d.id] = d
		}
		out = append(out, pp)
	}
	if len(s.queue) == 0 {
		s.queue = nil // let the drained backing array go
	}
	return out
}

// record gives m the next delivery sequence and keeps it in the history.
func (s *session) record(m message) uint64 {
	s.nextSeq++
	if s.histBase == 0 {
		s.histBase = 1
	}
	s.history = append(s.history, m)
	s.acked = append(s.acked, false)
	s.sent++
	return s.nextSeq
}

// trim drops history beyond limit; b.mu held.
func (s *session) trim(limit int) {
	if n := len(s.history) - limit; n > limit/4 {
		s.history = slices.Clone(s.history[n:])
		s.acked = slices.Clone(s.acked[n:])
		s.histBase += uint64(n)
	}
}

// freeID takes a packet id not in use.
func (s *session) freeID() uint16 {
	for {
		s.nextID++
		if s.nextID == 0 {
			s.nextID = 1
		}
		if !s.idUsed[s.nextID] {
			s.idUsed[s.nextID] = true
			return s.nextID
		}
	}
}

// sendLoop sends the session's queue as the in-flight window allows.
func (c *conn) sendLoop() {
	for {
		select {
		case <-c.closed:
			return
		case <-c.kick:
		}
		for {
			c.b.mu.Lock()
			s := c.s
			if s == nil || s.conn != c || s.silent {
				c.b.mu.Unlock()
				break
			}
			ps := s.take(c.b.opts.Inflight)
			s.trim(c.b.opts.History)
			c.b.mu.Unlock()
			if len(ps) == 0 {
				break
			}
			if err := c.write(ps...); err != nil {
				c.close()
				return
			}
		}
	}
}

// String describes the broker for test logs.
func (b *Broker) String() string {
	return "faultbroker " + b.Addr() + " inflight " + strconv.Itoa(b.opts.Inflight)
}
