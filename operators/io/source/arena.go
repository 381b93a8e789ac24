package source

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
