package walsink

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/operators/io/mqtt5"

	"github.com/eclipse/paho.mqtt.golang/packets"
	mp "github.com/mochi-mqtt/server/v2/packets"

	"github.com/eddy-edge/eddy/operators/io/walsink/qos2"
)

// errConnRefused is returned (wrapped) when the broker answers CONNECT with
// a non-zero return code.
var errConnRefused = errors.New("walsink: broker refused the connection")

// connackError is a CONNACK with a non-zero return code (an MQTT 5 reason
// code ≥ 0x80 when v5, with the broker's reason string if it sent one); it
// wraps errConnRefused.
type connackError struct {
	code   byte
	v5     bool
	reason string
}

func (e *connackError) Error() string {
	if e.v5 {
		msg := "walsink: broker refused the connection: " + connackMeaningV5(e.code)
		if e.reason != "" {
			msg += " (the broker says: " + e.reason + ")"
		}
		return msg
	}
	return "walsink: broker refused the connection: " + connackMeaning(e.code)
}

func (e *connackError) Unwrap() error { return errConnRefused }

// dialTransport opens the TCP (or TLS) connection to the broker, within
// DialTimeout.
func dialTransport(ctx context.Context, o *Options) (net.Conn, error) {
	conn, err := DialBroker(ctx, o.Broker, o.TLS, o.DialTimeout)
	var ue *url.Error
	switch {
	case errors.As(err, &ue) && ue.Op == "parse":
		return nil, fmt.Errorf("walsink: broker url: %w", err)
	case err != nil:
		return nil, &dialError{fmt.Errorf("walsink: %w", err)}
	}
	return conn, nil
}

// DialBroker opens the TCP connection to an MQTT broker URL (mqtt5.Dial):
// how the sink reaches its broker, and so how eddy probe reaches it too.
func DialBroker(ctx context.Context, broker string, cfg *tls.Config, timeout time.Duration) (net.Conn, error) {
	return mqtt5.Dial(ctx, broker, cfg, timeout)
}

// dialError is a connection that could not be opened: the broker is not
// reachable (as opposed to one that answered).
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// brokerConn is one connection of the publisher to its broker: at MQTT 5
// an mqtt5.Session on the socket, which then writes and reads through it;
// at 3.1.1 the socket alone.
type brokerConn struct {
	net.Conn
	v5     *mqtt5.Session // nil at 3.1.1
	clock  *readClock     // what v5's reader records; nil at 3.1.1
	reader *v5Reader      // v5's reader; nil at 3.1.1
}

// Close closes the connection (at MQTT 5 it ends the session: without a
// DISCONNECT, as at 3.1.1).
func (c *brokerConn) Close() error {
	if c.v5 != nil {
		c.v5.Close()
		return nil
	}
	return c.Conn.Close()
}

// dial connects to the broker and sends CONNECT at the protocol version
// asked for (4: MQTT 3.1.1, clean session 0; 5: MQTT 5, clean start 0 and
// a session that never expires), with the fixed client id, and returns the
// connection and what the CONNACK said. A broker that refuses MQTT 5 is
// errV5Refused.
func dial(ctx context.Context, o *Options, version byte) (*brokerConn, connackInfo, error) {
	conn, err := dialTransport(ctx, o)
	if err != nil {
		return nil, connackInfo{}, err
	}
	if version == 5 {
		return dialV5(ctx, conn, o)
	}
	_ = conn.SetDeadline(time.Now().Add(o.DialTimeout))
	// Close (ctx) ends a wait for a CONNACK that does not come at once.
	defer context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })()
	info, err := handshakeV4(conn, o)
	if err != nil {
		conn.Close()
		return nil, connackInfo{}, err
	}
	_ = conn.SetDeadline(time.Time{})
	return &brokerConn{Conn: conn}, info, nil
}

// dialV5 opens the MQTT 5 session on conn. Its reader records every read
// with bytes in the connection's readClock, and acknowledges at once
// (ackPromptly) what a read that empties its buffer brought.
func dialV5(ctx context.Context, conn net.Conn, o *Options) (*brokerConn, connackInfo, error) {
	clock := newReadClock()
	r := &v5Reader{br: bufio.NewReaderSize(clockedReader{conn, clock}, 64<<10), acked: ackPromptly(conn)}
	sess, ack, err := mqtt5.Open(ctx, conn, mqtt5.Config{Connect: connectV5(o), Reader: r, Deadline: time.Now().Add(o.DialTimeout)})
	info, err := connackResult(ack, err)
	if err != nil {
		return nil, connackInfo{}, err
	}
	return &brokerConn{Conn: conn, v5: sess, clock: clock, reader: r}, info, nil
}

// v5Reader is the MQTT 5 session's PacketReader.
type v5Reader struct {
	br    *bufio.Reader
	acked func()
	// dead, once set (before the session's read loop starts), is set
	// at a read error or a DISCONNECT: before the session closes the
	// connection, so the publisher sends nothing more after it (see
	// flushReady).
	dead *atomic.Bool
}

