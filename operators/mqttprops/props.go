// Package mqttprops walks an MQTT 5 property block without allocating: what
// a PUBLISH carries (content type, user properties, topic alias) and what a
// CONNACK announces. It is pure, so the pipeline's stages read a message's
// properties (meta.content_type, meta.user_properties.NAME) with it as the
// MQTT clients (operators/io/mqtt5 and its users) do.
package mqttprops

import (
	"encoding/binary"
	"errors"
)

// Property identifiers a client reads in the packets it receives.
const (
	PropPayloadFormat     byte = 0x01
	PropMessageExpiry     byte = 0x02
	PropContentType       byte = 0x03
	PropReceiveMaximum    byte = 0x21
	PropTopicAlias        byte = 0x23
	PropMaximumQoS        byte = 0x24
	PropRetainAvailable   byte = 0x25
	PropUser              byte = 0x26
	PropMaximumPacketSize byte = 0x27
)

// ErrProps is a property block that does not parse: a truncated property
// or an identifier MQTT 5 does not define.
var ErrProps = errors.New("malformed MQTT 5 properties")

// Props walks an MQTT 5 property block (without its length) and allocates
// nothing:
//
//	for p := mqttprops.New(b); p.Next(); {
//		switch p.ID { ... p.Value ... }
//	}
//	if p.Err != nil { ... }
type Props struct {
	rest []byte
	// ID is the current property's identifier, Value its value as
	// encoded: a string or binary data with its two-byte length (see
	// String), a string pair as two of those (see Pair), an integer
	// big-endian.
	ID    byte
	Value []byte
	Err   error
}

// New returns a walk over the property block b.
func New(b []byte) Props { return Props{rest: b} }

// Next moves to the next property; false at the end of the block or at
// a malformed property (Err set).
func (p *Props) Next() bool {
	if len(p.rest) == 0 || p.Err != nil {
		return false
	}
	id, b := p.rest[0], p.rest[1:]
	size := -1
	switch id {
	case 0x01, 0x17, 0x19, 0x24, 0x25, 0x28, 0x29, 0x2A: // one byte
		size = 1
	case 0x13, 0x21, 0x22, 0x23: // two-byte integer
		size = 2
	case 0x02, 0x11, 0x18, 0x27: // four-byte integer
		size = 4
	case 0x0B: // variable byte integer
		if _, k := binary.Uvarint(b); k > 0 {
			size = k
		}
	case 0x03, 0x08, 0x09, 0x12, 0x15, 0x16, 0x1A, 0x1C, 0x1F: // string or binary
		if len(b) >= 2 {
			size = 2 + int(binary.BigEndian.Uint16(b))
		}
	case PropUser: // string pair
		if len(b) >= 2 {
			size = 2 + int(binary.BigEndian.Uint16(b))
			if len(b) >= size+2 {
				size += 2 + int(binary.BigEndian.Uint16(b[size:]))
			}
		}
	}
	if size <= 0 || size > len(b) {
		p.Err = ErrProps
		return false
	}
	p.ID, p.Value, p.rest = id, b[:size], b[size:]
	return true
}

// String is a string or binary property's value without its length.
func String(v []byte) []byte {
	if len(v) < 2 {
		return nil
	}
	return v[2:]
}

// Pair is a string pair property's key and value.
func Pair(v []byte) (key, val []byte) {
	if len(v) < 2 {
		return nil, nil
	}
	n := 2 + int(binary.BigEndian.Uint16(v))
	if n > len(v) {
		return nil, nil
	}
	return v[2:n], String(v[n:])
}
