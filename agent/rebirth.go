package agent

import (
	"fmt"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/operators/io/sparkplug"
)

// lazyRebirther is a source's sparkplug.Rebirther, opened at the first
// request: most runs never need one.
type lazyRebirther struct {
	open func() (*sparkplug.Rebirther, error)

	mu     sync.Mutex
	r      *sparkplug.Rebirther
	err    error
	closed bool
}

func (l *lazyRebirther) get() *sparkplug.Rebirther {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r == nil && l.err == nil && !l.closed {
		l.r, l.err = l.open()
	}
	return l.r
}

// request asks node group/node for its births (stages.RebirthFunc).
func (l *lazyRebirther) request(group, node string) {
	if r := l.get(); r != nil {
		r.Request(group, node)
	}
}

func (l *lazyRebirther) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.r != nil {
		l.r.Close()
	}
}

// register exposes the source's rebirth requests on /metrics.
func (l *lazyRebirther) register(set *metrics.Set, source string) {
	stat := func(f func(*sparkplug.Rebirther) uint64) func() float64 {
		return func() float64 {
			l.mu.Lock()
			r := l.r
			l.mu.Unlock()
			if r == nil {
				return 0
			}
			return float64(f(r))
		}
	}
	set.NewGauge(fmt.Sprintf(`eddy_sparkplug_rebirth_requests_total{source=%q}`, source), stat((*sparkplug.Rebirther).Sent))
	set.NewGauge(fmt.Sprintf(`eddy_sparkplug_rebirth_dropped_total{source=%q}`, source), stat((*sparkplug.Rebirther).Dropped))
}
