package walsink

// The MQTT 5 framing of the sink's connection.
//
// The packets of MQTT 5 (CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC,
// PUBREL, PUBCOMP, DISCONNECT and their properties) are encoded and decoded
// with mochi-mqtt's packets package, the embedded broker's own codec and so
// already a dependency, which covers every MQTT 5 packet and property.
// paho.golang, the Eclipse MQTT 5 client, is not usable here: it is a
// whole client that owns its session, its packet ids and its in-flight
// state, where this sink must keep its own (package qos2: the ids are the
// WAL's sequence numbers, and each step is written to the WAL before the
// packet it guards leaves). The connection is an mqtt5.Session (conn.go:
// CONNECT and CONNACK, the read loop, serialized writes), whose own
// PINGREQs are off: the keepalive is the QoS 2 session's. The session
// logic stays in package qos2 and the publisher; this file only frames its
// packets. MQTT 3.1.1 keeps paho's packets codec (conn.go), byte for byte
// as before.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	mp "github.com/mochi-mqtt/server/v2/packets"

	"github.com/eddy-edge/eddy/operators/io/mqtt5"
)

// contentTypeJSON is the Content Type property of every result published
// at MQTT 5: the results are JSON objects.
const contentTypeJSON = "application/json"

// idUserProperty is the user property that carries a result's id, so a
// consumer can drop repeats without parsing the payload.
const idUserProperty = "id"

// errV5Refused is dial's answer from a broker that refuses MQTT 5 in its
// CONNACK (a 3.1.1 broker's "unacceptable protocol version", or MQTT 5's
// 0x84 "unsupported protocol version"): the publisher falls back to 3.1.1.
var errV5Refused = errors.New("walsink: the broker refuses MQTT 5 (CONNACK: unsupported protocol version)")

// errV5Closed is dial's answer from a broker that closed the connection
// after the MQTT 5 CONNECT without a CONNACK (RabbitMQ's MQTT plugin does,
// for a version it does not speak; a broker restarting might too): the
// publisher tries 3.1.1 at once, and keeps it only if the broker accepts
// it.
var errV5Closed = mqtt5.ErrNoConnack

// connectV5 is the sink's MQTT 5 CONNECT: clean start 0 and a session
// that never expires (what 3.1.1's clean session 0 is: the session must
// survive every reconnect and restart), or expires after
// Options.SessionExpiry; the fixed client id, keepalive and credentials.
func connectV5(o *Options) mqtt5.Connect {
	return mqtt5.Connect{ClientID: o.ClientID, Username: o.Username, Password: o.Password,
		KeepAlive: o.KeepAlive, SessionExpiry: o.SessionExpiry}
}

// encodeConnectV5 encodes the sink's MQTT 5 CONNECT (connectV5).
func encodeConnectV5(o *Options) []byte {
	c := connectV5(o)
	return c.Encode()
}

// connackInfo is what a CONNACK told the sink.
type connackInfo struct {
	present bool
	version byte // the protocol version the connection speaks: 4 or 5
	limits  brokerLimits
}

// maxIncomingV5 bounds the packets read from the broker: acks, PINGRESP,
// DISCONNECT and CONNACK, whose properties (reason strings, user
// properties) are short.
const maxIncomingV5 = mqtt5.MaxControlPacket

// connackV5 interprets an MQTT 5 CONNACK (or the 3.1.1 one a broker that
// does not speak 5 answers with).
func connackV5(pk *mp.Packet) (connackInfo, error) {
	ack, err := mqtt5.ParseConnack(pk)
	if err == nil && ack.Code != 0 {
		err = &mqtt5.RefusedError{Connack: ack}
	}
	return connackResult(ack, err)
}

// connackResult is what the session's opening (mqtt5.Open: ack and err)
// tells the publisher, with the sink's errors: errV5Refused, errV5Closed,
// a *connackError.
func connackResult(ack mqtt5.Connack, err error) (connackInfo, error) {
	var refused *mqtt5.RefusedError
	switch {
	case errors.Is(err, mqtt5.ErrVersionRefused):
		return connackInfo{}, errV5Refused
	case errors.As(err, &refused):
		c := refused.Connack
		return connackInfo{}, &connackError{code: c.Code, v5: !c.V4, reason: c.Reason}
	case err != nil:
		return connackInfo{}, fmt.Errorf("walsink: %w", err)
	}
	l := ack.Limits
	return connackInfo{present: ack.Present, version: 5, limits: brokerLimits{receiveMax: l.ReceiveMax, maxQoS: l.MaxQoS,
		maxPacket: l.MaxPacket, topicAliasMax: l.TopicAliasMax}}, nil
}

// v5Writer encodes the session's packets at MQTT 5 with mochi's codec.
// It belongs to one connection: topic aliases are the connection's.
type v5Writer struct {
	pk  mp.Packet
	buf bytes.Buffer
	// aliasMax is the broker's Topic Alias Maximum (0: no aliases);
	// aliases maps the topics given one, first come first served, for
	// the connection's life: the first PUBLISH of a topic carries it and
	// its alias, the later ones the alias alone (an empty topic).
	aliasMax uint16
	aliases  map[string]uint16
	user     [1]mp.UserProperty // the id property, reused
}

