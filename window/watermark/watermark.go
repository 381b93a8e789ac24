// Package watermark generates and combines event-time watermarks.
//
// A watermark W is the assertion "no more readings with event time ≤ W will
// arrive"; the window operator fires an event-time window [start, end) when
// W ≥ end−1 (Flink's EventTimeTrigger).
//
// Generators (BoundedOutOfOrder, Monotonous) turn the event times of one
// input into that input's watermark. A Combiner turns the watermarks of
// several inputs into one: the minimum over the inputs that are not idle.
// A Resume sits in front of what the caller emits: after a broker resumed
// the input's session it may hold the watermark for a bound of the
// readings' logged arrival time, and it tells which readings arrived in
// the resume's wake.
// Everything here is pure: the caller passes monotonic milliseconds where time
// matters and nothing reads a clock.
//
// Future skew: a reading stamped more than max_future_skew ahead of the
// device's clock must be dead-lettered by the caller (see TooFarInFuture)
// and never shown to a generator, so one unsynced sensor cannot push the
// watermark ahead and make every other reading late. Generators must only
// see accepted timestamps.
package watermark

import "math"

const (
	// Min is the watermark before any reading: nothing is known yet.
	Min int64 = math.MinInt64
	// Max is the end-of-input watermark: it fires and purges every event-time
	// window (and, in Eddy, flushes processing-time windows too).
	Max int64 = math.MaxInt64
)
