package source

// The MQTT 5 connection of the source.
//
// paho.mqtt.golang speaks MQTT 3.1.1 only, so at MQTT 5 the source keeps
// the session itself, on the connection that already reads the PUBLISH
// packets of tcp:// brokers (coalescingConn): the CONNECT, CONNACK,
// SUBSCRIBE and SUBACK, the PINGREQs, the PUBCOMP of each PUBREL, and the
// DISCONNECT, framed by mochi-mqtt's packets codec through package mqtt5
// (shared with the WAL sink). The acknowledgements are the ones 3.1.1
// sends, written by Message.Ack after the ingest-log append: an MQTT 5
// PUBACK or PUBREC with reason "success" may omit the code, so the four
// bytes are the same packets.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"time"

	"github.com/eddy-edge/eddy/operators/mqttprops"

	mp "github.com/mochi-mqtt/server/v2/packets"

	"github.com/eddy-edge/eddy/operators/io/mqtt5"
)

// DefaultReceiveMaximum is MQTTOptions.ReceiveMaximum's default: about what
// one ingest commit takes (the agent starts a commit at 768 messages
// without lingering), so the broker's unacknowledged messages to the agent
// are at most about one commit's worth, and a reconnect re-sends no more.
const DefaultReceiveMaximum = 1000

// MaxProps bounds the property block of an MQTT 5 PUBLISH whose content
// type and user properties a message keeps (Message.Props): a message
// with more is TooLarge, dead-lettered with its payload's first bytes.
const MaxProps = 4 << 10

// v5TopicAliasMax is the Topic Alias Maximum the source announces: the
// most topics a broker may abbreviate towards it on one connection.
const v5TopicAliasMax = 1024

// errV5Refused: the broker refuses MQTT 5 in its CONNACK; the source falls
// back to MQTT 3.1.1 for the rest of the run.
var errV5Refused = errors.New("source: mqtt: the broker refuses MQTT 5 (CONNACK: unsupported protocol version)")

// errV5Closed: the broker closed the connection after the MQTT 5 CONNECT
// without a CONNACK (RabbitMQ's MQTT plugin does so for a version it does
// not speak); the source tries MQTT 3.1.1 at once and keeps it if the
// broker accepts it.
var errV5Closed = errors.New("source: mqtt: the broker closed the connection after the MQTT 5 CONNECT, without a CONNACK")

// v5Schemes are the broker URL schemes the MQTT 5 connection reaches;
// ws:// and wss:// stay on paho at MQTT 3.1.1.
func v5Scheme(broker string) bool {
	u, err := url.Parse(broker)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "tcp", "mqtt", "ssl", "tls", "mqtts":
		return true
	}
	return false
}

// DisconnectError is an MQTT 5 DISCONNECT from the broker: its reason by
// name (session_taken_over: another client connected with this client
// id), and the reason string it sent, if any.
type DisconnectError struct {
	Code   byte
	Reason string
}

