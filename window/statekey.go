package window

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/eddy-edge/eddy/window/aggregate"
)

// Byte layouts for a persistent Store (bbolt) and for checkpoints. All are
// architecture-independent; int64 times are stored big-endian with the sign
// bit flipped so that bytes.Compare orders them numerically.
//
// State keys (docs/architecture.md "State": keygroup | key | namespace):
//
//	prefix      = keyGroup:u16be keyLen:uvarint key
//	window      = prefix 'w' start:i64o end:i64o       → AppendWindowState value
//	merging set = prefix 's'                           → AppendWindows value
//	count       = prefix 'c'                           → uvarint value
//
// The key group leads so that one key group's state is one contiguous range
// (rescaling moves whole key groups between subtasks).
//
// Timer keys, ordered by bytes.Compare exactly as Store.PopTimer must return
// them — (domain, time, key bytes, window):
//
//	timer = domain:u8 time:i64o escapedKey keyGroup:u16be start:i64o end:i64o
//
// escapedKey writes 0x00 as 0x00 0xFF and ends with 0x00 0x01, so a key that
// is a prefix of another sorts first, as in bytes.Compare.
//
// Values:
//
//	windowState = version:u8(=1) fired:uvarint sinceFire:uvarint
//	              nextEarly:varint accs (aggregate.AppendAccs)
//	windows     = count:uvarint (start:varint end:varint)*count

// ErrCorruptState is returned (wrapped) when a state key or value cannot be
// decoded.
var ErrCorruptState = errors.New("window: corrupt state encoding")

// Namespace tags of state keys.
const (
	nsWindow     = 'w'
	nsMergingSet = 's'
	nsCount      = 'c'
)

// windowStateVersion is the version byte of AppendWindowState.
const windowStateVersion = 1

// AppendKeyPrefix appends keyGroup | key, the prefix of all of a key's state.
func AppendKeyPrefix(dst []byte, keyGroup uint16, key []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, keyGroup)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// AppendWindowKey appends the state key of (keyGroup, key, w).
func AppendWindowKey(dst []byte, keyGroup uint16, key []byte, w Window) []byte {
	dst = AppendKeyPrefix(dst, keyGroup, key)
	dst = append(dst, nsWindow)
	dst = appendOrderedInt(dst, w.Start)
	return appendOrderedInt(dst, w.End)
}

// AppendMergingSetKey appends the state key of a key's session windows.
func AppendMergingSetKey(dst []byte, keyGroup uint16, key []byte) []byte {
	return append(AppendKeyPrefix(dst, keyGroup, key), nsMergingSet)
}

// AppendCountKey appends the state key of a key's count-window counter.
func AppendCountKey(dst []byte, keyGroup uint16, key []byte) []byte {
	return append(AppendKeyPrefix(dst, keyGroup, key), nsCount)
}

// AppendTimerKey appends the timer key of (d, time, keyGroup, key, w).
func AppendTimerKey(dst []byte, d Domain, time int64, keyGroup uint16, key []byte, w Window) []byte {
	dst = append(dst, byte(d))
	dst = appendOrderedInt(dst, time)
	for _, c := range key {
		if c == 0 {
			dst = append(dst, 0, 0xFF)
		} else {
			dst = append(dst, c)
		}
	}
	dst = append(dst, 0, 1)
	dst = binary.BigEndian.AppendUint16(dst, keyGroup)
	dst = appendOrderedInt(dst, w.Start)
	return appendOrderedInt(dst, w.End)
}

