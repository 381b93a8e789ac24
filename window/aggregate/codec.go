package aggregate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Encoding of accumulators (architecture-independent; integers are varints as
// in encoding/binary, floats are IEEE 754 bits in 8 little-endian bytes):
//
//	accs    = version:u8(=1) count:uvarint acc*count
//	acc     = func:u8 n:uvarint [body if n > 0]
//	body    = Count:            (empty)
//	          Sum Avg Min Max:  a:f64
//	          First Last:       a:f64 t:varint
//	          Stddev Variance:  mean:f64 m2:f64
//	          Median Percentile: sketch
//	sketch  = zero:uvarint store(positive) store(negative)
//	store   = offset:varint len:uvarint count:uvarint*len
//
// Version 1 is the only version. A decoder rejects unknown versions, a func
// byte that differs from the expected func, truncation and trailing garbage
// with an error wrapping ErrCorrupt.

// EncodingVersion is the version byte written by AppendAccs.
const EncodingVersion = 1

// ErrCorrupt is returned (wrapped) when encoded accumulators cannot be decoded.
var ErrCorrupt = errors.New("aggregate: corrupt accumulator encoding")

// AppendAccs appends the versioned encoding of accs (accs[i] belongs to
// funcs[i]) to dst.
func AppendAccs(dst []byte, funcs []Func, accs []Acc) []byte {
	if len(funcs) != len(accs) {
		panic(fmt.Sprintf("aggregate: %d funcs for %d accumulators", len(funcs), len(accs)))
	}
	dst = append(dst, EncodingVersion)
	dst = binary.AppendUvarint(dst, uint64(len(accs)))
	for i := range accs {
		dst = AppendAcc(dst, funcs[i], &accs[i])
	}
	return dst
}

// DecodeAccs decodes what AppendAccs wrote into accs (len(accs) must equal
// len(funcs); existing sketches are reused) and returns the bytes after it.
func DecodeAccs(src []byte, funcs []Func, accs []Acc) ([]byte, error) {
	if len(src) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	if src[0] != EncodingVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, src[0], EncodingVersion)
	}
	n, k := binary.Uvarint(src[1:])
	if k <= 0 {
		return nil, fmt.Errorf("%w: bad accumulator count", ErrCorrupt)
	}
	if n != uint64(len(funcs)) || len(funcs) != len(accs) {
		return nil, fmt.Errorf("%w: %d accumulators, want %d", ErrCorrupt, n, len(funcs))
	}
	src = src[1+k:]
	var err error
	for i := range accs {
		if src, err = DecodeAcc(src, funcs[i], &accs[i]); err != nil {
			return nil, fmt.Errorf("aggregate: accumulator %d: %w", i, err)
		}
	}
	return src, nil
}

// AppendAcc appends the unversioned encoding of a (an accumulator of f).
func AppendAcc(dst []byte, f Func, a *Acc) []byte {
	dst = append(dst, byte(f))
	dst = binary.AppendUvarint(dst, uint64(a.N))
	if a.N == 0 {
		return dst
	}
	switch f {
	case Count:
	case Sum, Avg, Min, Max:
		dst = appendFloat(dst, a.A)
	case First, Last:
		dst = appendFloat(dst, a.A)
		dst = binary.AppendVarint(dst, a.T)
	case Stddev, Variance:
		dst = appendFloat(dst, a.A)
		dst = appendFloat(dst, a.B)
	case Median, Percentile:
		s := a.Sketch
		if s == nil {
			s = &Sketch{}
		}
		dst = binary.AppendUvarint(dst, s.zero)
		dst = s.pos.appendTo(dst)
		dst = s.neg.appendTo(dst)
	default:
		panic("aggregate: AppendAcc on invalid func " + f.String())
	}
	return dst
}

// DecodeAcc decodes one accumulator of f written by AppendAcc into a and
// returns the rest of src.
func DecodeAcc(src []byte, f Func, a *Acc) ([]byte, error) {
	d := decoder{src: src}
	if got := Func(d.byte()); d.err == nil && got != f {
		return nil, fmt.Errorf("%w: func %v, want %v", ErrCorrupt, got, f)
	}
	n := d.uvarint()
	a.Reset()
	a.N = int64(n)
	if n > math.MaxInt64 {
		d.fail("count overflows")
	}
	if n > 0 && d.err == nil {
		switch f {
		case Count:
		case Sum, Avg, Min, Max:
			a.A = d.float()
		case First, Last:
			a.A = d.float()
			a.T = d.varint()
		case Stddev, Variance:
			a.A = d.float()
			a.B = d.float()
		case Median, Percentile:
			if a.Sketch == nil {
				a.Sketch = NewSketch()
			}
			a.Sketch.zero = d.uvarint()
			d.store(&a.Sketch.pos)
			d.store(&a.Sketch.neg)
		default:
			d.fail("invalid func " + f.String())
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	return d.src, nil
}

func appendFloat(dst []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
}

func (b *bucketStore) appendTo(dst []byte) []byte {
	dst = binary.AppendVarint(dst, int64(b.offset))
	dst = binary.AppendUvarint(dst, uint64(len(b.counts)))
	for _, c := range b.counts {
		dst = binary.AppendUvarint(dst, c)
	}
	return dst
}

// decoder reads fields, remembering the first error.
type decoder struct {
	src []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.src) < 1 {
		d.fail("truncated")
		return 0
	}
	b := d.src[0]
	d.src = d.src[1:]
	return b
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.src)
	if k <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.src = d.src[k:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Varint(d.src)
	if k <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.src = d.src[k:]
	return v
}

func (d *decoder) float() float64 {
	if d.err != nil || len(d.src) < 8 {
		d.fail("truncated float")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.src))
	d.src = d.src[8:]
	return v
}

func (d *decoder) store(b *bucketStore) {
	off := d.varint()
	n := d.uvarint()
	if d.err != nil {
		return
	}
	if off < math.MinInt32 || off > math.MaxInt32 || n > MaxBuckets || n > uint64(len(d.src)) {
		d.fail("bad sketch store header")
		return
	}
	b.reset()
	b.offset = int32(off)
	for range n {
		c := d.uvarint()
		b.counts = append(b.counts, c)
		b.sum += c
	}
}
