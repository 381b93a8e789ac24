// Package aggregate holds the incremental accumulators of Eddy's window
// aggregates: count, sum, min, max, avg, first, last, stddev, variance,
// median and percentile.
//
// One Acc holds the running state of one aggregate over one (key, window).
// Accumulators are incremental (Add is O(1), or O(1) amortized for the
// quantile sketch), mergeable (Merge, used when session windows merge) and
// encodable to a compact, versioned, architecture-independent byte format
// (AppendAcc, DecodeAcc; see codec.go) for the state backend and checkpoints.
//
// Null values: an input value of NaN means null. Every aggregate skips nulls,
// except Count with no argument, which counts readings. The result of an
// aggregate that has seen no non-null value (sum, min, max, avg, first, last,
// stddev, variance, median, percentile) is NaN, which the sink writes as null.
package aggregate

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Func names an aggregate function. The zero Func is invalid.
type Func uint8

const (
	Invalid    Func = iota // not an aggregate; rejected by Validate
	Count                  // number of readings (no argument) or of non-null values (with one)
	Sum                    // sum of non-null values
	Min                    // smallest non-null value
	Max                    // largest non-null value
	Avg                    // arithmetic mean of non-null values (sum / count)
	First                  // value with the smallest event time; ties keep the earliest arrival
	Last                   // value with the largest event time; ties keep the latest arrival
	Stddev                 // population standard deviation (Welford)
	Variance               // population variance (Welford)
	Median                 // percentile 0.5 of the sketch (the lower median, ±1% relative)
	Percentile             // percentile q of the sketch (±1% relative)
	numFuncs
)

var funcNames = [numFuncs]string{
	Invalid: "invalid", Count: "count", Sum: "sum", Min: "min", Max: "max",
	Avg: "avg", First: "first", Last: "last", Stddev: "stddev",
	Variance: "variance", Median: "median", Percentile: "percentile",
}

func (f Func) String() string {
	if f < numFuncs {
		return funcNames[f]
	}
	return "func(" + strconv.Itoa(int(f)) + ")"
}

// ErrUnknownFunc is returned by ParseFunc for a name that is not an aggregate.
var ErrUnknownFunc = errors.New("aggregate: unknown function")

// ParseFunc returns the Func called name ("count", "avg", "percentile", ...).
func ParseFunc(name string) (Func, error) {
	for f := Count; f < numFuncs; f++ {
		if funcNames[f] == name {
			return f, nil
		}
	}
	return Invalid, fmt.Errorf("%w %q", ErrUnknownFunc, name)
}

// Valid reports whether f is a known aggregate.
func (f Func) Valid() bool { return f > Invalid && f < numFuncs }

// UsesSketch reports whether f keeps a quantile sketch.
func (f Func) UsesSketch() bool { return f == Median || f == Percentile }

// Acc is the accumulator of one aggregate over one (key, window). The zero Acc
// is empty and ready for use. Which fields mean what depends on the Func, so
// an Acc must always be used with the same Func:
//
//	Count          N = readings (or non-null values)
//	Sum, Avg       N = non-null values, A = sum
//	Min, Max       N = non-null values, A = extreme
//	First, Last    N = non-null values, A = value, T = its event time
//	Stddev, Var    N = non-null values, A = mean, B = sum of squared deviations (Welford's M2)
//	Median, Pct    Sketch
//
// An Acc is not safe for concurrent use.
type Acc struct {
	N      int64
	A, B   float64
	T      int64
	Sketch *Sketch
}

// Reset empties a, keeping its sketch's memory for reuse.
func (a *Acc) Reset() {
	s := a.Sketch
	*a = Acc{}
	if s != nil {
		s.Reset()
		a.Sketch = s
	}
}

