package mqtt5

import (
	"errors"
	"fmt"
	"time"

	mp "github.com/mochi-mqtt/server/v2/packets"
)

// ErrVersionRefused is ParseConnack's answer from a broker that refuses
// MQTT 5: a 3.1.1 broker's "unacceptable protocol version" (return code
// 1), MQTT 5's 0x84, or a 3.1.1 CONNACK at all. The client may fall back
// to MQTT 3.1.1.
var ErrVersionRefused = errors.New("the broker refuses MQTT 5 (CONNACK: unsupported protocol version)")

// Limits is what a broker announces in an MQTT 5 CONNACK.
type Limits struct {
	// ReceiveMax is the Receive Maximum: the QoS 1 and 2 PUBLISHes in
	// flight it takes from the client; 0: none announced (65535).
	ReceiveMax int
	// MaxQoS is the Maximum QoS; 2 when not announced.
	MaxQoS int
	// MaxPacket is the Maximum Packet Size, in bytes; 0: none announced.
	MaxPacket int64
	// TopicAliasMax is the Topic Alias Maximum; 0: none.
	TopicAliasMax int
}

// Connack is what a CONNACK says.
type Connack struct {
	// Code is the reason code: 0 accepted, 0x80 and above refused (with
	// the broker's Reason, if it sent one).
	Code    byte
	Reason  string
	Present bool // session present
	// V4: a 3.1.1 CONNACK refusing the client (Code is a 3.1.1 return
	// code, 2 to 5).
	V4     bool
	Limits Limits
	// ServerKeepAlive is the keepalive the broker sets in place of the
	// CONNECT's; 0: none set.
	ServerKeepAlive time.Duration
}

// ParseConnack interprets the answer to an MQTT 5 CONNECT: an MQTT 5
// CONNACK, or the 3.1.1 one a broker that does not speak 5 sends (Decode
// marks it ProtocolVersion 4), which is ErrVersionRefused unless it refuses
// the client for another reason (V4).
func ParseConnack(pk *mp.Packet) (Connack, error) {
	if pk.FixedHeader.Type != mp.Connack {
		return Connack{}, fmt.Errorf("expected CONNACK, got packet type %d", pk.FixedHeader.Type)
	}
	if pk.ProtocolVersion == 4 {
		// A 3.1.1 broker answers an MQTT 5 CONNECT with return code 1,
		// "unacceptable protocol version" (MQTT 3.1.1 §3.1.2.2); one that
		// accepted it in a 3.1.1 CONNACK does not speak 5 either. Other
		// codes are refusals of the client whatever the version.
		if pk.ReasonCode == 0 || pk.ReasonCode == mp.Err3UnsupportedProtocolVersion.Code {
			return Connack{}, ErrVersionRefused
		}
		return Connack{Code: pk.ReasonCode, V4: true}, nil
	}
	if pk.ReasonCode == mp.ErrUnsupportedProtocolVersion.Code {
		return Connack{}, ErrVersionRefused
	}
	p := &pk.Properties
	c := Connack{Code: pk.ReasonCode, Reason: p.ReasonString, Present: pk.SessionPresent,
		Limits: Limits{ReceiveMax: int(p.ReceiveMaximum), MaxQoS: 2, MaxPacket: int64(p.MaximumPacketSize), TopicAliasMax: int(p.TopicAliasMaximum)}}
	c.ServerKeepAlive = time.Duration(p.ServerKeepAlive) * time.Second
	if p.MaximumQosFlag {
		c.Limits.MaxQoS = int(p.MaximumQos)
	}
	return c, nil
}
