package mqtt5

import (
	"bufio"
	"fmt"
	"io"

	mp "github.com/mochi-mqtt/server/v2/packets"
)

// MaxControlPacket bounds the packets other than PUBLISH a broker sends a
// client (CONNACK, SUBACK, acks, DISCONNECT): their properties (reason
// strings, user properties) are short.
const MaxControlPacket = 64 << 10

// ReadPacket reads one packet from r: the fixed header, the remaining
// length (at most maxBody) and the rest, decoded by Decode. (The source
// reads its PUBLISH packets with a reader of its own, without a copy.)
func ReadPacket(r *bufio.Reader, maxBody int) (*mp.Packet, error) {
	hb, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	n, _, err := mp.DecodeLength(r)
	if err != nil {
		return nil, fmt.Errorf("remaining length: %w", err)
	}
	if n > maxBody {
		return nil, fmt.Errorf("packet type %d of %d bytes, more than the %d a broker sends a client", hb>>4, n, maxBody)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return Decode(hb, body)
}

// Decode decodes a packet a broker sends a client from its first byte and
// its body (what follows the remaining length).
// A CONNACK of two bytes is a 3.1.1 one (no properties): its
// ProtocolVersion is 4.
func Decode(header byte, body []byte) (*mp.Packet, error) {
	pk := &mp.Packet{ProtocolVersion: 5}
	if err := pk.FixedHeader.Decode(header); err != nil {
		return nil, fmt.Errorf("fixed header %#x: %w", header, err)
	}
	pk.FixedHeader.Remaining = len(body)
	var err error
	switch pk.FixedHeader.Type {
	case mp.Connack:
		if len(body) == 2 {
			pk.ProtocolVersion = 4
		}
		err = pk.ConnackDecode(body)
	case mp.Puback:
		err = pk.PubackDecode(body)
	case mp.Pubrec:
		err = pk.PubrecDecode(body)
	case mp.Pubrel:
		err = pk.PubrelDecode(body)
	case mp.Pubcomp:
		err = pk.PubcompDecode(body)
	case mp.Suback:
		err = pk.SubackDecode(body)
	case mp.Publish: // the Sparkplug sink's subscriptions; a publisher refuses it
		err = pk.PublishDecode(body)
	case mp.Pingresp:
	case mp.Disconnect:
		err = pk.DisconnectDecode(body)
	default:
		return nil, fmt.Errorf("unexpected packet type %d from the broker", pk.FixedHeader.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("decode packet type %d: %w", pk.FixedHeader.Type, err)
	}
	return pk, nil
}
