package sparkplug

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/eddy-edge/eddy/operators/io/mqtt5"
	mp "github.com/mochi-mqtt/server/v2/packets"
)

// link5 is one MQTT 5 connection of the sink, framed with mochi's packets
// codec (paho.mqtt.golang speaks 3.1.1 only). It does what the node needs
// and no more: CONNECT with the NDEATH as will and a clean start, SUBSCRIBE
// at QoS 1, PUBLISH at QoS 0 and 1, PUBACK of what it receives at QoS 1,
// PINGREQ, DISCONNECT.
type link5 struct {
	conn      net.Conn
	keepAlive time.Duration

	wmu    sync.Mutex // guards w, buf, nextID
	w      *bufio.Writer
	buf    bytes.Buffer
	nextID uint16

	mu    sync.Mutex // guards acks
	acks  map[uint16]chan *mp.Packet
	done  chan struct{}
	err   error // why done closed
	endMu sync.Once
}

// errV5Refused is dial5's answer from a broker that does not speak MQTT 5:
// the sink falls back to 3.1.1 for the rest of the run.
var errV5Refused = errors.New("the broker refuses MQTT 5")

// maxIncoming5 bounds a packet from the broker: acknowledgements and the
// node's commands and STATE, all small.
const maxIncoming5 = 1 << 20

// linkable reports whether broker's scheme is one dial5 speaks (not ws://).
func linkable(broker string) bool {
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

// dial5 connects in MQTT 5 with a clean start, will as the will, and reads
// the CONNACK. It returns errV5Refused for a broker that refuses the
// version (a 3.1.1 CONNACK, reason 0x84, or a close without a CONNACK);
// opened reports whether the socket was opened (a CONNECT went out).
func dial5(ctx context.Context, o *SinkOptions, will Action) (_ *link5, opened bool, _ error) {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	conn, err := mqtt5.Dial(ctx, o.Broker, o.TLS, publishTimeout)
	if err != nil {
		return nil, false, err
	}
	l, err := connect5(conn, o, will)
	return l, true, err
}

// connect5 sends the CONNECT on conn and reads the CONNACK.
func connect5(conn net.Conn, o *SinkOptions, will Action) (*link5, error) {
	_ = conn.SetDeadline(time.Now().Add(publishTimeout))
	l := &link5{conn: conn, keepAlive: 30 * time.Second, w: bufio.NewWriter(conn), acks: map[uint16]chan *mp.Packet{}, done: make(chan struct{})}
	pk := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Connect}, ProtocolVersion: 5, Connect: mp.ConnectParams{
		ProtocolName: []byte("MQTT"), Clean: true, ClientIdentifier: o.ClientID, Keepalive: uint16(l.keepAlive / time.Second),
		WillFlag: true, WillTopic: will.Topic, WillPayload: will.Payload, WillQos: will.QoS, WillRetain: will.Retain,
	}}
	if o.Username != "" {
		pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte(o.Username)
	}
	if o.Password != "" {
		pk.Connect.PasswordFlag, pk.Connect.Password = true, []byte(o.Password)
	}
	if err := l.write(pk.ConnectEncode); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send CONNECT: %w", err)
	}
	ack, err := readPacket5(bufio.NewReader(conn))
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, errConnack4):
		conn.Close()
		return nil, fmt.Errorf("%w (%v)", errV5Refused, err)
	case err != nil:
		conn.Close()
		return nil, fmt.Errorf("read CONNACK: %w", err)
	case ack.FixedHeader.Type != mp.Connack:
		conn.Close()
		return nil, fmt.Errorf("expected CONNACK, got packet type %d", ack.FixedHeader.Type)
	case ack.ReasonCode == mp.ErrUnsupportedProtocolVersion.Code:
		conn.Close()
		return nil, errV5Refused
	case ack.ReasonCode >= 0x80:
		conn.Close()
		return nil, fmt.Errorf("broker refused the connection: reason %#x %s", ack.ReasonCode, ack.Properties.ReasonString)
	}
	if ack.Properties.ServerKeepAlive > 0 {
		l.keepAlive = time.Duration(ack.Properties.ServerKeepAlive) * time.Second
	}
	_ = conn.SetDeadline(time.Time{})
	return l, nil
}

// errConnack4 is a 3.1.1 CONNACK: the broker does not speak 5.
var errConnack4 = errors.New("a 3.1.1 CONNACK")

// readPacket5 reads one packet from the broker.
func readPacket5(r *bufio.Reader) (*mp.Packet, error) {
	pk, err := mqtt5.ReadPacket(r, maxIncoming5)
	if err == nil && pk.FixedHeader.Type == mp.Connack && pk.ProtocolVersion == 4 {
		return nil, errConnack4
	}
	return pk, err
}

// write encodes one packet and writes it out.
func (l *link5) write(encode func(*bytes.Buffer) error) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.buf.Reset()
	if err := encode(&l.buf); err != nil {
		return err
	}
	_ = l.conn.SetWriteDeadline(time.Now().Add(publishTimeout))
	if _, err := l.w.Write(l.buf.Bytes()); err != nil {
		return err
	}
	return l.w.Flush()
}

