package failover

import (
	"testing"
	"time"

	"github.com/eddy-edge/eddy/config"
)

func TestRestartStrategy(t *testing.T) {
	base := config.Restart{Strategy: config.RestartExponentialDelay, Attempts: 2, Delay: 10 * time.Second,
		InitialBackoff: time.Second, MaxBackoff: 4 * time.Second, BackoffMultiplier: 2, ResetBackoffThreshold: time.Minute,
		MaxFailuresPerInterval: 2, FailureRateInterval: time.Minute}
	type step struct {
		atMs   int64
		delay  time.Duration
		giveUp bool
	}
	cases := []struct {
		name     string
		strategy string
		steps    []step
	}{
		{"none gives up at once", config.RestartNone, []step{{1000, 0, true}}},
		{"fixed delay gives up after its attempts", config.RestartFixedDelay, []step{
			{1000, 10 * time.Second, false}, {2000, 10 * time.Second, false}, {3000, 10 * time.Second, true}}},
		{"failure rate counts failures within the interval", config.RestartFailureRate, []step{
			{1000, 10 * time.Second, false}, {2000, 10 * time.Second, false},
			{70_000, 10 * time.Second, false}, // the first two are older than a minute
			{71_000, 10 * time.Second, false}, {72_000, 10 * time.Second, true}}},
		{"exponential doubles up to the cap and resets after quiet", config.RestartExponentialDelay, []step{
			{1000, time.Second, false}, {2000, 2 * time.Second, false}, {3000, 4 * time.Second, false},
			{4000, 4 * time.Second, false}, {200_000, time.Second, false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			cfg.Strategy = c.strategy
			r := NewStrategy(cfg)
			for i, s := range c.steps {
				d, give := r.Next(s.atMs, 0.5) // rnd 0.5: no jitter
				if d != s.delay || give != s.giveUp {
					t.Fatalf("step %d: (%v, %v), want (%v, %v)", i, d, give, s.delay, s.giveUp)
				}
			}
		})
	}
}

func TestRestartStrategy_Jitter(t *testing.T) {
	r := NewStrategy(config.Restart{Strategy: config.RestartExponentialDelay, InitialBackoff: 10 * time.Second,
		MaxBackoff: time.Minute, BackoffMultiplier: 2, JitterFactor: 0.1, ResetBackoffThreshold: time.Hour})
	if d, _ := r.Next(1, 0); d != 9*time.Second {
		t.Fatalf("low jitter: %v", d)
	}
	r = NewStrategy(r.cfg)
	if d, _ := r.Next(1, 0.9999999); d < 10999*time.Millisecond {
		t.Fatalf("high jitter: %v", d)
	}
}
