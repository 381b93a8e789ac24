package watermark

import (
	"errors"
	"fmt"
)

// ErrNegativeBound is returned by NewBoundedOutOfOrder for a bound below 0.
var ErrNegativeBound = errors.New("watermark: negative out-of-orderness bound")

// BoundedOutOfOrder is the watermark generator for readings that arrive at
// most BoundMs out of order (Flink's BoundedOutOfOrdernessWatermarks):
//
//	watermark = max event time seen − bound − 1
//
// The "−1" makes a reading stamped exactly bound behind the maximum still on
// time. The watermark never goes back; before any reading it is Min. A reading
// older than the current watermark does not move it (the operator decides
// whether it is late). Observe only timestamps that passed the future-skew
// check (see TooFarInFuture). Not safe for concurrent use.
type BoundedOutOfOrder struct {
	bound int64
	max   int64
	seen  bool
}

// NewBoundedOutOfOrder returns a generator with the given bound in ms (≥ 0).
func NewBoundedOutOfOrder(boundMs int64) (*BoundedOutOfOrder, error) {
	if boundMs < 0 {
		return nil, fmt.Errorf("%w: %d ms", ErrNegativeBound, boundMs)
	}
	return &BoundedOutOfOrder{bound: boundMs}, nil
}

// NewMonotonous returns the generator for inputs whose timestamps never
// decrease: a bounded generator with bound 0 (watermark = max seen − 1).
func NewMonotonous() *BoundedOutOfOrder { return &BoundedOutOfOrder{} }

// Observe records the event time of an accepted reading and returns the
// current watermark.
func (g *BoundedOutOfOrder) Observe(ts int64) int64 {
	if !g.seen || ts > g.max {
		g.max, g.seen = ts, true
	}
	return g.Current()
}

// Current returns max seen − bound − 1, or Min before any reading (and when
// the subtraction would underflow).
func (g *BoundedOutOfOrder) Current() int64 {
	if !g.seen || g.max < Min+g.bound+1 {
		return Min
	}
	return g.max - g.bound - 1
}
