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

// Limit is why a region is not running: its restart strategy stopped
// restarting it (the agent is on its way out: it exits non-zero once its
// final checkpoint and WAL drains are done), or it is down, waiting for its
// next restart. /readyz says so meanwhile: a failure a restart does not
// cure (a full state store under exponential_delay, which never gives up)
// keeps the region down most of the time, and the probe shows why.
type Limit struct {
	Pipelines string // the region's pipelines, comma-separated
	Restarts  int    // restarts the region had
	Span      time.Duration
	Strategy  string
	Err       string        // the failure that was not restarted, or the last one
	Next      time.Duration // restarting: the delay before the next attempt; 0 when gave up
}

// Detail is the one-line readiness detail.
func (l Limit) Detail() string {
	e := strings.Join(strings.Fields(l.Err), " ") // one line: panics carry stacks
	if len(e) > 300 {
		e = e[:300] + "…"
	}
	if l.Next > 0 {
		return fmt.Sprintf("pipelines %s: down, restarting in %v: %d restarts in %v (strategy %s); last error: %s",
			l.Pipelines, l.Next.Round(time.Millisecond), l.Restarts, l.Span.Round(time.Millisecond), l.Strategy, e)
	}
	return fmt.Sprintf("pipelines %s: restart limit reached: %d restarts in %v (strategy %s); last error: %s",
		l.Pipelines, l.Restarts, l.Span.Round(time.Millisecond), l.Strategy, e)
}

// limits are the regions that gave up or are down, read by readiness
// from any goroutine.
type limits struct {
	mu   sync.Mutex
	all  []Limit
	down map[string]Limit // by pipelines, while waiting to restart
}

func (s *limits) add(l Limit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, l)
}

// setDown records that region l.Pipelines waits l.Next to restart;
// setUp(pipelines) ends it once the region runs again.
func (s *limits) setDown(l Limit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down == nil {
		s.down = make(map[string]Limit)
	}
	s.down[l.Pipelines] = l
}

func (s *limits) setUp(pipelines string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.down, pipelines)
}

// list returns the regions that gave up, then those down, by name.
func (s *limits) list() []Limit {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]Limit(nil), s.all...)
	for _, name := range slices.Sorted(maps.Keys(s.down)) {
		out = append(out, s.down[name])
	}
	return out
}

// nextRestart asks region r's strategy what to do about failure err at
// nowMs; when it gives up, the limit is recorded for /readyz.
func (fo *Failover) nextRestart(r *region, nowMs int64, rnd float64, err error) (time.Duration, bool) {
	delay, giveUp := r.strategy.Next(nowMs, rnd)
	l := Limit{Pipelines: r.Name, Restarts: r.restarts, Span: r.strategy.span(nowMs),
		Strategy: r.strategy.cfg.Strategy, Err: err.Error()}
	if giveUp {
		fo.limits.setUp(r.Name)
		fo.limits.add(l)
	} else {
		l.Restarts++ // the one about to happen
		l.Next = max(delay, time.Millisecond)
		fo.limits.setDown(l)
	}
	return delay, giveUp
}

// span is the time the failures the strategy counts took, up to the one at
// nowMs (after Next recorded it): for failure_rate those still within
// failure_rate_interval, else all since the first.
func (r *Strategy) span(nowMs int64) time.Duration {
	first := r.first
	if r.cfg.Strategy == config.RestartFailureRate && len(r.failures) > 0 {
		first = r.failures[0]
	}
	return time.Duration(nowMs-first) * time.Millisecond
}
