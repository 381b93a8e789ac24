package agent

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/eddy-edge/eddy/config"
)

// restartLimit is why a region's restart strategy stopped restarting it:
// the agent is on its way out (it exits non-zero once its final checkpoint
// and WAL drains are done), and /readyz says so meanwhile.
type restartLimit struct {
	pipelines string // the region's pipelines, comma-separated
	restarts  int    // restarts the region had
	span      time.Duration
	strategy  string
	err       string // the failure that was not restarted
}

// detail is the one-line readiness detail.
func (l restartLimit) detail() string {
	e := strings.Join(strings.Fields(l.err), " ") // one line: panics carry stacks
	if len(e) > 300 {
		e = e[:300] + "…"
	}
	return fmt.Sprintf("pipelines %s: restart limit reached: %d restarts in %v (strategy %s); last error: %s",
		l.pipelines, l.restarts, l.span.Round(time.Millisecond), l.strategy, e)
}

// restartLimits are the regions that gave up, read by readiness.
type restartLimits struct {
	mu  sync.Mutex
	all []restartLimit
}

func (s *restartLimits) add(l restartLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, l)
}

func (s *restartLimits) list() []restartLimit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]restartLimit(nil), s.all...)
}

// nextRestart asks region r's strategy what to do about failure err at
// nowMs; when it gives up, the limit is recorded for /readyz.
func (fo *failover) nextRestart(r *region, nowMs int64, rnd float64, err error) (time.Duration, bool) {
	delay, giveUp := r.strategy.next(nowMs, rnd)
	if giveUp {
		fo.limits.add(restartLimit{pipelines: r.name, restarts: r.restarts, span: r.strategy.span(nowMs),
			strategy: r.strategy.cfg.Strategy, err: err.Error()})
	}
	return delay, giveUp
}

// span is the time the failures the strategy counts took, up to the one at
// nowMs (after next recorded it): for failure_rate those still within
// failure_rate_interval, else all since the first.
func (r *restartStrategy) span(nowMs int64) time.Duration {
	first := r.first
	if r.cfg.Strategy == config.RestartFailureRate && len(r.failures) > 0 {
		first = r.failures[0]
	}
	return time.Duration(nowMs-first) * time.Millisecond
}