// serve reads the broker's packets until the connection ends, passing
// each PUBLISH to onMessage (acknowledged first when QoS 1), and sends a
// PINGREQ every keepalive. It returns why the connection ended.
func (l *link5) serve(onMessage func(topic string, payload []byte)) {
	go l.ping()
	r := bufio.NewReader(l.conn)
	for {
		_ = l.conn.SetReadDeadline(time.Now().Add(l.keepAlive * 3 / 2))
		pk, err := readPacket5(r)
		if err != nil {
			l.end(err)
			return
		}
		switch pk.FixedHeader.Type {
		case mp.Publish:
			if pk.FixedHeader.Qos == 1 {
				ack := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Puback}, ProtocolVersion: 5, PacketID: pk.PacketID}
				if err := l.write(ack.PubackEncode); err != nil {
					l.end(err)
					return
				}
			}
			onMessage(pk.TopicName, pk.Payload)
		case mp.Puback, mp.Suback:
			l.mu.Lock()
			ch := l.acks[pk.PacketID]
			delete(l.acks, pk.PacketID)
			l.mu.Unlock()
			if ch != nil {
				ch <- pk
			}
		case mp.Disconnect:
			l.end(fmt.Errorf("the broker disconnected: reason %#x %s", pk.ReasonCode, pk.Properties.ReasonString))
			return
		}
	}
}

func (l *link5) ping() {
	t := time.NewTicker(l.keepAlive)
	defer t.Stop()
	ping := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Pingreq}, ProtocolVersion: 5}
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			if err := l.write(ping.PingreqEncode); err != nil {
				l.end(err)
				return
			}
		}
	}
}

// end closes the connection once, keeping the first reason.
func (l *link5) end(err error) {
	l.endMu.Do(func() {
		l.err = err
		close(l.done)
		l.conn.Close()
	})
}

// request sends a packet with a fresh packet id and waits for its
// acknowledgement (PUBACK, SUBACK).
func (l *link5) request(pk *mp.Packet, encode func(*mp.Packet) func(*bytes.Buffer) error) (*mp.Packet, error) {
	ch := make(chan *mp.Packet, 1)
	l.wmu.Lock()
	l.nextID++
	if l.nextID == 0 {
		l.nextID = 1
	}
	pk.PacketID = l.nextID
	l.wmu.Unlock()
	l.mu.Lock()
	l.acks[pk.PacketID] = ch
	l.mu.Unlock()
	if err := l.write(encode(pk)); err != nil {
		l.end(err)
		return nil, err
	}
	t := time.NewTimer(publishTimeout)
	defer t.Stop()
	select {
	case ack := <-ch:
		return ack, nil
	case <-l.done:
		return nil, l.err
	case <-t.C:
		l.mu.Lock()
		delete(l.acks, pk.PacketID)
		l.mu.Unlock()
		return nil, errors.New("no acknowledgement")
	}
}

// subscribe subscribes to topics at QoS 1 and fails unless each is granted.
func (l *link5) subscribe(topics []string) error {
	pk := &mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Subscribe, Qos: 1}, ProtocolVersion: 5}
	for _, t := range topics {
		pk.Filters = append(pk.Filters, mp.Subscription{Filter: t, Qos: 1})
	}
	ack, err := l.request(pk, func(p *mp.Packet) func(*bytes.Buffer) error { return p.SubscribeEncode })
	if err != nil {
		return err
	}
	for i, code := range ack.ReasonCodes {
		if code >= 0x80 && i < len(topics) {
			return fmt.Errorf("subscription to %s refused: reason %#x", topics[i], code)
		}
	}
	return nil
}

// publish publishes at QoS 0 (written, not acknowledged) or 1 (waits for
// the PUBACK). It fails once the connection is known gone.
func (l *link5) publish(topic string, qos byte, retain bool, payload []byte) error {
	select {
	case <-l.done:
		return l.err
	default:
	}
	pk := &mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Publish, Qos: qos, Retain: retain}, ProtocolVersion: 5, TopicName: topic, Payload: payload}
	if qos == 0 {
		if err := l.write(pk.PublishEncode); err != nil {
			l.end(err)
			return err
		}
		return nil
	}
	ack, err := l.request(pk, func(p *mp.Packet) func(*bytes.Buffer) error { return p.PublishEncode })
	if err == nil && ack.ReasonCode >= 0x80 {
		err = fmt.Errorf("PUBACK reason %#x", ack.ReasonCode)
	}
	return err
}

// disconnect sends DISCONNECT (normal: the broker drops the will) and
// closes the connection.
func (l *link5) disconnect() {
	pk := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Disconnect}, ProtocolVersion: 5}
	_ = l.write(pk.DisconnectEncode)
	l.end(errors.New("disconnected"))
}
