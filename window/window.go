package window

import (
	"math"
	"strconv"
)

// Window is the half-open interval [Start, End) in milliseconds of event or
// processing time. For count windows the unit is the key's readings
// (0-based): [0, 3) holds a key's first three readings.
type Window struct {
	Start, End int64
}

// GlobalWindow is the single window of the Global assigner.
var GlobalWindow = Window{Start: math.MinInt64, End: math.MaxInt64}

// MaxTimestamp is the largest timestamp inside w, End−1: an event-time window
// fires when the watermark reaches it.
func (w Window) MaxTimestamp() int64 { return w.End - 1 }

// Intersects reports whether w and o overlap or touch ([0,5) and [5,9) do),
// the condition for merging session windows (Flink's TimeWindow.intersects).
func (w Window) Intersects(o Window) bool { return w.Start <= o.End && w.End >= o.Start }

// Cover returns the smallest window containing w and o.
func (w Window) Cover(o Window) Window {
	return Window{Start: min(w.Start, o.Start), End: max(w.End, o.End)}
}

// Less orders windows by End, then Start.
func (w Window) Less(o Window) bool {
	if w.End != o.End {
		return w.End < o.End
	}
	return w.Start < o.Start
}

func (w Window) String() string {
	return "[" + boundString(w.Start) + "," + boundString(w.End) + ")"
}

func boundString(t int64) string {
	switch t {
	case math.MinInt64:
		return "min"
	case math.MaxInt64:
		return "max"
	}
	return strconv.FormatInt(t, 10)
}

// StartOf returns the start of the window of size sizeMs and offset offsetMs
// that contains t: t − r with r = (t − offset) floor-mod size, so 0 ≤ r < size
// even for negative t − offset (Go's % truncates toward zero; Flink's
// TimeWindow.getWindowStartWithOffset).
func StartOf(t, offsetMs, sizeMs int64) int64 {
	r := (t - offsetMs) % sizeMs
	if r < 0 {
		r += sizeMs
	}
	return t - r
}

// addSat returns a+b for b ≥ 0, saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
