// Package wal stores the WAL sink's log: a directory of segment files, each a
// sequence of length-prefixed, CRC-32C-checked frames. It knows frames and
// files, not what the frames mean (package walsink defines the records).
// The Sparkplug sink keeps the results it holds in a log of its own in the
// same format, with records of its own (package sparkplug, store.go),
// which carry their own version: a change of FormatVersion is one of
// theirs too.
//
// # Segment files
//
// A segment is named by its number, %016x.wal, and numbers only grow. Only
// the highest-numbered segment (the active one) is appended to; Rotate syncs
// it, creates the next one and syncs the directory, so every segment but the
// active one is complete and durable.
//
// A segment starts with a 12-byte header, then frames:
//
//	+------------------+----------------------+--------+--------+---
//	| magic "EDDYWSNK" | format version u32 LE | frame  | frame  | ...
//	+------------------+----------------------+--------+--------+---
//
// The format version covers the frames and the records in them (package
// walsink's record kinds and layouts): a build that changes either raises
// FormatVersion, and a segment of any other version is refused with
// ErrVersion (naming the file and both versions) instead of misread. Until
// the first tagged release only FormatVersion is read; from then on every
// released version stays readable.
//
// A crash between creating a segment and syncing its header can leave the
// active segment shorter than the header; Open rewrites it.
//
// # Frames
//
//	+----------------+----------------+---------------------+
//	| length uint32  | crc uint32     | payload (length B)  |
//	| little endian  | CRC-32C of the | first byte: record  |
//	|                | payload, LE    | kind (walsink)      |
//	+----------------+----------------+---------------------+
//
// A frame is valid when its 8-byte header is complete, 0 < length ≤
// MaxFrameBytes, the payload is complete and its CRC-32C (Castagnoli)
// matches. A crash (or power loss after an unsynced write) can leave the
// active segment ending in a torn frame: Open cuts the active segment at the
// first invalid frame. An invalid frame in any other segment is corruption
// (ErrCorrupt), never silently cut, because those segments were synced
// before the next was created.
package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// FrameHeaderBytes is the size of a frame's header (length and CRC).
const FrameHeaderBytes = 8

// MaxFrameBytes bounds one frame's payload, so a corrupt length cannot make
// a reader allocate gigabytes. MQTT payloads are at most 256 MiB; the WAL
// sink refuses larger messages.
const MaxFrameBytes = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Segment header.
const (
	headerMagic = "EDDYWSNK"
	// HeaderBytes is the size of a segment header.
	HeaderBytes = len(headerMagic) + 4
	// FormatVersion is the segment format this build writes, and the only
	// one it reads.
	FormatVersion = 5
)

var (
	// ErrVersion is returned (wrapped) by Open and OpenReader for a segment
	// whose header names a format version other than FormatVersion.
	ErrVersion = errors.New("wal: unsupported segment format version")
	// ErrCorrupt is returned (wrapped) when a complete segment holds an
	// invalid frame, or a segment does not start with the header.
	ErrCorrupt = errors.New("wal: corrupt segment")
	// ErrFrameTooLarge is returned by callers that check a payload against
	// MaxFrameBytes before writing it.
	ErrFrameTooLarge = errors.New("wal: frame too large")
)

// appendHeader appends a segment header of FormatVersion to dst.
func appendHeader(dst []byte) []byte {
	dst = append(dst, headerMagic...)
	return binary.LittleEndian.AppendUint32(dst, FormatVersion)
}

// headerResult is what the first bytes of a segment say.
type headerResult int

const (
	headerInvalid headerResult = iota
	headerVersioned
	headerTorn // shorter than a header and a prefix of one
)

// parseHeader classifies a segment's first bytes (all of them when the file
// is shorter than HeaderBytes) and returns the format version they name.
func parseHeader(b []byte) (headerResult, uint32) {
	// Cut short: a prefix of this build's header, or the magic followed by
	// part of any version (a torn write of another build's header).
	if len(b) < HeaderBytes && (bytes.HasPrefix(appendHeader(nil), b) || bytes.HasPrefix(b, []byte(headerMagic))) {
		return headerTorn, 0
	}
	if bytes.HasPrefix(b, []byte(headerMagic)) {
		return headerVersioned, binary.LittleEndian.Uint32(b[len(headerMagic):])
	}
	return headerInvalid, 0
}

// BeginFrame appends a frame header placeholder to dst and returns the
// extended slice; append the payload, then call EndFrame with the length
// dst had before BeginFrame. Neither allocates when dst has room.
func BeginFrame(dst []byte) []byte {
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
}

// EndFrame fills in the header of the frame that starts at dst[start:].
func EndFrame(dst []byte, start int) []byte {
	payload := dst[start+FrameHeaderBytes:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnoli))
	return dst
}

// AppendFrame appends one complete frame holding payload to dst.
func AppendFrame(dst, payload []byte) []byte {
	start := len(dst)
	dst = BeginFrame(dst)
	dst = append(dst, payload...)
	return EndFrame(dst, start)
}

// parseFrame parses the frame at the start of b. It returns the payload and
// the frame's total size; n == 0 means b does not hold a complete frame yet
// (need more bytes), and bad reports an invalid length or CRC.
func parseFrame(b []byte) (payload []byte, n int, bad bool) {
	if len(b) < FrameHeaderBytes {
		return nil, 0, false
	}
	length := binary.LittleEndian.Uint32(b)
	if length == 0 || length > MaxFrameBytes {
		return nil, 0, true
	}
	end := FrameHeaderBytes + int(length)
	if len(b) < end {
		return nil, 0, false
	}
	payload = b[FrameHeaderBytes:end]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, true
	}
	return payload, end, false
}
