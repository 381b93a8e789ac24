package state

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Codec encodes the values of a typed state to bytes and back. Encodings
// must be architecture-independent (fixed-width little-endian or varints,
// never gob or a native struct layout), so that state written on arm64 reads
// on armv7 and amd64, and deterministic (equal values, equal bytes: map
// state compares encoded keys).
//
// The state layer versions its own envelope (see ttl.go); a codec whose
// encoding may change should start with a version byte of its own.
type Codec[T any] interface {
	// Append appends the encoding of v to dst and returns the extended
	// slice. It must not keep dst.
	Append(dst []byte, v T) []byte
	// Decode decodes src, which is exactly one encoding written by Append.
	// src aliases backend memory that changes after the call: Decode copies
	// what it keeps. A malformed src is an error (wrapped in ErrCorrupt by
	// the caller), never a panic.
	Decode(src []byte) (T, error)
}

// Int64Codec encodes an int64 as 8 bytes, little-endian.
type Int64Codec struct{}

func (Int64Codec) Append(dst []byte, v int64) []byte {
	return binary.LittleEndian.AppendUint64(dst, uint64(v))
}

func (Int64Codec) Decode(src []byte) (int64, error) {
	if len(src) != 8 {
		return 0, fmt.Errorf("state: int64 of %d bytes", len(src))
	}
	return int64(binary.LittleEndian.Uint64(src)), nil
}

// Uint64Codec encodes a uint64 as 8 bytes, little-endian.
type Uint64Codec struct{}

func (Uint64Codec) Append(dst []byte, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(dst, v)
}

func (Uint64Codec) Decode(src []byte) (uint64, error) {
	if len(src) != 8 {
		return 0, fmt.Errorf("state: uint64 of %d bytes", len(src))
	}
	return binary.LittleEndian.Uint64(src), nil
}

// VarintCodec encodes an int64 as a zig-zag varint (1 to 10 bytes): compact
// for small magnitudes such as counts and deltas.
type VarintCodec struct{}

func (VarintCodec) Append(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

func (VarintCodec) Decode(src []byte) (int64, error) {
	v, n := binary.Varint(src)
	if n <= 0 || n != len(src) {
		return 0, fmt.Errorf("state: bad varint of %d bytes", len(src))
	}
	return v, nil
}

// UvarintCodec encodes a uint64 as a varint (1 to 10 bytes).
type UvarintCodec struct{}

func (UvarintCodec) Append(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }

func (UvarintCodec) Decode(src []byte) (uint64, error) {
	v, n := binary.Uvarint(src)
	if n <= 0 || n != len(src) {
		return 0, fmt.Errorf("state: bad uvarint of %d bytes", len(src))
	}
	return v, nil
}

// Float64Codec encodes a float64 as its IEEE 754 bits, 8 bytes
// little-endian; NaN payloads and the sign of zero are kept.
type Float64Codec struct{}

func (Float64Codec) Append(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

func (Float64Codec) Decode(src []byte) (float64, error) {
	if len(src) != 8 {
		return 0, fmt.Errorf("state: float64 of %d bytes", len(src))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(src)), nil
}

// BoolCodec encodes a bool as one byte, 0 or 1; any other byte is corrupt.
type BoolCodec struct{}

func (BoolCodec) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func (BoolCodec) Decode(src []byte) (bool, error) {
	if len(src) != 1 || src[0] > 1 {
		return false, fmt.Errorf("state: bad bool of %d bytes", len(src))
	}
	return src[0] == 1, nil
}

// StringCodec encodes a string as its bytes (the encoding's length is the
// string's). Decode allocates the string.
type StringCodec struct{}

func (StringCodec) Append(dst []byte, v string) []byte { return append(dst, v...) }

func (StringCodec) Decode(src []byte) (string, error) { return string(src), nil }

// BytesCodec encodes a byte slice as itself. Decode returns a copy (never
// nil: an empty slice decodes as empty, not nil).
type BytesCodec struct{}

func (BytesCodec) Append(dst []byte, v []byte) []byte { return append(dst, v...) }

func (BytesCodec) Decode(src []byte) ([]byte, error) {
	return append(make([]byte, 0, len(src)), src...), nil
}

// Pair is two values of a PairCodec.
type Pair[A, B any] struct {
	First  A
	Second B
}

// PairCodec composes two codecs without a struct layout: First's encoding
// prefixed with its length (uvarint), then Second's. Nest pairs for more
// fields: PairCodec[A, Pair[B, C]].
type PairCodec[A, B any] struct {
	First  Codec[A]
	Second Codec[B]
}

func (c PairCodec[A, B]) Append(dst []byte, v Pair[A, B]) []byte {
	// Reserve one length byte, the common case, and shift if it was short.
	at := len(dst)
	dst = append(dst, 0)
	dst = c.First.Append(dst, v.First)
	n := len(dst) - at - 1
	if n < 0x80 {
		dst[at] = byte(n)
	} else {
		var lenBuf [binary.MaxVarintLen64]byte
		l := binary.PutUvarint(lenBuf[:], uint64(n))
		dst = append(dst, lenBuf[:l-1]...)
		copy(dst[at+l:], dst[at+1:at+1+n])
		copy(dst[at:], lenBuf[:l])
	}
	return c.Second.Append(dst, v.Second)
}

func (c PairCodec[A, B]) Decode(src []byte) (Pair[A, B], error) {
	var p Pair[A, B]
	n, l := binary.Uvarint(src)
	if l <= 0 || n > uint64(len(src)-l) {
		return p, fmt.Errorf("state: bad pair length")
	}
	var err error
	if p.First, err = c.First.Decode(src[l : l+int(n)]); err != nil {
		return p, err
	}
	p.Second, err = c.Second.Decode(src[l+int(n):])
	return p, err
}

// FuncCodec adapts a pair of functions to a Codec, for a codec of a user
// type written by hand (append the fields with the codecs above, in a fixed
// order, after a version byte).
type FuncCodec[T any] struct {
	AppendFunc func(dst []byte, v T) []byte
	DecodeFunc func(src []byte) (T, error)
}

func (c FuncCodec[T]) Append(dst []byte, v T) []byte { return c.AppendFunc(dst, v) }
func (c FuncCodec[T]) Decode(src []byte) (T, error)  { return c.DecodeFunc(src) }
