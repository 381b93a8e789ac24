package agent

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state"
)

// TestRestartLimit_ShowsInReadiness: a region failing with a full state
// store, under fixed_delay with 2 attempts, is restarted twice; at the third
// failure the strategy gives up and /readyz turns not ready with a check
// naming the pipeline, the limit and the last error on one line.
func TestRestartLimit_ShowsInReadiness(t *testing.T) {
	a := mustBuildAgent(t, testConfig, true)
	ta := newTestAdmin(t, a, "")
	a.intro.MaxDisconnected = time.Hour
	r := a.failover.regions[0]
	*r.strategy = restartStrategy{cfg: config.Restart{Strategy: config.RestartFixedDelay, Attempts: 2, Delay: 10 * time.Millisecond}}
	failure := fmt.Errorf("pipeline %q subtask 0: window: state store: %w\n\tat the next line", r.name, state.ErrFull)
	now := int64(1000)
	for i := 0; i < 3; i++ {
		var rd admin.Readiness
		ta.getJSON(t, "/readyz", http.StatusOK, &rd)
		_, giveUp := a.failover.nextRestart(r, now, 0.5, failure)
		if giveUp != (i == 2) {
			t.Fatalf("failure %d: giveUp = %v", i+1, giveUp)
		}
		if !giveUp {
			r.restarts++ // as failover.restart counts a restart
			now += 1500
			a.failover.limits.setUp(r.name) // as failover.restart once the region runs
		}
	}
	var rd admin.Readiness
	ta.getJSON(t, "/readyz", http.StatusServiceUnavailable, &rd)
	name := "restarts/" + r.name
	if !hasFailed(rd, name) {
		t.Fatalf("readyz = %+v, want %s failing", rd, name)
	}
	for _, c := range rd.Checks {
		if c.Name != name {
			continue
		}
		want := fmt.Sprintf("pipelines %s: restart limit reached: 2 restarts in 3s (strategy fixed_delay); last error: ", r.name)
		if !strings.HasPrefix(c.Detail, want) || !strings.Contains(c.Detail, state.ErrFull.Error()) || strings.Contains(c.Detail, "\n") {
			t.Errorf("detail %q, want one line starting %q with the error", c.Detail, want)
		}
	}
}

// TestRestartStrategy_Span: the span a limit reports covers the failures
// the strategy counted.
func TestRestartStrategy_Span(t *testing.T) {
	tests := []struct {
		name  string
		cfg   config.Restart
		fails []int64
		want  time.Duration
	}{
		{"fixed_delay: since the first", config.Restart{Strategy: config.RestartFixedDelay, Attempts: 2}, []int64{100, 600, 2100}, 2 * time.Second},
		{"failure_rate: within the interval", config.Restart{Strategy: config.RestartFailureRate, MaxFailuresPerInterval: 1, FailureRateInterval: time.Second},
			[]int64{100, 5000, 5400}, 400 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := restartStrategy{cfg: tt.cfg}
			var giveUp bool
			for _, f := range tt.fails {
				_, giveUp = r.next(f, 0.5)
			}
			if !giveUp {
				t.Fatal("the strategy did not give up")
			}
			if got := r.span(tt.fails[len(tt.fails)-1]); got != tt.want {
				t.Errorf("span = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRestartLoop_ShowsInReadiness: under exponential_delay, which never
// gives up, a region waiting for its next restart is not ready, with a
// check saying when it restarts and why it failed; once it runs again the
// agent is ready.
func TestRestartLoop_ShowsInReadiness(t *testing.T) {
	a := mustBuildAgent(t, testConfig, true)
	ta := newTestAdmin(t, a, "")
	a.intro.MaxDisconnected = time.Hour
	r := a.failover.regions[0]
	*r.strategy = restartStrategy{cfg: config.Restart{Strategy: config.RestartExponentialDelay, InitialBackoff: time.Second,
		MaxBackoff: time.Minute, BackoffMultiplier: 2, ResetBackoffThreshold: time.Hour}}
	failure := fmt.Errorf("pipeline %q subtask 0: window: state store: %w", r.name, state.ErrFull)
	name := "restarts/" + r.name
	now := int64(1000)
	for i, wantNext := range []string{"1s", "2s", "4s"} {
		if _, giveUp := a.failover.nextRestart(r, now, 0.5, failure); giveUp {
			t.Fatal("exponential_delay gave up")
		}
		var rd admin.Readiness
		ta.getJSON(t, "/readyz", http.StatusServiceUnavailable, &rd)
		want := fmt.Sprintf("pipelines %s: down, restarting in %s: %d restarts in", r.name, wantNext, i+1)
		found := false
		for _, c := range rd.Checks {
			if c.Name == name && !c.OK {
				found = true
				if !strings.HasPrefix(c.Detail, want) || !strings.Contains(c.Detail, state.ErrFull.Error()) {
					t.Errorf("failure %d: detail %q, want it to start %q and carry the error", i+1, c.Detail, want)
				}
			}
		}
		if !found {
			t.Fatalf("failure %d: readyz = %+v, want %s failing", i+1, rd, name)
		}
		r.restarts++
		a.failover.limits.setUp(r.name)
		ta.getJSON(t, "/readyz", http.StatusOK, &rd)
		now += 500
	}
}
