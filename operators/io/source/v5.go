package source

// The MQTT 5 connection of the source.
//
// paho.mqtt.golang speaks MQTT 3.1.1 only, so at MQTT 5 the source runs
// an mqtt5.Session (the CONNECT and CONNACK, the PINGREQs, the DISCONNECT,
// the read loop of the packets other than PUBLISH) on the connection that
// already reads the PUBLISH packets of tcp:// brokers (coalescingConn).
// What is the source's own stays here: the SUBSCRIBE and its SUBACK, the
// PUBCOMP of each PUBREL, topic aliases (coalescingConn.publish), and the
// acknowledgements, the ones 3.1.1 sends, written by Message.Ack after the
// ingest-log append: an MQTT 5 PUBACK or PUBREC with reason "success" may
// omit the code, so the four bytes are the same packets.

import (
	"context"
	"errors"
	"fmt"
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
var errV5Closed = mqtt5.ErrNoConnack

// v5Scheme reports whether the MQTT 5 connection reaches broker's URL
// scheme; ws:// and wss:// stay on paho at MQTT 3.1.1.
func v5Scheme(broker string) bool { return mqtt5.Dialable(broker) }

// DisconnectError is an MQTT 5 DISCONNECT from the broker: its reason by
// name (session_taken_over: another client connected with this client
// id), and the reason string it sent, if any.
type DisconnectError = mqtt5.DisconnectError

// v5Session is one MQTT 5 connection of the source: an mqtt5.Session over
// the connection that reads the PUBLISH packets (coalescingConn), whose
// PINGREQs the connection's liveness judges.
type v5Session struct {
	s    *mqtt5.Session
	lost chan error // the connection's end, once
}

func (v *v5Session) lostCh() <-chan error { return v.lost }

// close sends DISCONNECT (normal disconnection) after the acks already
// written and closes the connection gracefully (coalescingConn.Close).
func (v *v5Session) close() { v.s.Disconnect(0) }

// controlReader is the session's PacketReader on a coalescingConn: the
// packets other than PUBLISH (the connection's own Read path queues
// those), with the liveness watchdog's verdict as the error of a read it
// cut short.
type controlReader struct{ c *coalescingConn }

func (r controlReader) ReadPacket() (*mp.Packet, error) {
	pk, err := r.c.readControl()
	return pk, r.c.live.readErr(err)
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
	o := &s.opts
	deadline := time.Now().Add(connectTimeout)
	sess, ack, err := mqtt5.Open(ctx, c, mqtt5.Config{
		Connect: mqtt5.Connect{ClientID: o.ClientID, Username: o.Username, Password: o.Password, KeepAlive: o.KeepAlive,
			CleanStart: o.CleanSession, SessionExpiry: o.SessionExpiry, ReceiveMaximum: o.ReceiveMaximum, TopicAliasMaximum: v5TopicAliasMax},
		Reader:   controlReader{c},
		Deadline: deadline,
		Ping:     true,
	})
	var refused *mqtt5.RefusedError
	switch {
	case errors.Is(err, mqtt5.ErrVersionRefused):
		return nil, errV5Refused
	case errors.As(err, &refused):
		return nil, fmt.Errorf("source: mqtt connect: %w", err)
	case err != nil:
		return nil, fmt.Errorf("source: mqtt: %w", err)
	}
	cs.resumed = ack.Present
	close(cs.ready)
	if !o.CleanSession && !ack.Present {
		s.log.Info("mqtt source: broker has no session for this client id; messages published while it was away are not delivered")
	}
	_ = raw.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = raw.SetReadDeadline(time.Now()) })
	err = s.subscribeV5(sess)
	stop()
	if err != nil {
		sess.Close()
		return nil, err
	}
	_ = raw.SetReadDeadline(time.Time{})
	s.log.Info("mqtt source connected", "topics", o.Topics, "qos", o.QoS, "protocol_version", 5, "receive_maximum", o.ReceiveMaximum)
	v := &v5Session{s: sess, lost: make(chan error, 1)}
	go func() {
		err := sess.Run(func(pk *mp.Packet) error { return answerV5(sess, pk) })
		if _, ok := err.(*mqtt5.DisconnectError); ok {
			err = fmt.Errorf("source: mqtt: %w", err)
		}
		v.lost <- err
	}()
	return v, nil
}

// subscribeV5 subscribes to the topics and waits for the SUBACK (the
// broker may send the session's messages before it; they are queued as
// they come).
func (s *MQTT) subscribeV5(sess *mqtt5.Session) error {
	o := &s.opts
	sub := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Subscribe, Qos: 1}, ProtocolVersion: 5, PacketID: 1}
	for _, t := range o.Topics {
		sub.Filters = append(sub.Filters, mp.Subscription{Filter: t, Qos: o.QoS})
	}
	if err := sess.WritePacket(sub.SubscribeEncode); err != nil {
		return fmt.Errorf("source: mqtt subscribe: %w", err)
	}
	for {
		pk, err := sess.Next()
		if err != nil {
			return fmt.Errorf("source: mqtt subscribe: %w", err)
		}
		if pk.FixedHeader.Type == mp.Disconnect {
			return fmt.Errorf("source: mqtt: %w", &mqtt5.DisconnectError{Code: pk.ReasonCode, Reason: pk.Properties.ReasonString})
		}
		if pk.FixedHeader.Type != mp.Suback {
			if err := answerV5(sess, pk); err != nil {
				return err
			}
			continue
		}
		for i, code := range pk.ReasonCodes {
			if code >= 0x80 && i < len(o.Topics) {
				return fmt.Errorf("source: mqtt subscribe to %q refused by the broker: %s (%#02x)", o.Topics[i], mqtt5.ReasonName(code), code)
			}
		}
		return nil
	}
}

// answerV5 handles a packet other than PUBLISH and DISCONNECT on an
// established MQTT 5 connection: a PUBREL gets its PUBCOMP (the PUBREC
// left after the ingest append, so the message is durable).
func answerV5(sess *mqtt5.Session, pk *mp.Packet) error {
	switch pk.FixedHeader.Type {
	case mp.Pubrel:
		_, err := sess.Write([]byte{0x70, 2, byte(pk.PacketID >> 8), byte(pk.PacketID)})
		return err
	case mp.Pingresp, mp.Suback:
		return nil
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
