package agent

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/state"
)

// keyedPlan is the per-key part of the plan of a pipeline whose
// expressions call per-key functions (prev, changed, …): its filter, map
// and aggregate arguments are evaluated in the keyed subtasks, after the
// readings are partitioned and put in order, not in the prepare stage.
type keyedPlan struct {
	calls expr.KeyedCalls
	// eval has no Decoder: each subtask gets its own (newDecoder).
	eval  keyed.EvalSpec
	src   *config.Source
	order keyed.Order
	ttl   time.Duration
	// report and alarm are the compiled per-key block, or nil.
	report  *operators.ReportSpec
	alarm   *operators.AlarmSpec
	absence *operators.AbsenceSpec
	// dedupID and dedup are the compiled dedup block (dedupID nil: none).
	dedupID *expr.Program
	dedup   keyed.Dedup
}

// newKeyedPlan returns the keyed plan of p, or nil when p calls no per-key
// function and has no per-key block (then nothing changes for it).
func newKeyedPlan(p *config.Pipeline) *keyedPlan {
	if !p.Keyed() {
		return nil
	}
	return &keyedPlan{ttl: p.StateTTL}
}

// compileBlocks compiles the expressions of p's per-key blocks into
// schema with opts (per-key function calls in them join the pipeline's,
// after those of the aggregate arguments, as config.KeyedCalls lists
// them). Call it before the pipeline's decoder is built: the blocks read
// fields of their own.
func (k *keyedPlan) compileBlocks(p *config.Pipeline, schema *event.Schema, opts expr.Options) hcl.Diagnostics {
	var diags hcl.Diagnostics
	prog := func(e hcl.Expression) *expr.Program {
		if e == nil {
			return nil
		}
		pr, d := expr.CompileWith(e, schema, opts)
		diags = append(diags, d...)
		return pr
	}
	if rb := p.ReportByException; rb != nil && rb.Value != nil {
		k.report = &operators.ReportSpec{Value: prog(rb.Value), Block: keyed.ReportByException{
			Deadband: rb.Deadband, HeartbeatMs: rb.Heartbeat.Milliseconds(), Time: keyed.EventTimeDomain}}
	}
	if al := p.Alarm; al != nil && al.Raise != nil {
		k.alarm = &operators.AlarmSpec{Name: al.Name, Raise: prog(al.Raise), Clear: prog(al.Clear),
			Block: keyed.Alarm{MinDurationMs: al.MinDuration.Milliseconds()}}
	}
	if ab := p.Absence; ab != nil {
		k.absence = &operators.AbsenceSpec{Block: keyed.Absence{TimeoutMs: ab.Timeout.Milliseconds(), Time: keyed.EventTimeDomain}}
	}
	if dd := p.Dedup; dd != nil && dd.ID != nil {
		k.dedupID = prog(dd.ID)
		k.dedup = keyed.Dedup{WithinMs: dd.Within.Milliseconds(), Time: keyed.EventTimeDomain}
	}
	return diags
}

// finish moves the filter, map and aggregate arguments compiled into pl's
// prepare spec to the keyed subtasks and settles the order: event time
// when the pipeline has it (config checked that an explicit order fits).
func (k *keyedPlan) finish(pl *plan, src *config.Source) hcl.Diagnostics {
	p, spec := pl.cfg, &pl.prep
	var diags hcl.Diagnostics
	k.src = src
	k.eval = keyed.EvalSpec{Schema: spec.Schema, Filter: spec.Filter, AggArgs: spec.AggArgs}
	for i, m := range spec.Maps {
		k.eval.Maps = append(k.eval.Maps, keyed.MapField{Name: p.Map[i].Name, Slot: m.Slot, Prog: m.Prog})
	}
	spec.Filter, spec.Maps, spec.AggArgs = nil, nil, nil
	if pl.window == nil && spec.Timestamp != nil {
		pl.eventTime = true // the ordering buffer needs the watermark
	}
	k.order = keyed.Arrival
	if pl.eventTime && spec.Timestamp != nil && p.Order != config.OrderArrival {
		k.order = keyed.EventTime
	}
	if p.Control != nil {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Per-key functions with a control stream",
			Detail:  "A pipeline with per-key functions evaluates its expressions in its keyed subtasks, which cannot read control.* yet; remove the control stream or the per-key functions.",
			Subject: p.Control.Range.Ptr()})
	}
	// The key is computed in the prepare stage, before the map: it cannot
	// read a field the map assigns.
	if p.Key != nil {
		for _, tr := range p.Key.Variables() {
			if tr.RootName() != "event" || len(tr) < 2 {
				continue
			}
			a, ok := tr[1].(hcl.TraverseAttr)
			if !ok {
				continue
			}
			for _, m := range p.Map {
				if m.Name == a.Name {
					diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Key reads a map field",
						Detail:  fmt.Sprintf("In a pipeline with per-key functions the key is computed before the map (the map runs per key), so event.%s is the reading's own field, not the map's; key on a field of the reading.", a.Name),
						Subject: tr.SourceRange().Ptr()})
				}
			}
		}
	}
	return diags
}

