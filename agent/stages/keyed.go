package stages

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
	// blocks are the compiled per-key blocks in declaration order (a
	// dedup's is empty: the evaluator runs it, before the others): the
	// keyed stage chains them in this order.
	blocks []keyedBlockSpec
	// processing: a block runs on processing time (the agent's clock
	// drives its timers).
	processing bool
	// dedupID and dedup are the compiled dedup block (dedupID nil: none).
	dedupID *expr.Program
	dedup   keyed.Dedup
	// control collects the control paths the per-key expressions read:
	// the prepare stage captures their values per reading (none: nothing
	// is captured).
	control expr.ControlPaths
}

// keyedBlockSpec is one compiled per-key block: one field is set.
type keyedBlockSpec struct {
	report  *operators.ReportSpec
	alarm   *operators.AlarmSpec
	absence *operators.AbsenceSpec
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
	// Compiled in the order config.KeyedCalls lists their calls: the
	// report_by_exception value, the alarms', then the dedup id.
	report, alarms := -1, map[*config.Alarm]int{}
	for i, b := range p.Blocks {
		switch {
		case b.ReportByException != nil:
			report = i
		case b.Alarm != nil:
			alarms[b.Alarm] = i
		}
	}
	k.blocks = make([]keyedBlockSpec, len(p.Blocks))
	if rb := p.ReportByException; rb != nil && rb.Value != nil && report >= 0 {
		k.blocks[report].report = &operators.ReportSpec{Value: prog(rb.Value), Block: keyed.ReportByException{
			Deadband: rb.Deadband, HeartbeatMs: rb.Heartbeat.Milliseconds(), Time: timeDomain(rb.Time)}}
		k.processing = k.processing || rb.Time == config.ProcessingTime
	}
	for _, al := range p.Alarms {
		if i, ok := alarms[al]; ok && al.Raise != nil {
			k.blocks[i].alarm = &operators.AlarmSpec{Name: al.Name, Raise: prog(al.Raise), Clear: prog(al.Clear),
				Block: keyed.Alarm{MinDurationMs: al.MinDuration.Milliseconds()}}
		}
	}
	for i, b := range p.Blocks {
		if ab := b.Absence; ab != nil {
			k.blocks[i].absence = &operators.AbsenceSpec{Block: keyed.Absence{TimeoutMs: ab.Timeout.Milliseconds(), Time: timeDomain(ab.Time)}}
			k.processing = k.processing || ab.Time == config.ProcessingTime
		}
	}
	if dd := p.Dedup; dd != nil && dd.ID != nil {
		k.dedupID = prog(dd.ID)
		k.dedup = keyed.Dedup{WithinMs: dd.Within.Milliseconds(), Time: keyed.EventTimeDomain}
	}
	return diags
}

// timeDomain is the block time domain of a config time ("event",
// "processing").
func timeDomain(t string) keyed.TimeDomain {
	if t == config.ProcessingTime {
		return keyed.ProcessingTimeDomain
	}
	return keyed.EventTimeDomain
}

// finish moves the filter, map and aggregate arguments compiled into pl's
// prepare spec to the keyed subtasks and settles the order: event time
// when the pipeline has it (config checked that an explicit order fits).
func (k *keyedPlan) finish(pl *Plan, src *config.Source) hcl.Diagnostics {
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
	if pl.eventTime && spec.Timestamp != nil && p.Order != config.OrderArrival && !p.ArrivalOnly() {
		k.order = keyed.EventTime
	}
	if pl.control != nil && k.control.Len() > 0 {
		// The control state belongs to the prepare stage; the keyed
		// subtasks evaluate a reading later (in event-time order, once the
		// watermark passes it) and on other goroutines. So the prepare
		// stage captures the values in force when the reading came, and
		// the reading carries them (through the buffer and checkpoints).
		k.eval.Control = &k.control
		spec.Capture, spec.ControlState = &k.control, pl.control
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
// place of one): its operator keeps its state in st.backend, and its
// decoded per-key states within cacheBytes, their part of the subtask's
// share of state { cache } (stateShare); processing time is the
// readings' arrival.
func attachKeyed(pl *Plan, st *subtask, cacheBytes int64) error {
	k := pl.keyed
	op, err := keyed.New(st.backend, keyed.Options{Order: k.order, TTL: k.ttl, Calls: k.calls.Calls, CacheBytes: int(cacheBytes), Control: k.eval.Control != nil})
	if err != nil {
		return fmt.Errorf("agent: pipeline %q: %w", pl.cfg.Name, err)
	}
	spec := k.eval
	if spec.Decoder, err = newDecoder(k.src, spec.Schema); err != nil {
		return fmt.Errorf("agent: pipeline %q: %w", pl.cfg.Name, err)
	}
	stage := operators.NewKeyedStage(op, spec)
	st.task.SetKeyed(stage)
	if k.processing {
		stage.SetProcessingTime()
	}
	for _, b := range k.blocks {
		switch {
		case err != nil:
		case b.report != nil:
			err = stage.SetReport(*b.report)
		case b.alarm != nil:
			err = stage.SetAlarm(*b.alarm)
		case b.absence != nil:
			err = stage.SetAbsence(*b.absence)
		}
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
		parts = append(parts, "report_by_exception"+processingShape(p.ReportByException.Time))
	}
	for _, a := range p.Alarms {
		parts = append(parts, "alarm "+a.Name)
	}
	if p.Absence != nil {
		parts = append(parts, "absence"+processingShape(p.Absence.Time))
	}
	if p.Dedup != nil {
		parts = append(parts, "dedup")
	}
	for _, c := range calls {
		parts = append(parts, exprText(src, c))
	}
	return strings.Join(parts, "; ")
}

// processingShape marks a block on processing time in keyedShape: its
// state counts on another clock (and its timers are other timers), so a
// checkpoint of the block on event time means nothing to it. On event
// time, nothing: the shape of a checkpoint taken before the option
// existed.
func processingShape(t string) string {
	if t == config.ProcessingTime {
		return " on processing time"
	}
	return ""
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
func (p *Pipeline) keyedCounts(st *subtask, seen *keyedSeen) {
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
