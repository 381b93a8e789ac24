package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Restart strategies (Flink's names).
const (
	RestartExponentialDelay = "exponential_delay"
	RestartFixedDelay       = "fixed_delay"
	RestartFailureRate      = "failure_rate"
	RestartNone             = "none"
)

// Restart is the restart block: what the agent does when a pipeline fails
// (a state store that fails, a panic caught at a stage, a sink that keeps
// failing, a reading that cannot be dead-lettered). It restarts the
// pipeline's failover region (the pipelines sharing a source or sink with
// it) from the last completed checkpoint after a delay, each region with
// its own instance of the strategy, and exits non-zero (so systemd takes
// over) only when a strategy gives up.
type Restart struct {
	// Strategy is RestartExponentialDelay (default), RestartFixedDelay,
	// RestartFailureRate or RestartNone.
	Strategy string
	// Attempts is fixed_delay's number of restarts before giving up;
	// default 3.
	Attempts int
	// Delay is fixed_delay's and failure_rate's wait before a restart;
	// default 10s.
	Delay time.Duration
	// InitialBackoff, MaxBackoff, BackoffMultiplier and JitterFactor shape
	// exponential_delay's waits (defaults 1s, 5m, 2.0, 0.1);
	// ResetBackoffThreshold (default 1h) of failure-free running resets the
	// backoff. exponential_delay never gives up.
	InitialBackoff, MaxBackoff time.Duration
	BackoffMultiplier          float64
	JitterFactor               float64
	ResetBackoffThreshold      time.Duration
	// MaxFailuresPerInterval failures within FailureRateInterval make
	// failure_rate give up; defaults 3 and 5m.
	MaxFailuresPerInterval int
	FailureRateInterval    time.Duration
	DeclRange              hcl.Range
}

func (d *decoder) decodeRestart(b *hcl.Block) Restart {
	r := Restart{Strategy: RestartExponentialDelay, Attempts: 3, Delay: 10 * time.Second,
		InitialBackoff: time.Second, MaxBackoff: 5 * time.Minute, BackoffMultiplier: 2, JitterFactor: 0.1,
		ResetBackoffThreshold: time.Hour, MaxFailuresPerInterval: 3, FailureRateInterval: 5 * time.Minute}
	if b == nil {
		return r
	}
	a, _ := d.content(b, []string{"strategy", "attempts", "delay", "initial_backoff", "max_backoff",
		"backoff_multiplier", "jitter_factor", "reset_backoff_threshold", "max_failures_per_interval", "failure_rate_interval"})
	r.DeclRange = b.DefRange
	r.Strategy = a.enum("strategy", []string{RestartExponentialDelay, RestartFixedDelay, RestartFailureRate, RestartNone}, r.Strategy)
	r.Attempts = int(a.integer("attempts", 3, 0, 1<<31-1))
	r.Delay = a.duration("delay", r.Delay)
	r.InitialBackoff = a.duration("initial_backoff", r.InitialBackoff)
	r.MaxBackoff = a.duration("max_backoff", r.MaxBackoff)
	r.BackoffMultiplier = a.float("backoff_multiplier", 2, 1, 100)
	r.JitterFactor = a.float("jitter_factor", 0.1, 0, 1)
	r.ResetBackoffThreshold = a.duration("reset_backoff_threshold", r.ResetBackoffThreshold)
	r.MaxFailuresPerInterval = int(a.integer("max_failures_per_interval", 3, 1, 1<<31-1))
	r.FailureRateInterval = a.duration("failure_rate_interval", r.FailureRateInterval)
	if r.MaxBackoff < r.InitialBackoff {
		d.errorf(a.rangeOf("max_backoff"), "Value out of range", "\"max_backoff\" cannot be shorter than initial_backoff.")
	}
	return r
}