func (e *DisconnectError) Error() string {
	msg := fmt.Sprintf("source: mqtt: the broker disconnected: %s (%#02x)", mqtt5.ReasonName(e.Code), e.Code)
	if e.Code == 0x8E {
		msg += ": another client connected with this client id"
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// v5Session is one MQTT 5 connection of the source.
type v5Session struct {
	c    *coalescingConn
	lost chan error // the connection's end, once
	done chan struct{}
}

func (v *v5Session) lostCh() <-chan error { return v.lost }

// close sends DISCONNECT (normal disconnection) after the acks already
// written and closes the connection gracefully (coalescingConn.Close).
func (v *v5Session) close() {
	close(v.done)
	_, _ = v.c.Write([]byte{0xE0, 0})
	_ = v.c.Close()
}

// connectV5 connects connection cs at MQTT 5 and subscribes to the topics.
// errV5Refused and errV5Closed tell a broker that may speak 3.1.1 only.
func (s *MQTT) connectV5(ctx context.Context, cs *connState) (*v5Session, error) {
	defer func() {
		select {
		case <-cs.ready:
		default:
			close(cs.ready)
		}
	}()
	raw, err := mqtt5.Dial(ctx, s.opts.Broker, s.opts.TLS, connectTimeout)
	if err != nil {
		return nil, fmt.Errorf("source: mqtt connect: %w", err)
	}
	c := newCoalescingConn(raw, s.opts.PingTimeout)
	c.recv = publishReader{queue: s.queue, wake: s.q.signal, maxSize: s.opts.MaxMessageSize}
	c.in.conn, c.in.v5 = cs.id, true
	_ = raw.SetReadDeadline(time.Now().Add(connectTimeout))
	stop := context.AfterFunc(ctx, func() { _ = raw.SetReadDeadline(time.Now()) })
	sess, err := s.handshakeV5(c, cs)
	stop()
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	_ = raw.SetReadDeadline(time.Time{})
	sess.start(s.opts.KeepAlive)
	return sess, nil
}

// handshakeV5 sends CONNECT, reads the CONNACK, subscribes and waits for
// the SUBACK (the broker may send the session's messages before it; they
// are queued as they come).
func (s *MQTT) handshakeV5(c *coalescingConn, cs *connState) (*v5Session, error) {
	o := &s.opts
	connect := mqtt5.Connect{ClientID: o.ClientID, Username: o.Username, Password: o.Password, KeepAlive: o.KeepAlive,
		CleanStart: o.CleanSession, SessionExpiry: o.SessionExpiry, ReceiveMaximum: o.ReceiveMaximum, TopicAliasMaximum: v5TopicAliasMax}
	if _, err := c.Write(connect.Encode()); err != nil {
		return nil, fmt.Errorf("source: mqtt: send CONNECT: %w", err)
	}
	pk, err := c.readControl()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return nil, fmt.Errorf("%w: %w", errV5Closed, err)
	}
	if err != nil {
		return nil, fmt.Errorf("source: mqtt: read CONNACK: %w", err)
	}
	ack, err := mqtt5.ParseConnack(pk)
	switch {
	case errors.Is(err, mqtt5.ErrVersionRefused):
		return nil, errV5Refused
	case err != nil:
		return nil, fmt.Errorf("source: mqtt: %w", err)
	case ack.V4:
		return nil, fmt.Errorf("source: mqtt connect: the broker refused the connection: return code %d", ack.Code)
	case ack.Code != 0:
		msg := fmt.Sprintf("source: mqtt connect: the broker refused the connection: %s (%#02x)", mqtt5.ReasonName(ack.Code), ack.Code)
		if ack.Reason != "" {
			msg += " (the broker says: " + ack.Reason + ")"
		}
		return nil, errors.New(msg)
	}
	cs.resumed = ack.Present
	close(cs.ready)
	if !o.CleanSession && !ack.Present {
		s.log.Info("mqtt source: broker has no session for this client id; messages published while it was away are not delivered")
	}
	sub := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Subscribe, Qos: 1}, ProtocolVersion: 5, PacketID: 1}
	for _, t := range o.Topics {
		sub.Filters = append(sub.Filters, mp.Subscription{Filter: t, Qos: o.QoS})
	}
	var buf bytes.Buffer
	if err := sub.SubscribeEncode(&buf); err != nil {
		return nil, fmt.Errorf("source: mqtt subscribe: %w", err)
	}
	if _, err := c.Write(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("source: mqtt subscribe: %w", err)
	}
	for {
		pk, err := c.readControl()
		if err != nil {
			return nil, fmt.Errorf("source: mqtt subscribe: %w", err)
		}
		if pk.FixedHeader.Type != mp.Suback {
			if err := c.answerV5(pk); err != nil {
				return nil, err
			}
			continue
		}
		for i, code := range pk.ReasonCodes {
			if code >= 0x80 && i < len(o.Topics) {
				return nil, fmt.Errorf("source: mqtt subscribe to %q refused by the broker: %s (%#02x)", o.Topics[i], mqtt5.ReasonName(code), code)
			}
		}
		break
	}
	s.log.Info("mqtt source connected", "topics", o.Topics, "qos", o.QoS, "protocol_version", 5, "receive_maximum", o.ReceiveMaximum)
	return &v5Session{c: c, lost: make(chan error, 1), done: make(chan struct{})}, nil
}

// start runs the session: a reader of the packets other than PUBLISH (the
// connection's own Read path queues those), which ends the connection at
// a DISCONNECT, and a PINGREQ every keepAlive (the liveness judges the
// answers, as on the 3.1.1 connections).
func (v *v5Session) start(keepAlive time.Duration) {
	go func() {
		for {
			pk, err := v.c.readControl()
			if err == nil {
				err = v.c.answerV5(pk)
			}
			if err != nil {
				v.lost <- v.c.live.readErr(err)
				return
			}
		}
	}()
	if keepAlive <= 0 {
		return
	}
	go func() {
		t := time.NewTicker(keepAlive)
		defer t.Stop()
		for {
			select {
			case <-v.done:
				return
			case <-t.C:
				if _, err := v.c.Write([]byte{0xC0, 0}); err != nil {
					return
				}
			}
		}
	}()
}

// answerV5 handles a packet other than PUBLISH on an established MQTT 5
// connection: a PUBREL gets its PUBCOMP (the PUBREC left after the ingest
// append, so the message is durable), a DISCONNECT ends the connection
// with its reason.
func (c *coalescingConn) answerV5(pk *mp.Packet) error {
	switch pk.FixedHeader.Type {
	case mp.Pubrel:
		_, err := c.Write([]byte{0x70, 2, byte(pk.PacketID >> 8), byte(pk.PacketID)})
		return err
	case mp.Pingresp, mp.Suback:
		return nil
	case mp.Disconnect:
		return &DisconnectError{Code: pk.ReasonCode, Reason: pk.Properties.ReasonString}
	}
	return fmt.Errorf("source: mqtt: unexpected packet type %d from the broker", pk.FixedHeader.Type)
}

// readControl reads until a packet other than PUBLISH arrives (the
// PUBLISH packets read meanwhile are queued) and decodes it.
func (c *coalescingConn) readControl() (*mp.Packet, error) {
	for len(c.in.pass) == 0 {
		if err := c.readPacket(); err != nil {
			return nil, err
		}
	}
	b := c.in.pass
	c.in.pass = nil
	i := 1
	for i < len(b) && b[i]&0x80 != 0 {
		i++
	}
	return mqtt5.Decode(b[0], b[i+1:])
}

// scanPublishProps reads a PUBLISH's property block: the topic alias (0:
// none; -1: the block is malformed), and whether it holds properties a
// pipeline reads (content type, user properties: Message.Props).
func scanPublishProps(b []byte) (alias int, keep bool) {
	p := mqttprops.New(b)
	for p.Next() {
		switch p.ID {
		case mqttprops.PropTopicAlias:
			alias = int(p.Value[0])<<8 | int(p.Value[1])
			if alias == 0 {
				return -1, false
			}
		case mqttprops.PropContentType, mqttprops.PropUser:
			keep = true
		}
	}
	if p.Err != nil {
		return -1, false
	}
	return alias, keep
}