// Add folds value v of a reading with event time t into a. v = NaN is null:
// it is counted by Count (readings) and skipped by everything else.
// countNulls selects Count's flavour: true counts readings, false counts
// non-null values; it is ignored by the other functions.
func (a *Acc) Add(f Func, v float64, t int64, countNulls bool) {
	if f == Count {
		if countNulls || !math.IsNaN(v) {
			a.N++
		}
		return
	}
	if math.IsNaN(v) {
		return
	}
	switch f {
	case Sum, Avg:
		a.N++
		a.A += v
	case Min:
		if a.N == 0 || v < a.A {
			a.A = v
		}
		a.N++
	case Max:
		if a.N == 0 || v > a.A {
			a.A = v
		}
		a.N++
	case First:
		// Strictly earlier replaces: on a tie the earliest arrival stays.
		if a.N == 0 || t < a.T {
			a.A, a.T = v, t
		}
		a.N++
	case Last:
		// Equal or later replaces: on a tie the latest arrival wins.
		if a.N == 0 || t >= a.T {
			a.A, a.T = v, t
		}
		a.N++
	case Stddev, Variance:
		// Welford's online update: numerically stable, one pass.
		a.N++
		d := v - a.A
		a.A += d / float64(a.N)
		a.B += d * (v - a.A)
	case Median, Percentile:
		if a.Sketch == nil {
			a.Sketch = NewSketch()
		}
		a.Sketch.Add(v)
		a.N++
	default:
		panic("aggregate: Add on invalid func " + f.String())
	}
}

// Merge folds b into a (both accumulators of f); b is not modified.
// First/Last break event-time ties in favour of a, because the windows merged
// by a session merge hold disjoint time ranges, so ties cannot arise there.
func (a *Acc) Merge(f Func, b *Acc) {
	if b.N == 0 {
		return
	}
	if a.N == 0 && !f.UsesSketch() {
		*a = Acc{N: b.N, A: b.A, B: b.B, T: b.T, Sketch: a.Sketch}
		return
	}
	switch f {
	case Count:
		a.N += b.N
	case Sum, Avg:
		a.N += b.N
		a.A += b.A
	case Min:
		a.A = math.Min(a.A, b.A)
		a.N += b.N
	case Max:
		a.A = math.Max(a.A, b.A)
		a.N += b.N
	case First:
		if b.T < a.T {
			a.A, a.T = b.A, b.T
		}
		a.N += b.N
	case Last:
		if b.T > a.T {
			a.A, a.T = b.A, b.T
		}
		a.N += b.N
	case Stddev, Variance:
		// Chan et al.'s pairwise combination of Welford states.
		n := a.N + b.N
		d := b.A - a.A
		fa, fb, fn := float64(a.N), float64(b.N), float64(n)
		a.A += d * fb / fn
		a.B += b.B + d*d*fa*fb/fn
		a.N = n
	case Median, Percentile:
		if b.Sketch == nil {
			return
		}
		if a.Sketch == nil {
			a.Sketch = NewSketch()
		}
		a.Sketch.Merge(b.Sketch)
		a.N += b.N
	default:
		panic("aggregate: Merge on invalid func " + f.String())
	}
}

// CopyFrom makes a an independent copy of b (sketches are deep-copied, reusing
// a's sketch memory).
func (a *Acc) CopyFrom(b *Acc) {
	s := a.Sketch
	*a = Acc{N: b.N, A: b.A, B: b.B, T: b.T}
	if b.Sketch != nil {
		if s == nil {
			s = NewSketch()
		}
		s.CopyFrom(b.Sketch)
	} else if s != nil {
		s.Reset()
	}
	a.Sketch = s
}

// Value is Result for a firing: a result that overflowed float64 (a sum
// beyond ±1.797e308, or a mean or variance computed from one) is ±Inf, and
// an overflow whose sign is lost (+Inf − Inf is NaN) is +Inf too, so NaN
// still means only that no value was seen. Sinks write both as null;
// callers count ±Inf as an overflow.
func (a *Acc) Value(f Func, q float64) float64 {
	v := a.Result(f, q)
	if math.IsNaN(v) && a.N > 0 && f != Median && f != Percentile {
		return math.Inf(1)
	}
	return v
}

// Result returns the aggregate's value: NaN (null) when a has seen no
// non-null value, except Count, which is 0 then. q is the quantile of
// Percentile, in [0, 1]; Median ignores it.
func (a *Acc) Result(f Func, q float64) float64 {
	if f == Count {
		return float64(a.N)
	}
	if a.N == 0 {
		return math.NaN()
	}
	switch f {
	case Sum, Min, Max, First, Last:
		return a.A
	case Avg:
		return a.A / float64(a.N)
	case Variance:
		return a.B / float64(a.N)
	case Stddev:
		return math.Sqrt(a.B / float64(a.N))
	case Median:
		return a.Sketch.Quantile(0.5)
	case Percentile:
		return a.Sketch.Quantile(q)
	}
	panic("aggregate: Result on invalid func " + f.String())
}