func (r *v5Reader) ReadPacket() (*mp.Packet, error) {
	pk, err := mqtt5.ReadPacket(r.br, maxIncomingV5)
	if r.br.Buffered() == 0 {
		r.acked() // after the read that brought this packet
	}
	if r.dead != nil && (err != nil || pk.FixedHeader.Type == mp.Disconnect) {
		r.dead.Store(true)
	}
	return pk, err
}

func handshakeV4(conn net.Conn, o *Options) (connackInfo, error) {
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion = "MQTT", 4
	cp.CleanSession = false
	cp.ClientIdentifier = o.ClientID
	cp.Keepalive = uint16(o.KeepAlive / time.Second)
	if o.Username != "" {
		cp.UsernameFlag, cp.Username = true, o.Username
	}
	if o.Password != "" {
		cp.PasswordFlag, cp.Password = true, []byte(o.Password)
	}
	if err := cp.Write(conn); err != nil {
		return connackInfo{}, fmt.Errorf("walsink: send CONNECT: %w", err)
	}
	pkt, err := packets.ReadPacket(conn)
	if err != nil {
		return connackInfo{}, fmt.Errorf("walsink: read CONNACK: %w", err)
	}
	ack, ok := pkt.(*packets.ConnackPacket)
	if !ok {
		return connackInfo{}, fmt.Errorf("walsink: expected CONNACK, got %s", pkt)
	}
	if ack.ReturnCode != packets.Accepted {
		return connackInfo{}, &connackError{code: ack.ReturnCode}
	}
	return connackInfo{present: ack.SessionPresent, version: 4, limits: brokerLimits{maxQoS: 2}}, nil
}

// packetWriter encodes the session's packets with paho's codec into a
// buffered writer, reusing the packet structs.
type packetWriter struct {
	bw *bufio.Writer
	v5 *v5Writer // MQTT 5: mochi's codec; nil at 3.1.1
	// expiry, when set (MQTT 5 with Options.MessageExpiry), is the
	// Message Expiry Interval of message seq's PUBLISH now, in seconds.
	expiry  func(seq uint64) uint32
	publish *packets.PublishPacket
	pubrel  *packets.PubrelPacket
	ping    *packets.PingreqPacket
}

// newPacketWriter writes to w: the connection at 3.1.1, its session at 5.
func newPacketWriter(w io.Writer, version byte, aliasMax int) *packetWriter {
	var v5 *v5Writer
	if version == 5 {
		v5 = &v5Writer{aliasMax: uint16(aliasMax)}
	}
	return &packetWriter{
		v5:      v5,
		bw:      bufio.NewWriterSize(w, 64<<10),
		publish: packets.NewControlPacket(packets.Publish).(*packets.PublishPacket),
		pubrel:  packets.NewControlPacket(packets.Pubrel).(*packets.PubrelPacket),
		ping:    packets.NewControlPacket(packets.Pingreq).(*packets.PingreqPacket),
	}
}

// writeQoS1 encodes a QoS 1 PUBLISH of m.
func (w *packetWriter) writeQoS1(m *qos1Msg, dup bool) error {
	if w.v5 != nil {
		return w.v5.publish(w.bw, 1, m.id, dup, m.retain, m.topic, m.payload, w.expiryOf(m.seq))
	}
	w.publish.Qos, w.publish.Dup, w.publish.Retain = 1, dup, m.retain
	w.publish.TopicName, w.publish.MessageID, w.publish.Payload = string(m.topic), m.id, m.payload
	return w.publish.Write(w.bw)
}

func (w *packetWriter) write(p qos2.Packet) error {
	if w.v5 != nil {
		switch p.Kind {
		case qos2.PacketPublish:
			return w.v5.publish(w.bw, 2, p.ID, p.Dup, p.Retain, p.Topic, p.Payload, w.expiryOf(p.Seq))
		case qos2.PacketPubrel:
			return w.v5.pubrel(w.bw, p.ID)
		case qos2.PacketPingreq:
			return w.v5.pingreq(w.bw)
		}
		panic(fmt.Sprintf("walsink: packet kind %d", p.Kind))
	}
	switch p.Kind {
	case qos2.PacketPublish:
		w.publish.Qos, w.publish.Dup, w.publish.Retain = 2, p.Dup, p.Retain
		w.publish.TopicName, w.publish.MessageID, w.publish.Payload = string(p.Topic), p.ID, p.Payload
		return w.publish.Write(w.bw)
	case qos2.PacketPubrel:
		w.pubrel.MessageID = p.ID
		return w.pubrel.Write(w.bw)
	case qos2.PacketPingreq:
		return w.ping.Write(w.bw)
	}
	panic(fmt.Sprintf("walsink: packet kind %d", p.Kind))
}

func (w *packetWriter) expiryOf(seq uint64) uint32 {
	if w.expiry == nil {
		return 0
	}
	return w.expiry(seq)
}

