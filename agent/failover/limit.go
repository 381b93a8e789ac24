package failover

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eddy-edge/eddy/config"
)

// restartLimit is why a region is not running: its restart strategy
// stopped restarting it (the agent is on its way out: it exits non-zero
// once its final checkpoint and WAL drains are done), or it is down, waiting
// for its next restart. /readyz says so meanwhile: a failure a restart does
// not cure (a full state store under exponential_delay, which never gives
// up) keeps the region down most of the time, and the probe shows why.
type restartLimit struct {
	pipelines string // the region's pipelines, comma-separated
	restarts  int    // restarts the region had
	span      time.Duration
	strategy  string
	err       string        // the failure that was not restarted, or the last one
	next      time.Duration // restarting: the delay before the next attempt; 0 when gave up
}

// detail is the one-line readiness detail.
func (l restartLimit) detail() string {
	e := strings.Join(strings.Fields(l.err), " ") // one line: panics carry stacks
	if len(e) > 300 {
		e = e[:300] + "…"
	}
	if l.next > 0 {
		return fmt.Sprintf("pipelines %s: down, restarting in %v: %d restarts in %v (strategy %s); last error: %s",
			l.pipelines, l.next.Round(time.Millisecond), l.restarts, l.span.Round(time.Millisecond), l.strategy, e)
	}
	return fmt.Sprintf("pipelines %s: restart limit reached: %d restarts in %v (strategy %s); last error: %s",
		l.pipelines, l.restarts, l.span.Round(time.Millisecond), l.strategy, e)
}

// restartLimits are the regions that gave up or are down, read by
// readiness.
type restartLimits struct {
	mu   sync.Mutex
	all  []restartLimit
	down map[string]restartLimit // by pipelines, while waiting to restart
}

func (s *restartLimits) add(l restartLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, l)
}

// setDown records that region l.pipelines waits l.next to restart;
// setUp(pipelines) ends it once the region runs again.
func (s *restartLimits) setDown(l restartLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down == nil {
		s.down = make(map[string]restartLimit)
	}
	s.down[l.pipelines] = l
}

func (s *restartLimits) setUp(pipelines string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.down, pipelines)
}

// list returns the regions that gave up, then those down, by name.
func (s *restartLimits) list() []restartLimit {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]restartLimit(nil), s.all...)
	for _, name := range slices.Sorted(maps.Keys(s.down)) {
		out = append(out, s.down[name])
	}
	return out
}

// nextRestart asks region r's strategy what to do about failure err at
// nowMs; when it gives up, the limit is recorded for /readyz.
func (fo *failover) nextRestart(r *region, nowMs int64, rnd float64, err error) (time.Duration, bool) {
	delay, giveUp := r.strategy.next(nowMs, rnd)
	l := restartLimit{pipelines: r.name, restarts: r.restarts, span: r.strategy.span(nowMs),
		strategy: r.strategy.cfg.Strategy, err: err.Error()}
	if giveUp {
		fo.limits.setUp(r.name)
		fo.limits.add(l)
	} else {
		l.restarts++ // the one about to happen
		l.next = max(delay, time.Millisecond)
		fo.limits.setDown(l)
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
