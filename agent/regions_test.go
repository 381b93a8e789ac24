package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/agent/failover"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state"
)

// TestFailoverRegions: the agent describes each pipeline by the sources it
// reads (from, control) and the sinks it writes (to, late_output,
// dead_letter), so that pipelines sharing any of them form one region.
func TestFailoverRegions(t *testing.T) {
	const head = `
agent {
  data_dir = "%DATA%"
  admin    = ""
}
source "file" "a" { path = "/dev/null" }
source "file" "b" { path = "/dev/null" }
source "file" "c" { path = "/dev/null" }
sink "stdout" "one" {}
sink "stdout" "two" {}
sink "stdout" "three" {}
`
	for _, tc := range []struct {
		name, pipelines string
		want            []string // "pipelines sources sinks", sorted
	}{
		{"separate", `
pipeline "x" {
  from = source.file.a
  to   = [sink.stdout.one]
}
pipeline "y" {
  from = source.file.b
  to   = [sink.stdout.two]
}`, []string{"x a one", "y b two"}},
		{"shared source", `
pipeline "x" {
  from = source.file.a
  to   = [sink.stdout.one]
}
pipeline "y" {
  from = source.file.a
  to   = [sink.stdout.two]
}
pipeline "z" {
  from = source.file.b
  to   = [sink.stdout.three]
}`, []string{"x,y a one,two", "z b three"}},
		{"shared sink", `
pipeline "x" {
  from = source.file.a
  to   = [sink.stdout.one]
}
pipeline "y" {
  from = source.file.b
  to   = [sink.stdout.one]
}`, []string{"x,y a,b one"}},
		{"control source and dead letters", `
pipeline "x" {
  from = source.file.a
  to   = [sink.stdout.one]
}
pipeline "y" {
  from    = source.file.b
  control = source.file.a
  to      = [sink.stdout.two]
}
pipeline "z" {
  from        = source.file.c
  to          = [sink.stdout.three]
  dead_letter = sink.stdout.two
}`, []string{"x,y,z a,b,c one,three,two"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := mustBuildAgent(t, head+tc.pipelines, false)
			var got []string
			for _, r := range a.failover.Regions() {
				srcs, sinks := slices.Sorted(slices.Values(r.Sources)), slices.Sorted(slices.Values(r.Sinks))
				got = append(got, r.Name+" "+strings.Join(srcs, ",")+" "+strings.Join(sinks, ","))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("regions %q, want %q", got, tc.want)
			}
		})
	}
}

// regionsOnly is a failover.Host that routes and records failures but
// stops and starts nothing: the tests below look at what readiness says.
type regionsOnly struct{ fail map[string]func(error) }

func (h *regionsOnly) Route(r failover.Region, fail func(error)) { h.fail[r.Name] = fail }
func (h *regionsOnly) Shortage(error) (disk.Shortage, bool)      { return disk.Shortage{}, false }
func (h *regionsOnly) WaitForSpace(context.Context, failover.Region, disk.Shortage, error) {
}
func (h *regionsOnly) StopRegion(failover.Region, error) {}
func (h *regionsOnly) StartRegion(r failover.Region, fail func(error)) error {
	h.Route(r, fail)
	return nil
}

// withFailover gives a built agent a failover of cfg whose clock is *now
// and whose waits are instant; onWait runs as each wait starts.
func withFailover(a *Agent, cfg config.Restart, now *int64, onWait func()) *regionsOnly {
	var descs []failover.Pipeline
	for _, p := range a.flow.pipelines {
		descs = append(descs, describePipeline(p))
	}
	a.failover = failover.New(descs, failover.Options{Restart: cfg, Log: a.log, Metrics: a.metrics,
		NowMs: func() int64 { return *now }, Rand: func() float64 { return 0.5 },
		After: func(time.Duration) <-chan time.Time {
			if onWait != nil {
				onWait()
			}
			c := make(chan time.Time, 1)
			c <- time.Time{}
			return c
		}})
	h := &regionsOnly{fail: map[string]func(error){}}
	a.failover.Route(h)
	return h
}

