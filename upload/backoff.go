package upload

import "time"

// backoff computes retry delays: exponential from min, capped at max, with
// "equal jitter" (half the delay fixed, half random) so a fleet of devices
// whose uplink comes back together does not retry in lockstep, yet no retry
// comes sooner than half the nominal delay.
type backoff struct {
	min, max time.Duration
}

// delay returns the wait before retry number attempt (0 for the first
// retry). jitter is a random number in [0, 1).
func (b backoff) delay(attempt int, jitter float64) time.Duration {
	d := b.min
	for i := 0; i < attempt && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	return d/2 + time.Duration(jitter*float64(d/2))
}
