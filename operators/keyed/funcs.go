package keyed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
)

// callState is what one per-key call remembers of a key: the value its
// argument had at the key's previous reading (prev, changed, delta, since),
// a time (since: when that value began; first_seen: the first reading) and
// a count (count_key). seen is false before the key's first reading.
//
// The value is its kind and number, a string's bytes arena[off:off+n]
// (val): 40 bytes, where an event.Value and the offsets took 56.
type callState struct {
	seen  bool
	kind  event.Kind
	off   int32
	n     int32
	num   float64
	at    int64
	count int64
}

// funcState is the state of every per-key call of a pipeline for one key:
// what its CachedValue holds, decoded, while the key is in the object
// cache. A reading costs no allocation.
//
// The first call and strings of up to shortArena bytes are held inline:
// at 100,000 keys every separate allocation a reading reads is a cache
// (and TLB) miss of its own, and a pipeline's typical state is one call
// of a short string (changed(event.state)).
type funcState struct {
	// What a reading reads, together: call 0, the inline arena and the
	// count (64 bytes).
	first callState // call 0
	// The arena of the string values' bytes: short[:sn], or long when
	// onLong (they outgrew short).
	short  [shortArena]byte
	sn     uint8
	onLong bool
	n      int32       // the number of calls
	more   []callState // calls 1…n-1
	long   []byte
}

// shortArena is the size of a funcState's inline arena.
const shortArena = 16

// len is the number of calls.
func (s *funcState) len() int { return int(s.n) }

// call returns call i's state.
func (s *funcState) call(i int) *callState {
	if i == 0 {
		return &s.first
	}
	return &s.more[i-1]
}

// arena returns the string values' bytes. Inline, it aliases s: use it
// before s moves.
func (s *funcState) arena() []byte {
	if s.onLong {
		return s.long
	}
	return s.short[:s.sn]
}

// arenaAppend appends b to the arena, moving it to long when it outgrows
// short.
func (s *funcState) arenaAppend(b []byte) {
	if !s.onLong {
		if int(s.sn)+len(b) <= shortArena {
			s.sn += uint8(copy(s.short[s.sn:], b))
			return
		}
		s.long = append(s.long[:0], s.short[:s.sn]...)
		s.onLong = true
	}
	s.long = append(s.long, b...)
}

// arenaTruncate cuts the arena to n bytes.
func (s *funcState) arenaTruncate(n int) {
	if s.onLong {
		s.long = s.long[:n]
		return
	}
	s.sn = uint8(n)
}

// setArena makes b the arena, inline if it fits (long keeps its memory
// for the next time).
func (s *funcState) setArena(b []byte) {
	s.long = s.long[:0]
	s.sn, s.onLong = 0, false
	s.arenaAppend(b)
}

// funcCodec encodes a funcState:
//
//	version:u8=1 n:uvarint (call)*n
//	call = flags:u8 [kind:u8 value] at:varint count:uvarint
//	value = number: f64le | string: len:uvarint bytes | bool: u8 | null, missing: —
//
// flags bit 0: seen. The calls are in the order of the pipeline's
// expr.KeyedCalls; a state with another number of calls is refused at
// restore by the pipeline's state shape, and read as corrupt here.
type funcCodec struct {
	st *funcState // decoded into, reused
}

const funcStateVersion = 1

func (funcCodec) Append(dst []byte, s funcState) []byte {
	dst = append(dst, funcStateVersion)
	dst = binary.AppendUvarint(dst, uint64(s.len()))
	arena := s.arena()
	for i := range s.len() {
		c := s.call(i)
		if !c.seen {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, 1, byte(c.kind))
		switch c.kind {
		case event.Number:
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.num))
		case event.String:
			dst = binary.AppendUvarint(dst, uint64(c.n))
			dst = append(dst, arena[c.off:c.off+c.n]...)
		case event.Bool:
			dst = append(dst, byte(c.num))
		}
		dst = binary.AppendVarint(dst, c.at)
		dst = binary.AppendUvarint(dst, uint64(c.count))
	}
	return dst
}

var errFuncState = errors.New("per-key function state")

func (fc funcCodec) Decode(src []byte) (funcState, error) {
	s, err := fc.decode(src)
	if err != nil {
		return funcState{}, err
	}
	return *s, nil
}