// ParseTimerKey decodes a timer key. The returned Key is appended to keyBuf
// (reused memory, so the caller controls allocation).
func ParseTimerKey(b []byte, keyBuf []byte) (Timer, error) {
	var t Timer
	if len(b) < 1+8+2+2+16 {
		return t, fmt.Errorf("%w: timer key of %d bytes", ErrCorruptState, len(b))
	}
	t.Domain = Domain(b[0])
	if t.Domain < EventTime || t.Domain > CountDomain {
		return t, fmt.Errorf("%w: timer domain %d", ErrCorruptState, b[0])
	}
	t.Time = orderedInt(b[1:9])
	rest := b[9:]
	key := keyBuf[:0]
	for {
		i := bytes.IndexByte(rest, 0)
		if i < 0 || i+1 >= len(rest) {
			return t, fmt.Errorf("%w: unterminated timer key", ErrCorruptState)
		}
		key = append(key, rest[:i]...)
		esc := rest[i+1]
		rest = rest[i+2:]
		if esc == 1 {
			break
		}
		if esc != 0xFF {
			return t, fmt.Errorf("%w: bad escape in timer key", ErrCorruptState)
		}
		key = append(key, 0)
	}
	if len(rest) != 2+16 {
		return t, fmt.Errorf("%w: timer key tail of %d bytes", ErrCorruptState, len(rest))
	}
	t.Key = key
	t.KeyGroup = binary.BigEndian.Uint16(rest)
	t.Window = Window{orderedInt(rest[2:10]), orderedInt(rest[10:18])}
	return t, nil
}

// AppendWindowState appends the encoding of st (whose Accs belong to funcs).
func AppendWindowState(dst []byte, funcs []aggregate.Func, st *WindowState) []byte {
	dst = append(dst, windowStateVersion)
	dst = binary.AppendUvarint(dst, uint64(st.Fired))
	dst = binary.AppendUvarint(dst, uint64(st.SinceFire))
	dst = binary.AppendVarint(dst, st.NextEarly)
	return aggregate.AppendAccs(dst, funcs, st.Accs)
}

// DecodeWindowState decodes what AppendWindowState wrote into st, reusing
// st.Accs (and its sketches) when it has len(funcs) entries.
func DecodeWindowState(src []byte, funcs []aggregate.Func, st *WindowState) error {
	if len(src) == 0 || src[0] != windowStateVersion {
		return fmt.Errorf("%w: window state version", ErrCorruptState)
	}
	src = src[1:]
	var fields [2]uint64
	for i := range fields {
		v, k := binary.Uvarint(src)
		if k <= 0 || v > math.MaxInt64 {
			return fmt.Errorf("%w: window state header", ErrCorruptState)
		}
		fields[i], src = v, src[k:]
	}
	early, k := binary.Varint(src)
	if k <= 0 {
		return fmt.Errorf("%w: window state header", ErrCorruptState)
	}
	src = src[k:]
	st.Fired, st.SinceFire, st.NextEarly = int64(fields[0]), int64(fields[1]), early
	if len(st.Accs) != len(funcs) {
		st.Accs = make([]aggregate.Acc, len(funcs))
	}
	rest, err := aggregate.DecodeAccs(src, funcs, st.Accs)
	if err != nil {
		return fmt.Errorf("window: decode window state: %w", err)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorruptState, len(rest))
	}
	return nil
}

// AppendWindows appends the encoding of a merging window set.
func AppendWindows(dst []byte, ws []Window) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ws)))
	for _, w := range ws {
		dst = binary.AppendVarint(dst, w.Start)
		dst = binary.AppendVarint(dst, w.End)
	}
	return dst
}

// DecodeWindows appends the windows encoded by AppendWindows to dst.
func DecodeWindows(src []byte, dst []Window) ([]Window, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)) {
		return dst, fmt.Errorf("%w: window set length", ErrCorruptState)
	}
	src = src[k:]
	for range n {
		s, k1 := binary.Varint(src)
		if k1 <= 0 {
			return dst, fmt.Errorf("%w: window set entry", ErrCorruptState)
		}
		e, k2 := binary.Varint(src[k1:])
		if k2 <= 0 {
			return dst, fmt.Errorf("%w: window set entry", ErrCorruptState)
		}
		src = src[k1+k2:]
		dst = append(dst, Window{s, e})
	}
	if len(src) != 0 {
		return dst, fmt.Errorf("%w: %d trailing bytes", ErrCorruptState, len(src))
	}
	return dst, nil
}

// appendOrderedInt appends v big-endian with the sign bit flipped, so that
// byte order is numeric order.
func appendOrderedInt(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

func orderedInt(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
}