// incoming is one packet (or the read error) from the broker.
type incoming struct {
	typ    qos2.PacketType
	puback bool // a PUBACK (QoS 1 mode); typ is then invalid
	id     uint16
	// reason is an MQTT 5 reason code (0 at 3.1.1); hasReason says the
	// packet came from an MQTT 5 connection.
	reason    byte
	hasReason bool
	err       error
}

// readClock records when the last read from the broker returned bytes,
// for the session's keepalive rule (qos2's Received): any bytes prove the
// connection alive. It keeps the time as an offset from base, so that it
// stays on the monotonic clock: a step of the wall clock (a gateway's first
// NTP sync after boot) neither drops a live connection nor keeps a dead one.
type readClock struct {
	base time.Time
	last atomic.Int64 // nanoseconds from base to the latest read with bytes
}

func newReadClock() *readClock { return &readClock{base: time.Now()} }

// latest is when the latest read returned bytes (base before any).
func (c *readClock) latest() time.Time { return c.base.Add(time.Duration(c.last.Load())) }

// clockedReader is what the reader's buffer reads from: the connection,
// each read that returns bytes recorded in a readClock.
type clockedReader struct {
	r     io.Reader
	clock *readClock
}

func (r clockedReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.clock.last.Store(int64(time.Since(r.clock.base)))
	}
	return n, err
}

// readPackets reads the broker's packets until an error, which it sends
// last, setting dead first; it stops early when quit closes. Every read
// that returns bytes is recorded in clock, also while the publisher has
// not taken the packets yet.
func readPackets(conn *brokerConn, version byte, out chan<- incoming, quit <-chan struct{}, dead *atomic.Bool, clock *readClock) {
	if version == 5 {
		conn.reader.dead = dead
		readPacketsV5(conn.v5, out, quit, dead)
		return
	}
	br := bufio.NewReaderSize(clockedReader{conn.Conn, clock}, 64<<10)
	acked := ackPromptly(conn.Conn)
	for {
		pkt, err := packets.ReadPacket(br)
		if br.Buffered() == 0 {
			acked() // after the read that brought this packet
		}
		var in incoming
		switch p := pkt.(type) {
		case nil:
			in.err = fmt.Errorf("walsink: read from broker: %w", err)
		case *packets.PubrecPacket:
			in.typ, in.id = qos2.Pubrec, p.MessageID
		case *packets.PubcompPacket:
			in.typ, in.id = qos2.Pubcomp, p.MessageID
		case *packets.PingrespPacket:
			in.typ = qos2.Pingresp
		case *packets.PubackPacket:
			in.puback, in.id = true, p.MessageID
		default:
			in.err = fmt.Errorf("walsink: unexpected packet from broker: %s", pkt)
		}
		if err != nil && in.err == nil {
			in.err = fmt.Errorf("walsink: read from broker: %w", err)
		}
		if in.err != nil {
			dead.Store(true)
		}
		select {
		case out <- in:
		case <-quit:
			return
		}
		if in.err != nil {
			return
		}
	}
}

// errQuit ends the session's read loop when the publisher no longer takes
// its packets.
var errQuit = errors.New("walsink: reader stopped")

// readPacketsV5 is readPackets at MQTT 5, the session's read loop: each
// answer carries its reason code; a DISCONNECT from the broker ends the
// connection with its reason.
func readPacketsV5(sess *mqtt5.Session, out chan<- incoming, quit <-chan struct{}, dead *atomic.Bool) {
	var unexpected error
	err := sess.Run(func(pk *mp.Packet) error {
		in := incoming{id: pk.PacketID, reason: pk.ReasonCode, hasReason: true}
		switch pk.FixedHeader.Type {
		case mp.Pubrec:
			in.typ = qos2.Pubrec
		case mp.Pubcomp:
			in.typ = qos2.Pubcomp
		case mp.Puback:
			in.puback = true
		case mp.Pingresp:
			in.typ, in.id = qos2.Pingresp, 0
		default:
			dead.Store(true)
			unexpected = fmt.Errorf("walsink: unexpected packet type %d from broker", pk.FixedHeader.Type)
			return unexpected
		}
		select {
		case out <- in:
			return nil
		case <-quit:
			return errQuit
		}
	})
	var de *mqtt5.DisconnectError
	in := incoming{err: unexpected}
	switch {
	case errors.Is(err, errQuit):
		return
	case errors.As(err, &de):
		in.err, in.reason, in.hasReason = &disconnectError{code: de.Code, reason: de.Reason}, de.Code, true
	case unexpected == nil:
		in.err = fmt.Errorf("walsink: read from broker: %w", err)
	}
	dead.Store(true)
	select {
	case out <- in:
	case <-quit:
	}
}

// disconnectError is an MQTT 5 DISCONNECT from the broker: its reason code
// by name, and the reason string it sent, if any.
type disconnectError struct {
	code   byte
	reason string
}

func (e *disconnectError) Error() string {
	msg := fmt.Sprintf("walsink: the broker disconnected: %s (%#02x)", mqtt5.ReasonName(e.code), e.code)
	if e.reason != "" {
		msg += ": " + e.reason
	}
	return msg
}