func (fc funcCodec) decode(src []byte) (*funcState, error) {
	s := fc.st
	if len(src) < 2 || src[0] != funcStateVersion {
		return nil, fmt.Errorf("%w: unknown version", errFuncState)
	}
	n, l := binary.Uvarint(src[1:])
	if l <= 0 || int(n) != s.len() {
		return nil, fmt.Errorf("%w: %d calls, the pipeline has %d", errFuncState, n, s.len())
	}
	b := src[1+l:]
	s.setArena(nil)
	for i := range s.len() {
		c := s.call(i)
		*c = callState{}
		if len(b) < 1 {
			return nil, fmt.Errorf("%w: truncated", errFuncState)
		}
		flags := b[0]
		b = b[1:]
		if flags&1 == 0 {
			continue
		}
		if len(b) < 1 {
			return nil, fmt.Errorf("%w: truncated", errFuncState)
		}
		c.seen, c.kind = true, event.Kind(b[0])
		b = b[1:]
		switch c.kind {
		case event.Number:
			if len(b) < 8 {
				return nil, fmt.Errorf("%w: truncated number", errFuncState)
			}
			c.num = math.Float64frombits(binary.LittleEndian.Uint64(b))
			b = b[8:]
		case event.String:
			sl, l := binary.Uvarint(b)
			if l <= 0 || sl > uint64(len(b)-l) {
				return nil, fmt.Errorf("%w: truncated string", errFuncState)
			}
			c.off, c.n = int32(len(s.arena())), int32(sl)
			s.arenaAppend(b[l : l+int(sl)])
			b = b[l+int(sl):]
		case event.Bool:
			if len(b) < 1 {
				return nil, fmt.Errorf("%w: truncated bool", errFuncState)
			}
			c.num = float64(b[0])
			b = b[1:]
		case event.Null, event.Missing:
		default:
			return nil, fmt.Errorf("%w: value kind %d", errFuncState, c.kind)
		}
		at, l := binary.Varint(b)
		if l <= 0 {
			return nil, fmt.Errorf("%w: truncated time", errFuncState)
		}
		b = b[l:]
		cnt, l := binary.Uvarint(b)
		if l <= 0 {
			return nil, fmt.Errorf("%w: truncated count", errFuncState)
		}
		b = b[l:]
		c.at, c.count = at, int64(cnt)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errFuncState, len(b))
	}
	return s, nil
}

// reset makes s the state of n calls of a key never seen.
func (s *funcState) reset(n int) {
	s.n, s.first = int32(n), callState{}
	if m := max(n-1, 0); cap(s.more) < m {
		s.more = make([]callState, m)
	} else {
		s.more = s.more[:m]
		clear(s.more)
	}
	s.setArena(nil)
}

// load makes s a copy of src (decoded into the codec's memory), keeping
// s's own memory.
func (s *funcState) load(src funcState) {
	more, long := s.more, s.long
	*s = src
	s.more = append(more[:0], src.more...)
	s.long = long[:0]
	if src.onLong {
		s.long = append(s.long, src.long...)
	}
}

// memBytes is the memory s holds beyond its own size.
func (s *funcState) memBytes() int {
	return cap(s.more)*int(unsafe.Sizeof(callState{})) + cap(s.long)
}

// touch reads the ends of s's inline part, which a reading reads (it
// spans two or three cache lines), and the first bytes of what s holds
// apart from itself: the calls past the first and a long arena
// (objCache.touch).
func (s *funcState) touch() uint64 {
	sum := uint64(s.first.n) + uint64(s.sn)
	if len(s.more) > 0 {
		c := &s.more[0] // 80 bytes: its two ends may be on two lines
		sum += uint64(c.kind) + uint64(c.n)
	}
	if s.onLong && len(s.long) > 0 {
		sum += uint64(s.long[0])
	}
	return sum
}

// compact drops from the arena the bytes of strings no call holds any
// more (set appends each new one), so a cached key's arena stays the size
// of its strings, using scratch, which it returns for the next call.
func (s *funcState) compact(scratch []byte) []byte {
	live := 0
	for i := range s.len() {
		if c := s.call(i); c.kind == event.String {
			live += int(c.n)
		}
	}
	arena := s.arena()
	if len(arena) == live {
		return scratch
	}
	scratch = scratch[:0]
	for i := range s.len() {
		if c := s.call(i); c.kind == event.String {
			off := int32(len(scratch))
			scratch = append(scratch, arena[c.off:c.off+c.n]...)
			c.off = off
		}
	}
	s.setArena(scratch)
	return scratch
}

