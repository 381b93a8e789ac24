package source

import "github.com/eddy-edge/eddy/operators/mqttprops"

// arenaChunk is the size of the blocks payload copies are carved from.
const arenaChunk = 64 << 10

// arena copies payloads into shared blocks, so that copying a message costs
// an allocation per block rather than per message. A copy is never written
// again once returned (blocks are not reused), so receivers may keep
// payloads; the price is that one kept payload keeps its whole block alive.
// Not safe for concurrent use.
type arena struct {
	block []byte
}

// copy returns a copy of b with its capacity clipped to its length, so that
// appending to it cannot overwrite a neighbour.
func (a *arena) copy(b []byte) []byte {
	if len(b) > arenaChunk/8 {
		return append([]byte(nil), b...) // large: not worth a shared block
	}
	if cap(a.block)-len(a.block) < len(b) {
		a.block = make([]byte, 0, arenaChunk)
	}
	start := len(a.block)
	a.block = append(a.block, b...)
	return a.block[start:len(a.block):len(a.block)]
}

// copyProps copies the properties of an MQTT 5 PUBLISH that a pipeline
// reads (content type and user properties, as the packet encodes them)
// out of the property block b, which scanPublishProps accepted.
func (a *arena) copyProps(b []byte) []byte {
	if len(b) > arenaChunk/8 {
		return keptProps(nil, b)
	}
	if cap(a.block)-len(a.block) < len(b) {
		a.block = make([]byte, 0, arenaChunk)
	}
	start := len(a.block)
	a.block = keptProps(a.block, b)
	return a.block[start:len(a.block):len(a.block)]
}

// keptProps appends to dst the content type and user properties of b.
func keptProps(dst, b []byte) []byte {
	for p := mqttprops.New(b); p.Next(); {
		if p.ID == mqttprops.PropContentType || p.ID == mqttprops.PropUser {
			dst = append(append(dst, p.ID), p.Value...)
		}
	}
	return dst
}