// TestRestartLimit_ShowsInReadiness: a region failing with a full state
// store, under fixed_delay with 2 attempts, is restarted twice; at the third
// failure the strategy gives up and /readyz turns not ready with a check
// naming the pipeline, the limit and the last error on one line.
func TestRestartLimit_ShowsInReadiness(t *testing.T) {
	a := mustBuildAgent(t, testConfig, true)
	ta := newTestAdmin(t, a, "")
	a.intro.MaxDisconnected = time.Hour
	now := int64(1000)
	h := withFailover(a, config.Restart{Strategy: config.RestartFixedDelay, Attempts: 2, Delay: 10 * time.Millisecond}, &now, nil)
	r := a.failover.Regions()[0]
	failure := fmt.Errorf("pipeline %q subtask 0: window: state store: %w\n\tat the next line", r.Name, state.ErrFull)
	for i := 0; i < 3; i++ {
		var rd admin.Readiness
		ta.getJSON(t, "/readyz", http.StatusOK, &rd)
		h.fail[r.Name](failure)
		err := a.failover.Restart(context.Background(), h, <-a.failover.Failed())
		if errors.Is(err, failover.ErrGaveUp) != (i == 2) {
			t.Fatalf("failure %d: %v", i+1, err)
		}
		now += 1500
	}
	var rd admin.Readiness
	ta.getJSON(t, "/readyz", http.StatusServiceUnavailable, &rd)
	name := "restarts/" + r.Name
	if !hasFailed(rd, name) {
		t.Fatalf("readyz = %+v, want %s failing", rd, name)
	}
	for _, c := range rd.Checks {
		if c.Name != name {
			continue
		}
		want := fmt.Sprintf("pipelines %s: restart limit reached: 2 restarts in 3s (strategy fixed_delay); last error: ", r.Name)
		if !strings.HasPrefix(c.Detail, want) || !strings.Contains(c.Detail, state.ErrFull.Error()) || strings.Contains(c.Detail, "\n") {
			t.Errorf("detail %q, want one line starting %q with the error", c.Detail, want)
		}
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
	now := int64(1000)
	var waiting admin.Readiness
	h := withFailover(a, config.Restart{Strategy: config.RestartExponentialDelay, InitialBackoff: time.Second,
		MaxBackoff: time.Minute, BackoffMultiplier: 2, ResetBackoffThreshold: time.Hour}, &now, func() {
		waiting = admin.Readiness{}
		ta.getJSON(t, "/readyz", http.StatusServiceUnavailable, &waiting)
	})
	r := a.failover.Regions()[0]
	failure := fmt.Errorf("pipeline %q subtask 0: window: state store: %w", r.Name, state.ErrFull)
	name := "restarts/" + r.Name
	for i, wantNext := range []string{"1s", "2s", "4s"} {
		h.fail[r.Name](failure)
		if err := a.failover.Restart(context.Background(), h, <-a.failover.Failed()); err != nil {
			t.Fatalf("exponential_delay: %v", err)
		}
		want := fmt.Sprintf("pipelines %s: down, restarting in %s: %d restarts in", r.Name, wantNext, i+1)
		found := false
		for _, c := range waiting.Checks {
			if c.Name == name && !c.OK {
				found = true
				if !strings.HasPrefix(c.Detail, want) || !strings.Contains(c.Detail, state.ErrFull.Error()) {
					t.Errorf("failure %d: detail %q, want it to start %q and carry the error", i+1, c.Detail, want)
				}
			}
		}
		if !found {
			t.Fatalf("failure %d: readyz while waiting = %+v, want %s failing", i+1, waiting, name)
		}
		var rd admin.Readiness
		ta.getJSON(t, "/readyz", http.StatusOK, &rd)
		now += 500
	}
}