// attachKeyed puts the keyed stage in front of subtask st's window (or in
// place of one): its operator keeps its state in st.backend.
func (a *Agent) attachKeyed(pl *plan, st *subtask) error {
	k := pl.keyed
	// The decoded per-key states get the subtask's share of state { cache },
	// as its bbolt cache does (both count in eddy_state_memory_bytes).
	cache := int(a.memory.stateCache / int64(a.totalSubtasks()))
	op, err := keyed.New(st.backend, keyed.Options{Order: k.order, TTL: k.ttl, Calls: k.calls.Calls, CacheBytes: cache})
	if err != nil {
		return fmt.Errorf("agent: pipeline %q: %w", pl.cfg.Name, err)
	}
	spec := k.eval
	if spec.Decoder, err = newDecoder(k.src, spec.Schema); err != nil {
		return fmt.Errorf("agent: pipeline %q: %w", pl.cfg.Name, err)
	}
	stage := operators.NewKeyedStage(op, spec)
	st.task.SetKeyed(stage)
	switch {
	case k.report != nil:
		err = stage.SetReport(*k.report)
	case k.alarm != nil:
		err = stage.SetAlarm(*k.alarm)
	case k.absence != nil:
		err = stage.SetAbsence(*k.absence)
	}
	if err == nil && k.dedupID != nil {
		err = stage.SetDedup(k.dedupID, k.dedup)
	}
	if err != nil {
		return fmt.Errorf("agent: pipeline %q: %w", pl.cfg.Name, err)
	}
	return nil
}

// keyedShape names what the per-key state of p depends on: the calls in
// order and the order of processing (a buffer left by event-time order
// means nothing to arrival order).
func keyedShape(src []byte, p *config.Pipeline) string {
	calls := p.KeyedCalls()
	if !p.Keyed() {
		return ""
	}
	parts := []string{p.Order}
	if p.ReportByException != nil {
		parts = append(parts, "report_by_exception")
	}
	if p.Alarm != nil {
		parts = append(parts, "alarm "+p.Alarm.Name)
	}
	if p.Absence != nil {
		parts = append(parts, "absence")
	}
	if p.Dedup != nil {
		parts = append(parts, "dedup")
	}
	for _, c := range calls {
		parts = append(parts, exprText(src, c))
	}
	return strings.Join(parts, "; ")
}

// keyedSnapshot is the snapshot of st's backend without the expired
// per-key state (the TTL's cleanup at checkpoints).
func keyedSnapshot(st *subtask, snap state.Snapshot) state.Snapshot {
	if k := st.task.Keyed(); k != nil {
		return k.FilterSnapshot(snap)
	}
	return snap
}

// flushKeyed writes the readings st's keyed stage holds for the watermark
// into st.backend, so the snapshot taken next holds them.
func flushKeyed(st *subtask) error {
	if k := st.task.Keyed(); k != nil {
		return k.Flush()
	}
	return nil
}

// keyedErr returns the sticky state error of st's keyed stage, or nil.
func keyedErr(st *subtask) error {
	if k := st.task.Keyed(); k != nil {
		return k.Err()
	}
	return nil
}

// keyedCounts adds what st's keyed stage filtered and dead-lettered since
// the last call (seen keeps the totals) to the pipeline's metrics.
func (p *pipeline) keyedCounts(st *subtask, seen *keyedSeen) {
	k := st.task.Keyed()
	if k == nil {
		return
	}
	if d := k.Filtered - seen.filtered; d > 0 {
		p.m.filtered.Add(int(d))
		seen.filtered = k.Filtered
	}
	if d := k.Duplicates - seen.duplicates; d > 0 {
		p.m.duplicates.Add(int(d))
		seen.duplicates = k.Duplicates
	}
	for reason, n := range k.Rejected {
		if d := n - seen.rejected[reason]; d > 0 {
			p.m.deadLettered(reason).Add(int(d))
			if seen.rejected == nil {
				seen.rejected = map[string]int64{}
			}
			seen.rejected[reason] = n
		}
	}
}

// keyedSeen is what keyedCounts reported of a subtask so far.
type keyedSeen struct {
	filtered   int64
	duplicates int64
	rejected   map[string]int64
}
