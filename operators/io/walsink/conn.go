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
	"syscall"
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

// dial connects to the broker and sends CONNECT at the protocol version
// asked for (4: MQTT 3.1.1, clean session 0; 5: MQTT 5, clean start 0 and
// a session that never expires), with the fixed client id, and returns the
// connection and what the CONNACK said. A broker that refuses MQTT 5 is
// errV5Refused.
func dial(ctx context.Context, o *Options, version byte) (net.Conn, connackInfo, error) {
	conn, err := dialTransport(ctx, o)
	if err != nil {
		return nil, connackInfo{}, err
	}
	_ = conn.SetDeadline(time.Now().Add(o.DialTimeout))
	// Close (ctx) ends a wait for a CONNACK that does not come at once.
	defer context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })()
	var info connackInfo
	if version == 5 {
		info, err = handshakeV5(conn, o)
	} else {
		info, err = handshakeV4(conn, o)
	}
	if err != nil {
		conn.Close()
		return nil, connackInfo{}, err
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, info, nil
}

func handshakeV5(conn net.Conn, o *Options) (connackInfo, error) {
	if _, err := conn.Write(encodeConnectV5(o)); err != nil {
		return connackInfo{}, fmt.Errorf("walsink: send CONNECT: %w", err)
	}
	pk, err := mqtt5.ReadPacket(bufio.NewReaderSize(conn, 512), maxIncomingV5)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return connackInfo{}, fmt.Errorf("%w: %w", errV5Closed, err)
	}
	if err != nil {
		return connackInfo{}, fmt.Errorf("walsink: read CONNACK: %w", err)
	}
	return connackV5(pk)
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

func newPacketWriter(conn net.Conn, version byte, aliasMax int) *packetWriter {
	var v5 *v5Writer
	if version == 5 {
		v5 = &v5Writer{aliasMax: uint16(aliasMax)}
	}
	return &packetWriter{
		v5:      v5,
		bw:      bufio.NewWriterSize(conn, 64<<10),
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
func readPackets(conn net.Conn, version byte, out chan<- incoming, quit <-chan struct{}, dead *atomic.Bool, clock *readClock) {
	br := bufio.NewReaderSize(clockedReader{conn, clock}, 64<<10)
	acked := ackPromptly(conn)
	if version == 5 {
		readPacketsV5(br, acked, out, quit, dead)
		return
	}
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

// readPacketsV5 is readPackets at MQTT 5: each answer carries its reason
// code; a DISCONNECT from the broker ends the connection with its reason.
func readPacketsV5(br *bufio.Reader, acked func(), out chan<- incoming, quit <-chan struct{}, dead *atomic.Bool) {
	for {
		pk, err := mqtt5.ReadPacket(br, maxIncomingV5)
		if br.Buffered() == 0 {
			acked()
		}
		var in incoming
		switch {
		case err != nil:
			in.err = fmt.Errorf("walsink: read from broker: %w", err)
		case pk.FixedHeader.Type == mp.Pubrec:
			in.typ, in.id = qos2.Pubrec, pk.PacketID
		case pk.FixedHeader.Type == mp.Pubcomp:
			in.typ, in.id = qos2.Pubcomp, pk.PacketID
		case pk.FixedHeader.Type == mp.Puback:
			in.puback, in.id = true, pk.PacketID
		case pk.FixedHeader.Type == mp.Pingresp:
			in.typ = qos2.Pingresp
		case pk.FixedHeader.Type == mp.Disconnect:
			in.err = &disconnectError{code: pk.ReasonCode, reason: pk.Properties.ReasonString}
		default:
			in.err = fmt.Errorf("walsink: unexpected packet type %d from broker", pk.FixedHeader.Type)
		}
		if err == nil {
			in.reason, in.hasReason = pk.ReasonCode, true
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
