package stages

import (
	"fmt"

	"github.com/eddy-edge/eddy/operators"
)

// limitKeys bounds the pipeline's live keys to max (pipeline { max_keys }):
// every window subtask takes a new key from one budget, so the limit holds
// over the pipeline whatever the parallelism and however the keys spread
// over the subtasks.
func (p *Pipeline) limitKeys(max int) {
	p.keys = operators.NewKeyBudget(max)
	for _, st := range p.subtasks {
		st.task.LimitKeys(st.liveKeys, p.keys, p.deadLetter != nil)
	}
	if p.m.keys.Swap(p.keys) == nil {
		p.m.set.GetOrCreateGauge(fmt.Sprintf(`eddy_window_keys{pipeline=%q}`, p.name), func() float64 {
			if b := p.m.keys.Load(); b != nil {
				return float64(b.Live())
			}
			return 0
		})
	}
}

// countKeys counts the keys the subtasks' state holds (restored, or left
// by a region restart) into the key budget, before any subtask runs: a
// restart does not reset the limit. A key is counted even beyond max_keys
// (a smaller limit than the checkpoint was taken under): only new keys are
// refused until enough windows are purged.
func (p *Pipeline) countKeys() {
	if p.keys == nil {
		return
	}
	for _, st := range p.subtasks {
		n, err := st.liveKeys.Load(st.store)
		if err != nil {
			p.fatal(fmt.Errorf("pipeline %q subtask %d: counting keys for max_keys: %w", p.name, st.index, err))
			st.failed = true
			continue
		}
		p.keys.Add(n)
	}
	if n := p.keys.Live(); n > 0 {
		p.log.Info("keys in the restored state", "pipeline", p.name, "keys", n, "max_keys", p.keys.Max())
	}
}

// emitRefused counts, logs (rate limited) and dead-letters the readings the
// subtask refused for max_keys since its last call.
func (p *Pipeline) emitRefused(st *subtask) {
	t := st.task
	n := t.Refused - st.refusedSeen
	if n == 0 {
		return
	}
	st.refusedSeen = t.Refused
	p.m.deadLettered(operators.ReasonKeyLimit).Add(int(n))
	if p.keyLimitLog.allow(p.clk.WallMs()) {
		p.log.Warn("readings of new keys dead-lettered: the pipeline holds max_keys keys", "pipeline", p.name,
			"reason", operators.ReasonKeyLimit, "max_keys", p.keys.Max(), "readings", n)
	}
	if d := t.TakeRefused(); d != nil && p.deadLetter != nil {
		p.deadLetter.In <- SinkMsg{Delivery: d, Epoch: st.epoch}
	}
}
