package sparkplug

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/eddy-edge/eddy/operators/io/mqtt5"
	mp "github.com/mochi-mqtt/server/v2/packets"
)

// link5 is one MQTT 5 connection of the sink (paho.mqtt.golang speaks
// 3.1.1 only), on an mqtt5.Session: CONNECT with the NDEATH as will and a
// clean start, a PINGREQ every keepalive, a read deadline of 1.5
// keepalives, DISCONNECT. What is the sink's own is here: SUBSCRIBE at QoS
// 1, PUBLISH at QoS 0 and 1 (each QoS 1 one waiting for its PUBACK), and
// the PUBACK of what it receives at QoS 1.
type link5 struct {
	*mqtt5.Session

	mu     sync.Mutex // guards nextID, acks
	nextID uint16
	acks   map[uint16]chan *mp.Packet
}

// errV5Refused is dial5's answer from a broker that does not speak MQTT 5:
// the sink falls back to 3.1.1 for the rest of the run.
var errV5Refused = errors.New("the broker refuses MQTT 5")

// maxIncoming5 bounds a packet from the broker: acknowledgements and the
// node's commands and STATE, all small.
const maxIncoming5 = 1 << 20

// linkKeepAlive is the keepalive the sink's CONNECT asks for.
const linkKeepAlive = 30 * time.Second

// linkable reports whether broker's scheme is one dial5 speaks (not ws://).
func linkable(broker string) bool { return mqtt5.Dialable(broker) }

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
	sess, _, err := mqtt5.Open(context.Background(), conn, mqtt5.Config{
		Connect: mqtt5.Connect{ClientID: o.ClientID, Username: o.Username, Password: o.Password, KeepAlive: linkKeepAlive, CleanStart: true,
			Will: &mqtt5.Will{Topic: will.Topic, Payload: will.Payload, QoS: will.QoS, Retain: will.Retain}},
		MaxRead:      maxIncoming5,
		Deadline:     time.Now().Add(publishTimeout),
		WriteTimeout: publishTimeout,
		Ping:         true,
		ReadDeadline: true,
	})
	var refused *mqtt5.RefusedError
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		return nil, fmt.Errorf("%w (%v)", errV5Refused, err)
	case errors.Is(err, mqtt5.ErrVersionRefused):
		return nil, errV5Refused
	case errors.As(err, &refused) && refused.Connack.V4:
		return nil, fmt.Errorf("%w (a 3.1.1 CONNACK)", errV5Refused)
	case errors.As(err, &refused):
		return nil, fmt.Errorf("broker refused the connection: reason %#x %s", refused.Connack.Code, refused.Connack.Reason)
	case err != nil:
		return nil, err
	}
	return &link5{Session: sess, acks: map[uint16]chan *mp.Packet{}}, nil
}

// serve reads the broker's packets until the connection ends, passing
// each PUBLISH to onMessage (acknowledged first when QoS 1) and each
// PUBACK and SUBACK to its request.
func (l *link5) serve(onMessage func(topic string, payload []byte)) {
	_ = l.Run(func(pk *mp.Packet) error {
		switch pk.FixedHeader.Type {
		case mp.Publish:
			if pk.FixedHeader.Qos == 1 {
				ack := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Puback}, ProtocolVersion: 5, PacketID: pk.PacketID}
				if err := l.WritePacket(ack.PubackEncode); err != nil {
					return err
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
		}
		return nil
	})
}

// request sends a packet with a fresh packet id and waits for its
// acknowledgement (PUBACK, SUBACK).
func (l *link5) request(pk *mp.Packet, encode func(*mp.Packet) func(*bytes.Buffer) error) (*mp.Packet, error) {
	ch := make(chan *mp.Packet, 1)
	l.mu.Lock()
	l.nextID++
	if l.nextID == 0 {
		l.nextID = 1
	}
	pk.PacketID = l.nextID
	l.acks[pk.PacketID] = ch
	l.mu.Unlock()
	if err := l.WritePacket(encode(pk)); err != nil {
		l.End(err)
		return nil, err
	}
	t := time.NewTimer(publishTimeout)
	defer t.Stop()
	select {
	case ack := <-ch:
		return ack, nil
	case <-l.Done():
		return nil, l.Err()
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
	if err := l.Err(); err != nil {
		return err
	}
	pk := &mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Publish, Qos: qos, Retain: retain}, ProtocolVersion: 5, TopicName: topic, Payload: payload}
	if qos == 0 {
		if err := l.WritePacket(pk.PublishEncode); err != nil {
			l.End(err)
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
func (l *link5) disconnect() { l.Disconnect(0) }
