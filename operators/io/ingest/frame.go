package ingest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Flags are per-entry bits as received from the broker.
type Flags uint8

const (
	// FlagDup is set when the broker marked the message as a redelivery
	// (the MQTT DUP flag). Dedup checks only such messages by content.
	FlagDup Flags = 1 << 0
	// FlagRetain is set when the message was a retained message.
	FlagRetain Flags = 1 << 1
	// FlagTooLarge marks a message that exceeded its source's maximum
	// message size: the entry holds only the first bytes of its payload,
	// and the pipeline dead-letters it (reason too_large).
	FlagTooLarge Flags = 1 << 2
	// FlagResumed marks the first message a source received on a
	// connection where the broker resumed the client's session (CONNACK
	// session present): what the broker kept while the agent was away
	// follows it, possibly behind newer messages. Logged, so a replay sees
	// the resume where the live run saw it.
	FlagResumed Flags = 1 << 3

	flagsKnown = FlagDup | FlagRetain | FlagTooLarge | FlagResumed
	// recSameTopic marks a record whose topic is the previous record's
	// (not stored again). Stored only, never in an Entry.
	recSameTopic = 1 << 7
	// recProps marks a record with MQTT 5 properties (Entry.Props), stored
	// after the topic. Stored only; since format version 4.
	recProps = 1 << 6
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
	// Props are the message's MQTT 5 content type and user properties, as
	// the PUBLISH encodes them (source.Message.Props); nil for most.
	Props []byte
}

// Frame layout constants (see the package documentation). Both versions
// start with the body length, the CRC and the offset of the (first) entry.
const (
	frameHeaderLen = 8                             // body length u32, CRC-32C u32
	bodyFixedLen   = 8 + 4 + 1                     // first offset u64, count u32, codec u8
	frameOverhead  = frameHeaderLen + bodyFixedLen // bytes of a frame besides its records
	maxBodyLen     = 1 << 30                       // sanity bound on a decoded length
	maxTopicLen    = 1<<16 - 1                     // MQTT's own topic bound
)

// Frame codecs.
const (
	codecRaw  = 0
	codecZstd = 1
	codecS2   = 2 // an S2 block (not the stream format)
)

// compressMin is the smallest record block worth compressing: below it
// the codec's own framing eats the gain.
const compressMin = 256

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The zstd coder is shared by every log and reader of the process (its
// EncodeAll and DecodeAll are safe for concurrent use), created on first
// use. Windows and memory are kept small: a block is one batch, tens of
// KiB at a steady rate (a commit every 768 messages or 64 KiB), so a
// 256 KiB window loses nothing there, and the encoder's history buffer
// (window + 128 KiB, held for the life of the process) is 384 KiB instead
// of 1.1 MiB with a 1 MiB window: live heap the GC doubles into RSS.
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(256<<10), zstd.WithEncoderCRC(false))
		if err != nil {
			return nil // unreachable with these options; nil means no compression
		}
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(maxBodyLen))
		if err != nil {
			return nil
		}
		return d
	})
)

// recordLen is the encoded size of e as a record, at most.
func recordLen(e *Entry) int {
	n := 1 + binary.MaxVarintLen64 + uvarintLen(uint64(len(e.Topic))) + len(e.Topic) +
		uvarintLen(uint64(len(e.Payload))) + len(e.Payload)
	if len(e.Props) > 0 {
		n += uvarintLen(uint64(len(e.Props))) + len(e.Props)
	}
	return n
}

// Every record's own bytes fit EntryOverhead, its properties' bytes
// aside.
// (Properties, bounded by the source far below 2 MiB, take a length of at
// most 3 bytes besides their own.)
const _ = uint(EntryOverhead - (1 + binary.MaxVarintLen64 + 3 + 3 + binary.MaxVarintLen64))

