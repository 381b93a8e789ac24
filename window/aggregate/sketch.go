package aggregate

import "math"

// Sketch is a bounded-memory quantile sketch in the style of DDSketch
// (Masson, Rim, Lee, VLDB 2019): values are counted in logarithmic buckets
// whose bounds grow by a factor Gamma = (1+RelativeAccuracy)/(1−RelativeAccuracy).
//
// Guarantee: for 0 ≤ q ≤ 1, Quantile(q) returns a value x̂ with
// |x̂ − x| ≤ RelativeAccuracy·|x|, where x is the exact lower quantile of the
// values added (the element of 0-based rank ⌊q·(n−1)⌋ in sorted order), as
// long as no bucket collapse has touched x's bucket. Each sign keeps at most
// MaxBuckets buckets; beyond that, the buckets of the smallest magnitudes are
// collapsed into one (their values then lose the guarantee). MaxBuckets
// buckets span a ratio of Gamma^MaxBuckets ≈ 4·10^17 between the largest and
// smallest magnitude of one sign, far beyond any sensor's range. Zero is
// counted exactly. Memory: 8 bytes per bucket between a sign's smallest and
// largest index, at most 2·MaxBuckets·8 bytes = 32 KiB.
type Sketch struct {
	zero uint64
	pos  bucketStore // values > 0, by index of the value
	neg  bucketStore // values < 0, by index of the magnitude
}

const (
	// RelativeAccuracy is the relative error bound of Sketch.Quantile.
	RelativeAccuracy = 0.01
	// MaxBuckets caps the buckets of each sign of a Sketch.
	MaxBuckets = 2048
)

var (
	gamma    = (1 + RelativeAccuracy) / (1 - RelativeAccuracy)
	lnGamma  = math.Log(gamma)
	midScale = 2 / (1 + gamma) // value(i) = midScale·γ^i, the bucket's relative midpoint
)

// NewSketch returns an empty sketch.
func NewSketch() *Sketch { return &Sketch{} }

// Reset empties s, keeping its memory.
func (s *Sketch) Reset() {
	s.zero = 0
	s.pos.reset()
	s.neg.reset()
}

// MemBytes approximates the heap memory s holds: the struct and the
// capacity of its bucket arrays (kept across Reset for reuse).
func (s *Sketch) MemBytes() int {
	return 64 + 8*(cap(s.pos.counts)+cap(s.neg.counts))
}

// Count is the number of values added.
func (s *Sketch) Count() uint64 { return s.zero + s.pos.total() + s.neg.total() }

// Add counts v. NaN and ±Inf are ignored (the aggregates never pass NaN).
func (s *Sketch) Add(v float64) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return
	case v > 0:
		s.pos.add(bucketIndex(v), 1)
	case v < 0:
		s.neg.add(bucketIndex(-v), 1)
	default:
		s.zero++
	}
}

// Merge adds all values of o to s.
func (s *Sketch) Merge(o *Sketch) {
	s.zero += o.zero
	s.pos.merge(&o.pos)
	s.neg.merge(&o.neg)
}

// CopyFrom makes s equal to o, reusing s's memory.
func (s *Sketch) CopyFrom(o *Sketch) {
	s.zero = o.zero
	s.pos.copyFrom(&o.pos)
	s.neg.copyFrom(&o.neg)
}

// Quantile returns the q-quantile (q clamped to [0, 1]) within the relative
// error bound above, or NaN for an empty sketch.
func (s *Sketch) Quantile(q float64) float64 {
	n := s.Count()
	if n == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	q = math.Max(0, math.Min(1, q))
	rank := uint64(q * float64(n-1)) // floor: the lower quantile
	var seen uint64
	// Ascending value order: negatives by decreasing magnitude, zero, positives.
	for i := len(s.neg.counts) - 1; i >= 0; i-- {
		seen += s.neg.counts[i]
		if seen > rank {
			return -bucketValue(s.neg.offset + int32(i))
		}
	}
	seen += s.zero
	if seen > rank {
		return 0
	}
	for i, c := range s.pos.counts {
		seen += c
		if seen > rank {
			return bucketValue(s.pos.offset + int32(i))
		}
	}
	panic("aggregate: sketch counts inconsistent with total")
}

// bucketIndex is ⌈log_γ(v)⌉ for v > 0: bucket i holds (γ^(i−1), γ^i].
func bucketIndex(v float64) int32 {
	return int32(math.Ceil(math.Log(v) / lnGamma))
}

// bucketValue is the point of bucket i whose relative distance to both bounds
// is RelativeAccuracy.
func bucketValue(i int32) float64 {
	return midScale * math.Exp(float64(i)*lnGamma)
}

// bucketStore is a dense array of counts for indices offset..offset+len−1,
// collapsing its lowest indices to stay within MaxBuckets.
type bucketStore struct {
	offset int32
	counts []uint64
	sum    uint64
}

func (b *bucketStore) reset() {
	clear(b.counts)
	b.counts = b.counts[:0]
	b.offset = 0
	b.sum = 0
}

func (b *bucketStore) total() uint64 { return b.sum }

func (b *bucketStore) add(i int32, c uint64) {
	b.sum += c
	if len(b.counts) == 0 {
		b.counts = append(b.counts[:0], c)
		b.offset = i
		return
	}
	hi := b.offset + int32(len(b.counts)) - 1
	switch {
	case i > hi:
		b.grow(b.offset, i)
	case i < b.offset:
		lo := i
		if hi-lo+1 > MaxBuckets {
			lo = hi - MaxBuckets + 1
		}
		b.grow(lo, hi)
	}
	if i < b.offset {
		i = b.offset // collapsed into the lowest bucket
	}
	b.counts[i-b.offset] += c
}

// grow makes the store cover [lo, hi], collapsing below hi−MaxBuckets+1.
func (b *bucketStore) grow(lo, hi int32) {
	if hi-lo+1 > MaxBuckets {
		lo = hi - MaxBuckets + 1
	}
	if lo > b.offset {
		// Collapse everything below lo into lo.
		var c uint64
		n := int(lo - b.offset)
		if n > len(b.counts) {
			n = len(b.counts)
		}
		for _, x := range b.counts[:n] {
			c += x
		}
		rest := b.counts[n:]
		copy(b.counts, rest)
		b.counts = b.counts[:len(rest)]
		b.offset += int32(n)
		if b.offset < lo {
			// The whole old range lies below lo.
			b.counts = b.counts[:0]
			b.offset = lo
		}
		if len(b.counts) == 0 {
			b.counts = append(b.counts, 0)
		}
		b.counts[0] += c
	}
	newLen := int(hi - lo + 1)
	shift := int(b.offset - lo)
	if cap(b.counts) < newLen {
		grown := make([]uint64, newLen, newLen+newLen/2)
		copy(grown[shift:], b.counts)
		b.counts = grown
	} else {
		old := len(b.counts)
		b.counts = b.counts[:newLen]
		copy(b.counts[shift:shift+old], b.counts[:old])
		clear(b.counts[:shift])
		clear(b.counts[shift+old:])
	}
	b.offset = lo
}

func (b *bucketStore) merge(o *bucketStore) {
	for i, c := range o.counts {
		if c != 0 {
			b.add(o.offset+int32(i), c)
		}
	}
}

func (b *bucketStore) copyFrom(o *bucketStore) {
	b.counts = append(b.counts[:0], o.counts...)
	b.offset = o.offset
	b.sum = o.sum
}
