package walsink

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/eddy-edge/eddy/operators/mqttprops"
)

// brokerLimits is what a broker announces in an MQTT 5 CONNACK.
type brokerLimits struct {
	receiveMax int // Receive Maximum: QoS 1 and 2 PUBLISHes in flight it takes; 0: none announced (65535)
	maxQoS     int // Maximum QoS; 2 when not announced
	// maxPacket is the Maximum Packet Size, in bytes; 0: none announced.
	maxPacket int64
	// topicAliasMax is the Topic Alias Maximum; 0: none.
	topicAliasMax int
	// noRetain: Retain Available is 0.
	noRetain bool
}

// Announced is what a broker announces in an MQTT 5 CONNACK, for `eddy
// probe`: zero values where it announces nothing.
type Announced struct {
	ReceiveMaximum    int   `json:"receive_maximum,omitempty"`
	MaximumQoS        int   `json:"maximum_qos"` // 2 when not announced
	MaximumPacketSize int64 `json:"maximum_packet_size,omitempty"`
	RetainUnavailable bool  `json:"retain_unavailable,omitempty"`
}

// ErrNoMQTT5 is ProbeAnnounced's answer from a broker that does not speak
// MQTT 5.
var ErrNoMQTT5 = errNoMQTT5

// ProbeAnnounced connects to broker in MQTT 5 as clientID+"-limits" with
// a clean start, reads what the CONNACK announces and disconnects.
func ProbeAnnounced(ctx context.Context, broker string, tc *tls.Config, clientID, username, password string) (Announced, error) {
	o := &Options{Broker: broker, TLS: tc, ClientID: clientID, Username: username, Password: password,
		DialTimeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	lim, err := probeLimits(ctx, o)
	if err != nil {
		return Announced{}, err
	}
	return Announced{ReceiveMaximum: lim.receiveMax, MaximumQoS: lim.maxQoS, MaximumPacketSize: lim.maxPacket, RetainUnavailable: lim.noRetain}, nil
}

// errNoMQTT5 is probeLimits' answer from a broker that does not speak MQTT
// 5 (RabbitMQ 3.10 answers with a 3.1.1 CONNACK refusing the version).
var errNoMQTT5 = errors.New("walsink: the broker does not speak MQTT 5")

// probeLimits asks the broker for its limits: it connects as MQTT 5 with
// client id ClientID+"-limits", clean start and no session expiry (the
// broker keeps nothing of it), reads the CONNACK's properties and
// disconnects. It serves a sink whose own session speaks MQTT 3.1.1 (set
// so, or fallen back to it), which announces no limits; the probe never
// touches that session (another client id). An MQTT 5 session learns the
// limits from its own CONNACK.
func probeLimits(ctx context.Context, o *Options) (brokerLimits, error) {
	conn, err := dialTransport(ctx, o)
	if err != nil {
		return brokerLimits{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(o.DialTimeout))
	defer context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })()
	if _, err := conn.Write(appendConnectV5(nil, o)); err != nil {
		return brokerLimits{}, fmt.Errorf("walsink: limits probe: send CONNECT: %w", err)
	}
	lim, err := readConnackV5(bufio.NewReader(conn))
	if err != nil {
		return brokerLimits{}, err
	}
	_, _ = conn.Write([]byte{0xE0, 0}) // DISCONNECT, normal
	return lim, nil
}

// appendConnectV5 encodes an MQTT 5 CONNECT: clean start, no properties
// (session expiry 0), keepalive, client id ClientID+"-limits", credentials.
func appendConnectV5(dst []byte, o *Options) []byte {
	str := func(b []byte, s string) []byte {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		return append(b, s...)
	}
	flags := byte(0x02) // clean start
	var body []byte
	body = str(body, "MQTT")
	body = append(body, 5, 0)
	body = binary.BigEndian.AppendUint16(body, uint16(o.KeepAlive/time.Second))
	body = append(body, 0) // properties
	body = str(body, o.ClientID+"-limits")
	if o.Username != "" {
		flags |= 0x80
		body = str(body, o.Username)
	}
	if o.Password != "" {
		flags |= 0x40
		body = str(body, o.Password)
	}
	body[7] = flags
	dst = append(dst, 0x10)
	dst = binary.AppendUvarint(dst, uint64(len(body)))
	return append(dst, body...)
}

// readConnackV5 reads a CONNACK and returns the limits an MQTT 5 one
// announces.
func readConnackV5(r *bufio.Reader) (brokerLimits, error) {
	lim := brokerLimits{maxQoS: 2}
	typ, err := r.ReadByte()
	if err != nil {
		return lim, fmt.Errorf("walsink: limits probe: read CONNACK: %w", err)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil || n > 1<<16 {
		return lim, fmt.Errorf("walsink: limits probe: CONNACK length: %v", err)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return lim, fmt.Errorf("walsink: limits probe: read CONNACK: %w", err)
	}
	if typ != 0x20 || len(body) < 2 {
		return lim, fmt.Errorf("walsink: limits probe: expected CONNACK, got packet type %#x", typ)
	}
	if len(body) == 2 || body[1] != 0 {
		// A 3.1.1 CONNACK (no properties), or a refusal.
		return lim, fmt.Errorf("%w (CONNACK code %d)", errNoMQTT5, body[1])
	}
	props, k := binary.Uvarint(body[2:])
	if k <= 0 || uint64(len(body)-2-k) < props {
		return lim, errors.New("walsink: limits probe: bad CONNACK properties")
	}
	for p := mqttprops.New(body[2+k : 2+k+int(props)]); ; {
		if !p.Next() {
			if p.Err != nil {
				return lim, fmt.Errorf("walsink: limits probe: CONNACK: %w", p.Err)
			}
			break
		}
		switch p.ID {
		case mqttprops.PropReceiveMaximum:
			lim.receiveMax = int(binary.BigEndian.Uint16(p.Value))
		case mqttprops.PropMaximumQoS:
			lim.maxQoS = int(p.Value[0])
		case mqttprops.PropRetainAvailable:
			lim.noRetain = p.Value[0] == 0
		case mqttprops.PropMaximumPacketSize:
			lim.maxPacket = int64(binary.BigEndian.Uint32(p.Value))
		}
	}
	return lim, nil
}
