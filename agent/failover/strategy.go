package failover

import (
	"slices"
	"time"

	"github.com/eddy-edge/eddy/config"
)

// Strategy decides, after a failure, whether the agent restarts its
// pipelines (from the last completed checkpoint) and after how long, with
// Flink's strategies. It is pure: time and randomness come in as arguments.
// Each region has one; the agent has one more for runs that fail as a
// whole.
type Strategy struct {
	cfg      config.Restart
	attempts int
	backoff  time.Duration
	last     int64   // ms of the previous failure; 0 before the first
	first    int64   // ms of the first failure; 0 before it
	failures []int64 // ms of recent failures (failure_rate)
}

// NewStrategy returns the strategy cfg configures, before any failure.
func NewStrategy(cfg config.Restart) *Strategy { return &Strategy{cfg: cfg} }

// Reconfigure makes r follow cfg from its next failure on; the failures
// it counted so far still count (a reload keeps them).
func (r *Strategy) Reconfigure(cfg config.Restart) { r.cfg = cfg }

// clone returns a copy that shares no memory with r.
func (r *Strategy) clone() Strategy {
	c := *r
	c.failures = slices.Clone(r.failures)
	return c
}

// Next is called with the monotonic time of a failure (ms) and a random
// number in [0, 1); it returns the delay before restarting, or giveUp.
func (r *Strategy) Next(nowMs int64, rnd float64) (delay time.Duration, giveUp bool) {
	c := r.cfg
	if r.first == 0 {
		r.first = nowMs
	}
	defer func() { r.last = nowMs }()
	switch c.Strategy {
	case config.RestartNone:
		return 0, true
	case config.RestartFixedDelay:
		r.attempts++
		return c.Delay, r.attempts > c.Attempts
	case config.RestartFailureRate:
		r.failures = append(r.failures, nowMs)
		keep := r.failures[:0]
		for _, f := range r.failures {
			if nowMs-f < c.FailureRateInterval.Milliseconds() {
				keep = append(keep, f)
			}
		}
		r.failures = keep
		return c.Delay, len(r.failures) > c.MaxFailuresPerInterval
	default: // exponential_delay never gives up
		if r.last == 0 || time.Duration(nowMs-r.last)*time.Millisecond >= c.ResetBackoffThreshold {
			r.backoff = c.InitialBackoff
		} else {
			r.backoff = min(time.Duration(float64(r.backoff)*c.BackoffMultiplier), c.MaxBackoff)
		}
		jitter := time.Duration(float64(r.backoff) * c.JitterFactor * (2*rnd - 1))
		return max(r.backoff+jitter, 0), false
	}
}
