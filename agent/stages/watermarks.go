package stages

import (
	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/window/watermark"
)

// inputWatermarks gives each topic filter of an MQTT source its own
// bounded out-of-orderness watermark and combines them with the minimum, as
// Flink combines the watermarks of a source's partitions. A filter silent for
// idle_timeout (monotonic) stops holding the others back until it speaks
// again, so one quiet sensor group does not stall every window.
type inputWatermarks struct {
	filters []string
	gens    []*watermark.BoundedOutOfOrder
	comb    *watermark.Combiner
	cur     int
	now     int64
}

func newInputWatermarks(filters []string, boundMs, idleMs, nowMs int64) (*inputWatermarks, error) {
	w := &inputWatermarks{filters: filters}
	for range filters {
		g, err := watermark.NewBoundedOutOfOrder(boundMs)
		if err != nil {
			return nil, err
		}
		w.gens = append(w.gens, g)
	}
	c, err := watermark.NewCombiner(len(filters), idleMs, nowMs)
	if err != nil {
		return nil, err
	}
	w.comb = c
	return w, nil
}

// route selects the input of the next reading: the first filter its topic
// matches (the last one if none does, which cannot happen for a topic the
// broker delivered on these subscriptions).
func (w *inputWatermarks) route(topic string, nowMs int64) {
	w.now = nowMs
	w.cur = len(w.filters) - 1
	for i, f := range w.filters {
		if broker.MatchFilter(f, topic) {
			w.cur = i
			return
		}
	}
}

// Observe records an accepted reading of the routed input.
func (w *inputWatermarks) Observe(ts int64) int64 {
	return w.comb.Update(w.cur, w.gens[w.cur].Observe(ts), w.now)
}

func (w *inputWatermarks) Current() int64 { return w.comb.Current() }

// tick re-evaluates idleness when no reading arrives.
func (w *inputWatermarks) tick(nowMs int64) int64 { return w.comb.Tick(nowMs) }
