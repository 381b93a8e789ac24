package mqtt5

import (
	"bytes"
	"math"
	"time"

	mp "github.com/mochi-mqtt/server/v2/packets"
)

// Connect is the CONNECT of a client that keeps its session at the broker.
type Connect struct {
	ClientID           string
	Username, Password string
	KeepAlive          time.Duration
	// CleanStart asks for a new session. Without it the session is resumed
	// if the broker has one.
	CleanStart bool
	// SessionExpiry is how long the broker keeps the session after a
	// disconnect. Zero: never expires without CleanStart (what MQTT
	// 3.1.1's clean session 0 is), ends at the disconnect with it.
	SessionExpiry time.Duration
	// ReceiveMaximum is the most QoS 1 and 2 PUBLISHes the broker may have
	// unacknowledged to this client at once; 0 announces none (65535).
	ReceiveMaximum uint16
	// TopicAliasMaximum is the most topic aliases the broker may use
	// towards this client; 0: none.
	TopicAliasMaximum uint16
	// Will, when set, is the message the broker publishes if the
	// connection ends without a normal DISCONNECT.
	Will *Will
}

// Will is a CONNECT's will message.
type Will struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool
}

// Encode returns the CONNECT packet.
func (c *Connect) Encode() []byte {
	pk := mp.Packet{
		FixedHeader:     mp.FixedHeader{Type: mp.Connect},
		ProtocolVersion: 5,
		Connect: mp.ConnectParams{
			ProtocolName:     []byte("MQTT"),
			Clean:            c.CleanStart,
			ClientIdentifier: c.ClientID,
			Keepalive:        uint16(c.KeepAlive / time.Second),
		},
		Properties: mp.Properties{
			ReceiveMaximum:    c.ReceiveMaximum,
			TopicAliasMaximum: c.TopicAliasMaximum,
		},
	}
	switch {
	case c.SessionExpiry > 0:
		pk.Properties.SessionExpiryInterval = uint32(min(c.SessionExpiry/time.Second, math.MaxUint32-1))
		pk.Properties.SessionExpiryIntervalFlag = true
	case !c.CleanStart:
		pk.Properties.SessionExpiryInterval = math.MaxUint32 // never expires
		pk.Properties.SessionExpiryIntervalFlag = true
	}
	if w := c.Will; w != nil {
		pk.Connect.WillFlag, pk.Connect.WillTopic, pk.Connect.WillPayload = true, w.Topic, w.Payload
		pk.Connect.WillQos, pk.Connect.WillRetain = w.QoS, w.Retain
	}
	if c.Username != "" {
		pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte(c.Username)
	}
	if c.Password != "" {
		pk.Connect.PasswordFlag, pk.Connect.Password = true, []byte(c.Password)
	}
	var buf bytes.Buffer
	_ = pk.ConnectEncode(&buf) // fails only on a PUBLISH without id
	return buf.Bytes()
}
