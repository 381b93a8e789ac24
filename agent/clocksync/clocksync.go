// Package clocksync tells whether the device's wall clock can be trusted: a
// device without a real-time clock (a Raspberry Pi) boots with the time it
// shut down or with 1970, and its clock is only right once NTP has
// synchronised it. Checks against the wall clock (max_future_skew) must not
// judge readings by it before then.
package clocksync

import (
	"sync"
	"time"
)

// Source reports whether the system clock is synchronised to a time
// reference. Kernel is the real one; tests inject their own.
type Source interface {
	Synchronized() (bool, error)
}

// Cached reads a Source at most once per interval, so callers can ask per
// batch of readings without a system call each time. It is safe for
// concurrent use. Before the first read it reports synchronised.
type Cached struct {
	src      Source
	interval time.Duration
	onChange func(synced bool)
	onError  func(error)

	mu      sync.Mutex
	read    bool
	nextMs  int64 // monotonic ms of the next read
	synced  bool
	errSeen bool
}

// NewCached returns a Cached reading src at most once per interval.
// onChange, if set, is called when a read differs from the previous one (the
// first read differs only when it reports unsynchronised); onError, if set,
// is called for the first failed read, which counts as synchronised so the
// checks stay as configured. Both run with Cached's lock held: they must not
// call Synchronized.
func NewCached(src Source, interval time.Duration, onChange func(synced bool), onError func(error)) *Cached {
	return &Cached{src: src, interval: interval, onChange: onChange, onError: onError, synced: true}
}

// Synchronized reports the clock's status as last read, reading the source
// again first if the last read is at least interval old at nowMs (a
// monotonic time in ms).
func (c *Cached) Synchronized(nowMs int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read && nowMs < c.nextMs {
		return c.synced
	}
	c.read, c.nextMs = true, nowMs+c.interval.Milliseconds()
	synced, err := c.src.Synchronized()
	if err != nil {
		if !c.errSeen && c.onError != nil {
			c.onError(err)
		}
		c.errSeen, synced = true, true
	}
	if synced != c.synced {
		c.synced = synced
		if c.onChange != nil {
			c.onChange(synced)
		}
	}
	return c.synced
}
