package agent

import "time"

// clock gives the two times a pipeline needs: the device's wall clock, for
// the future-skew check and output timestamps, and a monotonic processing
// time for processing-time windows, so an NTP step on a device without a
// real-time clock neither fires nor stalls a window.
type clock struct {
	start   time.Time // carries Go's monotonic reading
	startMs int64
}

func newClock() clock {
	now := time.Now()
	return clock{start: now, startMs: now.UnixMilli()}
}

// monoMs is processing time in ms: the wall time at start plus the
// monotonic time elapsed since, so it reads like a timestamp but never jumps.
func (c clock) monoMs() int64 { return c.startMs + time.Since(c.start).Milliseconds() }

// wallMs is the wall clock in ms.
func (c clock) wallMs() int64 { return time.Now().UnixMilli() }