// frameLen is the largest encoded size of a frame holding e alone.
func frameLen(e *Entry) int { return frameOverhead + recordLen(e) }

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// appendRecords appends the records of batch to dst:
//
//	flags u8 (bit 7: same topic as the previous record; bit 6: properties) |
//	arrival − previous arrival, zig-zag varint (the first from 0) |
//	[topic length uvarint | topic] unless bit 7 |
//	[properties length uvarint | properties] if bit 6 |
//	payload length uvarint | payload
func appendRecords(dst []byte, batch []Entry) []byte {
	var prevArrival int64
	var prevTopic []byte
	for i := range batch {
		e := &batch[i]
		flags := byte(e.Flags & flagsKnown)
		same := i > 0 && string(e.Topic) == string(prevTopic)
		if same {
			flags |= recSameTopic
		}
		if len(e.Props) > 0 {
			flags |= recProps
		}
		dst = append(dst, flags)
		dst = binary.AppendVarint(dst, e.Arrival-prevArrival)
		if !same {
			dst = binary.AppendUvarint(dst, uint64(len(e.Topic)))
			dst = append(dst, e.Topic...)
		}
		if len(e.Props) > 0 {
			dst = binary.AppendUvarint(dst, uint64(len(e.Props)))
			dst = append(dst, e.Props...)
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.Payload)))
		dst = append(dst, e.Payload...)
		prevArrival, prevTopic = e.Arrival, e.Topic
	}
	return dst
}

// appendFrame appends a frame holding batch, the first entry at
// offset first, to dst. Unless c is CompressNone, the uncompressed records
// are appended to raw first (returned grown), and stored compressed with c
// when that makes them smaller. It does not allocate once dst and raw have
// room.
func appendFrame(dst []byte, first uint64, batch []Entry, c Compression, raw []byte) ([]byte, []byte) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // length and CRC, filled below
	dst = binary.LittleEndian.AppendUint64(dst, first)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(batch)))
	codecAt := len(dst)
	dst = append(dst, codecRaw)
	if c == CompressNone {
		dst = appendRecords(dst, batch)
	} else {
		rawStart := len(raw)
		raw = appendRecords(raw, batch)
		dst = appendCompressed(dst, raw[rawStart:], c, codecAt)
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-frameHeaderLen))
	binary.LittleEndian.PutUint32(dst[start+4:], frameCRC(dst[start:]))
	return dst, raw
}

