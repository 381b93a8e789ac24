package stages

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/operators"
)

// Metrics are one pipeline's counters. Stages add per batch, not per
// reading, so the atomic adds stay off the per-reading path.
type Metrics struct {
	set        *metrics.Set
	name       string
	in         *metrics.Counter
	out        *metrics.Counter
	filtered   *metrics.Counter
	duplicates *metrics.Counter // readings a dedup block dropped
	late       *metrics.Counter
	unassigned *metrics.Counter
	// overflow counts result values written as null because they
	// overflowed float64 (reason "overflow").
	overflow  *metrics.Counter
	watermark atomic.Int64

	// lateResumed counts late readings that arrived just after the broker
	// resumed the session (reason "resumed_backlog": its stored messages
	// came behind newer ones); late counts the others (reason "late").
	lateResumed *metrics.Counter
	// controlKeys is the size of the control state (pipelines with one).
	controlKeys atomic.Int64
	// keys is the running generation's key budget (max_keys), else nil.
	keys atomic.Pointer[operators.KeyBudget]
	// state holds what each window subtask's state store held at its last
	// sample (stateUsage); a rebuilt pipeline (region restart) replaces it
	// whole, so a stopped generation is never counted.
	state atomic.Pointer[[]stateUsage]

	mu   sync.Mutex
	dead map[string]*metrics.Counter
}

// NewMetrics registers the counters of pipeline name in set: the
// eddy_readings_*, eddy_results_out_total, eddy_result_values_null_total
// and eddy_watermark_ms series labelled with it. A pipeline built with
// them adds eddy_window_keys (max_keys) and eddy_control_keys (a control
// stream) to the same set, and each dead-letter reason on first use.
// Call it once per pipeline name and keep the result across rebuilds of
// the pipeline: registering a name twice in one set panics.
func NewMetrics(set *metrics.Set, name string) *Metrics {
	l := fmt.Sprintf(`{pipeline=%q}`, name)
	m := &Metrics{set: set, name: name,
		in:         set.NewCounter("eddy_readings_in_total" + l),
		out:        set.NewCounter("eddy_results_out_total" + l),
		filtered:   set.NewCounter("eddy_readings_filtered_total" + l),
		duplicates: set.NewCounter("eddy_readings_duplicate_total" + l),
		late:       set.NewCounter(fmt.Sprintf(`eddy_readings_late_total{pipeline=%q,reason="late"}`, name)),
		unassigned: set.NewCounter("eddy_readings_unassigned_total" + l),
		overflow:   set.NewCounter(fmt.Sprintf(`eddy_result_values_null_total{pipeline=%q,reason="overflow"}`, name)),
		dead:       map[string]*metrics.Counter{},
	}
	m.lateResumed = set.NewCounter(fmt.Sprintf(`eddy_readings_late_total{pipeline=%q,reason="resumed_backlog"}`, name))
	m.watermark.Store(-1 << 63)
	set.NewGauge("eddy_watermark_ms"+l, func() float64 {
		if wm := m.watermark.Load(); wm != -1<<63 {
			return float64(wm)
		}
		return 0
	})
	return m
}

// lateTotal is every late reading, whatever the reason.
func (m *Metrics) lateTotal() uint64 { return m.late.Get() + m.lateResumed.Get() }

// deadLettered returns the counter for reason (created on first use: the
// rare path).
func (m *Metrics) deadLettered(reason string) *metrics.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.dead[reason]
	if !ok {
		c = m.set.NewCounter(fmt.Sprintf(`eddy_readings_dead_lettered_total{pipeline=%q,reason=%q}`, m.name, reason))
		m.dead[reason] = c
	}
	return c
}

// deadLetteredTotal sums every reason, for the API and tests.
func (m *Metrics) deadLetteredTotal() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n uint64
	for _, c := range m.dead {
		n += c.Get()
	}
	return n
}

// stateUsage is what one window subtask's state held when it last sampled
// it: at each checkpoint barrier (after the snapshot), at its start (after
// a restore) and at the end of its input. Sampling per checkpoint keeps the
// cost off the per-reading path; the figures are as fresh as the last
// checkpoint.
type stateUsage struct {
	last atomic.Pointer[admin.StateReport]
}

// stateTotals sums the subtasks' samples; nil for a pipeline without
// state (no window).
func (m *Metrics) stateTotals() *admin.StateReport {
	slots := m.state.Load()
	if slots == nil {
		return nil
	}
	t := &admin.StateReport{}
	for i := range *slots {
		if u := (*slots)[i].last.Load(); u != nil {
			t.Keys += u.Keys
			t.FileBytes += u.FileBytes
			t.FileWrittenBytes += u.FileWrittenBytes
			t.CheckpointReads += u.CheckpointReads
			t.MemoryBytes += u.MemoryBytes
			t.Windows += u.Windows
			t.Timers += u.Timers
		}
	}
	return t
}

// Status is the counters now, as the admin endpoint reports them
// (introspect.Counters); Name and Parallelism are left empty.
func (m *Metrics) Status() admin.PipelineStatus {
	st := admin.PipelineStatus{ReadingsIn: m.in.Get(), ResultsOut: m.out.Get(), Filtered: m.filtered.Get(),
		Late: m.lateTotal(), Unassigned: m.unassigned.Get(), DeadLettered: m.deadLetteredTotal()}
	if wm := m.watermark.Load(); wm != -1<<63 {
		st.WatermarkMs = &wm
	}
	return st
}

// DeadLetteredByReason is a copy of the dead-letter counts by reason.
func (m *Metrics) DeadLetteredByReason() map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]uint64, len(m.dead))
	for reason, c := range m.dead {
		out[reason] = c.Get()
	}
	return out
}

// State sums the window subtasks' last state samples; nil for a
// pipeline without state.
func (m *Metrics) State() *admin.StateReport { return m.stateTotals() }
