package ingest

import (
	"encoding/binary"
	"hash/crc32"
)

// Flags are per-entry bits as received from the broker.
type Flags uint8

const (
	// FlagDup is set when the broker marked the message as a redelivery
	// (the MQTT DUP flag). Dedup checks only such messages by content.
	FlagDup Flags = 1 << 0
	// FlagRetain is set when the message was a retained message.
	FlagRetain Flags = 1 << 1
)

// Entry is one message in the log.
//
// Entries returned by Reader.Next alias the reader's buffer: Topic and
// Payload are valid until the next call to Next or Close and must be copied
// to be kept. Append only reads the entries it is given.
type Entry struct {
	// Offset is the entry's position in the log: dense, starting at 1. Set
	// by the log; Append ignores it.
	Offset uint64
	// Arrival is when Eddy received the message, in milliseconds since the
	// Unix epoch (the caller's clock).
	Arrival int64
	Flags   Flags
	Topic   []byte
	Payload []byte
}

// Frame layout constants (see the package documentation).
const (
	frameHeaderLen = 8                             // body length u32, CRC-32C u32
	bodyFixedLen   = 8 + 8 + 1 + 2                 // offset, arrival, flags, topic length
	frameOverhead  = frameHeaderLen + bodyFixedLen // bytes of a frame besides topic and payload
	maxBodyLen     = 1 << 30                       // sanity bound on a decoded length
	maxTopicLen    = 1<<16 - 1                     // MQTT's own topic bound
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameLen is the encoded size of e.
func frameLen(e *Entry) int { return frameOverhead + len(e.Topic) + len(e.Payload) }

// appendFrame appends e's frame, holding offset, to dst. It never
// allocates when dst has room.
func appendFrame(dst []byte, offset uint64, e *Entry) []byte {
	start := len(dst)
	bodyLen := bodyFixedLen + len(e.Topic) + len(e.Payload)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(bodyLen))
	dst = append(dst, 0, 0, 0, 0) // CRC, filled below
	dst = binary.LittleEndian.AppendUint64(dst, offset)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(e.Arrival))
	dst = append(dst, byte(e.Flags))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(e.Topic)))
	dst = append(dst, e.Topic...)
	dst = append(dst, e.Payload...)
	binary.LittleEndian.PutUint32(dst[start+4:], frameCRC(dst[start:]))
	return dst
}

// frameCRC is the CRC-32C of a frame's length field and body, so a
// damaged length is caught as surely as a damaged payload.
func frameCRC(frame []byte) uint32 {
	c := crc32.Update(0, castagnoli, frame[:4])
	return crc32.Update(c, castagnoli, frame[frameHeaderLen:])
}

// frameStatus is the outcome of decoding the bytes at a frame position.
type frameStatus uint8

const (
	frameOK    frameStatus = iota + 1
	frameShort             // the bytes end before the frame does
	frameBad               // the frame fails a check
)

// decodeFrame decodes the frame at the start of b. With frameOK it returns
// the entry (aliasing b) and the frame size. With frameShort, size is the
// number of bytes needed (frameHeaderLen when even the header is missing).
// With frameBad, reason says which check failed.
func decodeFrame(b []byte) (e Entry, size int, st frameStatus, reason string) {
	if len(b) < frameHeaderLen {
		return Entry{}, frameHeaderLen, frameShort, ""
	}
	bodyLen := binary.LittleEndian.Uint32(b)
	if bodyLen < bodyFixedLen || bodyLen > maxBodyLen {
		return Entry{}, 0, frameBad, "invalid frame length"
	}
	size = frameHeaderLen + int(bodyLen)
	if len(b) < size {
		return Entry{}, size, frameShort, ""
	}
	f := b[:size]
	if frameCRC(f) != binary.LittleEndian.Uint32(f[4:]) {
		return Entry{}, 0, frameBad, "checksum mismatch"
	}
	body := f[frameHeaderLen:]
	topicLen := int(binary.LittleEndian.Uint16(body[17:]))
	if topicLen > len(body)-bodyFixedLen {
		return Entry{}, 0, frameBad, "topic length exceeds frame"
	}
	e = Entry{
		Offset:  binary.LittleEndian.Uint64(body),
		Arrival: int64(binary.LittleEndian.Uint64(body[8:])),
		Flags:   Flags(body[16]),
		Topic:   body[bodyFixedLen : bodyFixedLen+topicLen],
		Payload: body[bodyFixedLen+topicLen:],
	}
	return e, size, frameOK, ""
}