// appendCompressed appends the records raw to dst compressed with c, and
// sets the codec byte at dst[codecAt], or appends them as they are when
// compressing does not make them smaller.
func appendCompressed(dst, raw []byte, c Compression, codecAt int) []byte {
	recStart := len(dst)
	if len(raw) < compressMin {
		return append(dst, raw...)
	}
	codec := byte(codecRaw)
	switch c {
	case CompressS2:
		if n := s2.MaxEncodedLen(len(raw)); n > 0 {
			// Encoded in place: s2.Encode uses dst's room when it can hold
			// the worst case.
			dst = slices.Grow(dst, n)
			dst = dst[:recStart+len(s2.Encode(dst[recStart:recStart+n], raw))]
			codec = codecS2
		}
	case CompressZstd:
		if enc := zstdEncoder(); enc != nil {
			dst = enc.EncodeAll(raw, dst)
			codec = codecZstd
		}
	}
	if codec == codecRaw || len(dst)-recStart >= len(raw) {
		return append(dst[:recStart], raw...)
	}
	dst[codecAt] = codec
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

// frame is a decoded frame: count entries from offset first, their
// records in recs (decompressed).
type frame struct {
	first uint64
	count int
	recs  []byte
}

// frameAt checks the frame at the start of b (CRC and fixed fields, not
// the records). With frameOK it returns the frame's body and size. With
// frameShort, size is the number of bytes needed (frameHeaderLen when even
// the header is missing). With frameBad, reason says which check failed.
func frameAt(b []byte, minBody uint32) (body []byte, size int, st frameStatus, reason string) {
	if len(b) < frameHeaderLen {
		return nil, frameHeaderLen, frameShort, ""
	}
	bodyLen := binary.LittleEndian.Uint32(b)
	if bodyLen < minBody || bodyLen > maxBodyLen {
		return nil, 0, frameBad, "invalid frame length"
	}
	size = frameHeaderLen + int(bodyLen)
	if len(b) < size {
		return nil, size, frameShort, ""
	}
	f := b[:size]
	if frameCRC(f) != binary.LittleEndian.Uint32(f[4:]) {
		return nil, 0, frameBad, "checksum mismatch"
	}
	return f[frameHeaderLen:], size, frameOK, ""
}

// decodeFrame decodes the frame at the start of b; a compressed block is
// decompressed into scratch (returned grown, for reuse). The frame aliases
// b or scratch. The records are checked later, by records.
func decodeFrame(b, scratch []byte) (fr frame, size int, st frameStatus, reason string, _ []byte) {
	body, size, st, reason := frameAt(b, bodyFixedLen)
	if st != frameOK {
		return frame{}, size, st, reason, scratch
	}
	fr = frame{first: binary.LittleEndian.Uint64(body), count: int(binary.LittleEndian.Uint32(body[8:]))}
	if fr.count == 0 {
		return frame{}, 0, frameBad, "frame holds no entries", scratch
	}
	switch body[12] {
	case codecRaw:
		fr.recs = body[bodyFixedLen:]
	case codecZstd:
		dec := zstdDecoder()
		if dec == nil {
			return frame{}, 0, frameBad, "zstd decoder unavailable", scratch
		}
		out, err := dec.DecodeAll(body[bodyFixedLen:], scratch[:0])
		if err != nil {
			return frame{}, 0, frameBad, "compressed block: " + err.Error(), scratch
		}
		scratch, fr.recs = out, out
	case codecS2:
		src := body[bodyFixedLen:]
		n, err := s2.DecodedLen(src)
		if err != nil {
			return frame{}, 0, frameBad, "compressed block: " + err.Error(), scratch
		}
		if n > maxBodyLen {
			return frame{}, 0, frameBad, "compressed block: invalid decoded length", scratch
		}
		out, err := s2.Decode(slices.Grow(scratch[:0], n)[:n], src)
		if err != nil {
			return frame{}, 0, frameBad, "compressed block: " + err.Error(), scratch
		}
		scratch, fr.recs = out, out
	default:
		return frame{}, 0, frameBad, fmt.Sprintf("unknown codec %d", body[12]), scratch
	}
	return fr, size, frameOK, "", scratch
}

// recordCursor walks the records of a frame.
type recordCursor struct {
	rest        []byte
	left        int
	prevArrival int64
	prevTopic   []byte
}

func (c *recordCursor) reset(fr *frame) {
	*c = recordCursor{rest: fr.recs, left: fr.count}
}

// next decodes the next record into e (Offset unset). It returns a reason
// when the records are malformed: they must be exactly count records.
func (c *recordCursor) next(e *Entry) (reason string) {
	b := c.rest
	if len(b) < 1 {
		return "records end early"
	}
	flags := b[0]
	if Flags(flags&^(recSameTopic|recProps))&^flagsKnown != 0 {
		return "unknown record flags"
	}
	b = b[1:]
	delta, n := binary.Varint(b)
	if n <= 0 {
		return "bad arrival"
	}
	b = b[n:]
	e.Arrival = c.prevArrival + delta
	e.Flags = Flags(flags) & flagsKnown
	if flags&recSameTopic != 0 {
		if c.prevTopic == nil {
			return "first record repeats a topic"
		}
		e.Topic = c.prevTopic
	} else {
		tl, n := binary.Uvarint(b)
		if n <= 0 || tl > maxTopicLen || tl > uint64(len(b)-n) {
			return "bad topic length"
		}
		e.Topic = b[n : n+int(tl) : n+int(tl)]
		b = b[n+int(tl):]
	}
	e.Props = nil
	if flags&recProps != 0 {
		ql, n := binary.Uvarint(b)
		if n <= 0 || ql == 0 || ql > uint64(len(b)-n) {
			return "bad properties length"
		}
		e.Props = b[n : n+int(ql) : n+int(ql)]
		b = b[n+int(ql):]
	}
	pl, n := binary.Uvarint(b)
	if n <= 0 || pl > uint64(len(b)-n) {
		return "bad payload length"
	}
	e.Payload = b[n : n+int(pl) : n+int(pl)]
	c.rest = b[n+int(pl):]
	c.left--
	if c.left == 0 && len(c.rest) != 0 {
		return "bytes after the last record"
	}
	c.prevArrival, c.prevTopic = e.Arrival, e.Topic
	return ""
}

// checkRecords reports why fr's records are malformed, or "".
func checkRecords(fr *frame) string {
	var c recordCursor
	c.reset(fr)
	var e Entry
	for c.left > 0 {
		if reason := c.next(&e); reason != "" {
			return reason
		}
	}
	return ""
}