// publish encodes a PUBLISH of a result: its id (from the payload) as the
// user property "id", the content type application/json, and the Message
// Expiry Interval expiry in seconds (0: none).
func (w *v5Writer) publish(dst io.Writer, qos byte, id uint16, dup, retain bool, topic, payload []byte, expiry uint32) error {
	w.pk = mp.Packet{
		FixedHeader:     mp.FixedHeader{Type: mp.Publish, Qos: qos, Dup: dup, Retain: retain},
		ProtocolVersion: 5,
		PacketID:        id,
		Payload:         payload,
	}
	if a, ok := w.aliases[string(topic)]; ok {
		w.pk.Properties.TopicAlias, w.pk.Properties.TopicAliasFlag = a, true
	} else {
		w.pk.TopicName = string(topic)
		if n := len(w.aliases); n < int(w.aliasMax) {
			if w.aliases == nil {
				w.aliases = make(map[string]uint16, w.aliasMax)
			}
			a := uint16(n + 1)
			w.aliases[w.pk.TopicName] = a
			w.pk.Properties.TopicAlias, w.pk.Properties.TopicAliasFlag = a, true
		}
	}
	w.pk.Properties.ContentType = contentTypeJSON
	w.pk.Properties.MessageExpiryInterval = expiry
	if rid, ok := resultID(payload); ok {
		w.user[0] = mp.UserProperty{Key: idUserProperty, Val: rid}
		w.pk.Properties.User = w.user[:]
	}
	return w.flush(dst, w.pk.PublishEncode)
}

// pubrel encodes a PUBREL (the only acknowledgement a publisher sends).
func (w *v5Writer) pubrel(dst io.Writer, id uint16) error {
	w.pk = mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Pubrel, Qos: 1}, ProtocolVersion: 5, PacketID: id}
	return w.flush(dst, w.pk.PubrelEncode)
}

func (w *v5Writer) pingreq(dst io.Writer) error {
	w.pk = mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Pingreq}, ProtocolVersion: 5}
	return w.flush(dst, w.pk.PingreqEncode)
}

func (w *v5Writer) flush(dst io.Writer, encode func(*bytes.Buffer) error) error {
	w.buf.Reset()
	if err := encode(&w.buf); err != nil {
		return err
	}
	_, err := dst.Write(w.buf.Bytes())
	return err
}

// publishSizeV5 is the size in bytes of the MQTT 5 PUBLISH (QoS 1 or 2)
// that carries topic and payload as v5Writer.publish encodes it, with a
// Message Expiry Interval when expiry: what the broker's Maximum Packet
// Size bounds.
func publishSizeV5(topic, payload []byte, expiry bool) int64 {
	props := 1 + 2 + len(contentTypeJSON)
	if expiry {
		props += 1 + 4
	}
	if rid, ok := resultID(payload); ok {
		props += 1 + 2 + len(idUserProperty) + 2 + len(rid)
	}
	rem := 2 + len(topic) + 2 + varintLen(props) + props + len(payload)
	return int64(1 + varintLen(rem) + rem)
}

// PublishSize is the size in bytes of the MQTT 5 PUBLISH the sink sends
// for a message of topic and payload, with a Message Expiry Interval when
// expiry (Options.MessageExpiry set): what the broker's Maximum Packet
// Size (Sink.MaxPacketSize) bounds.
func PublishSize(topic, payload []byte, expiry bool) int64 {
	return publishSizeV5(topic, payload, expiry)
}

// publishSizeV4 is the size of the MQTT 3.1.1 PUBLISH (QoS 1 or 2).
func publishSizeV4(topic, payload []byte) int64 {
	rem := 2 + len(topic) + 2 + len(payload)
	return int64(1 + varintLen(rem) + rem)
}

// varintLen is the length of n as an MQTT variable byte integer.
func varintLen(n int) int {
	switch {
	case n < 128:
		return 1
	case n < 16384:
		return 2
	case n < 2097152:
		return 3
	}
	return 4
}

// resultID returns the "id" of a result: the payload's first member, as
// Eddy's output record writes it ({"id":"…", …}). Payloads of another
// shape have none.
func resultID(payload []byte) (string, bool) {
	const head = `{"id":"`
	if !bytes.HasPrefix(payload, []byte(head)) {
		return "", false
	}
	rest := payload[len(head):]
	end, escaped := -1, false
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			end = i
		}
		if end >= 0 {
			break
		}
	}
	if end < 0 {
		return "", false
	}
	if !escaped {
		return string(rest[:end]), true
	}
	var s string
	if json.Unmarshal(payload[len(head)-1:len(head)+end+1], &s) != nil {
		return "", false
	}
	return s, !strings.ContainsRune(s, 0)
}