// step computes call i of calls for rec (at rec.Time) into rec.Keyed[i]
// and updates s. The argument is evaluated on rec as it is now.
//
// The functions, for a key whose previous reading (of those this call
// saw) had argument value p, at this reading's value x and time t:
//
//	prev(x)      p; null at the key's first reading
//	changed(x)   x != p (as ==: kind and value); true at the first reading
//	delta(x)     x − p; x when x < p (a counter reset: it restarted from
//	             0); null at the first reading and when x is null; a null
//	             reading leaves p as it was
//	since(x)     t − the time of the reading at which x took its current
//	             value; 0 at the first reading and when x changes now
//	first_seen() the time of the key's first reading
//	count_key()  the key's readings so far, this one included
//
// It reports whether the result overflowed float64 (a delta between
// values of opposite sign near ±1.797e308): it is null then, as an
// expression's overflow is, and the caller counts it.
func (s *funcState) step(calls []expr.KeyedCall, i int, rec *event.Record) (overflowed bool) {
	c := s.call(i)
	call := &calls[i]
	var x event.Value
	if call.Arg != nil {
		x = call.Arg.Eval(rec)
	}
	t := rec.Time
	out := event.Value{Kind: event.Null}
	switch call.Func {
	case expr.Prev:
		if c.seen {
			out = copyOut(rec, s.val(c))
		}
		s.set(c, x)
	case expr.Changed:
		out = event.BoolValue(!c.seen || !sameValue(s.val(c), x))
		s.set(c, x)
	case expr.Delta:
		if x.Kind != event.Number {
			break // null or a wrong type: no reading of the counter
		}
		if c.seen {
			switch d := x.Num - c.num; {
			case x.Num < c.num:
				out = event.NumberValue(x.Num)
			case math.IsInf(d, 0):
				overflowed = true
			default:
				out = event.NumberValue(d)
			}
		}
		s.set(c, x)
	case expr.Since:
		if !c.seen || !sameValue(s.val(c), x) {
			c.at = t
			s.set(c, x)
		}
		out = event.NumberValue(float64(t - c.at))
	case expr.FirstSeen:
		if !c.seen {
			c.seen, c.at = true, t
		}
		out = event.NumberValue(float64(c.at))
	case expr.CountKey:
		c.seen = true
		c.count++
		out = event.NumberValue(float64(c.count))
	}
	rec.Keyed[i] = out
	return overflowed
}

// set remembers x as c's value; a string's bytes go to the arena (which
// the next Decode rebuilds, so it does not grow past one reading's). The
// string c holds stays when x is the same (a changed() that saw no change),
// and is overwritten when it ends the arena: then compact has nothing to do.
func (s *funcState) set(c *callState, x event.Value) {
	had := c.seen && c.kind == event.String
	c.seen = true
	switch x.Kind {
	case event.String:
		if had {
			arena := s.arena()
			if string(arena[c.off:c.off+c.n]) == string(x.Str) {
				return
			}
			if int(c.off+c.n) == len(arena) {
				s.arenaTruncate(int(c.off))
			}
		}
		c.off = int32(len(s.arena()))
		s.arenaAppend(x.Str)
		c.n = int32(len(s.arena())) - c.off
	case event.Missing:
		x.Kind = event.Null
	}
	c.kind, c.num = x.Kind, x.Num
}

// val returns c's value, a string aliasing the arena.
func (s *funcState) val(c *callState) event.Value {
	v := event.Value{Kind: c.kind, Num: c.num}
	if v.Kind == event.String {
		v.Str = s.arena()[c.off : c.off+c.n : c.off+c.n]
	}
	return v
}

// copyOut returns v with a string copied into rec.Scratch, so the result
// outlives the state's next update.
func copyOut(rec *event.Record, v event.Value) event.Value {
	if v.Kind == event.String {
		start := len(rec.Scratch)
		rec.Scratch = append(rec.Scratch, v.Str...)
		v.Str = rec.Scratch[start:]
	}
	return v
}

// sameValue is == of the expression language: same kind and value; null
// and missing are one value.
func sameValue(a, b event.Value) bool {
	an, bn := a.IsNull(), b.IsNull()
	if an || bn {
		return an == bn
	}
	if a.Kind != b.Kind {
		return false
	}
	if a.Kind == event.String {
		return bytes.Equal(a.Str, b.Str)
	}
	return a.Num == b.Num
}
