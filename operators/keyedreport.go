package operators

import (
	"fmt"
	"math"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/operators/sink"
	"github.com/eddy-edge/eddy/state"
)

// ReportSpec is a pipeline's report_by_exception block, compiled.
type ReportSpec struct {
	Block keyed.ReportByException
	// Value is the reported expression, evaluated after the filter and the
	// map (it sees the map's fields).
	Value *expr.Program
}

// reportBlock is the block name in record ids.
const reportBlock = "report_by_exception"

// reporter hosts a keyed.ReportByException in a KeyedStage: its state is a
// ValueState of the keyed operator's context (with the pipeline's
// state_ttl), and each Report signal is one record of kind "report".
type reporter struct {
	spec  ReportSpec
	state *state.ValueState[keyed.ReportState]
	emit  func(keyed.Signal) // built once: a call does not allocate
	sig   keyed.Signal
	fired bool
	names []string // "value", then the map fields
	vals  []event.Value
}

// SetReport makes k run spec on every reading that passes its filter,
// instead of emitting reading records. Call it before the first reading.
func (k *KeyedStage) SetReport(spec ReportSpec) error {
	if err := spec.Block.Validate(); err != nil {
		return err
	}
	st, err := state.NewValueState[keyed.ReportState](k.op.Context(), reportBlock, keyed.ReportCodec{}, k.op.StateTTL())
	if err != nil {
		return fmt.Errorf("operators: %w", err)
	}
	r := &reporter{spec: spec, state: st, names: append([]string{"value"}, k.names...)}
	r.vals = make([]event.Value, len(r.names))
	r.emit = func(s keyed.Signal) { r.sig, r.fired = s, true }
	k.report = r
	return nil
}

// reportReading runs report_by_exception on the reading the evaluator
// passed, emitting a record when it reports it.
func (t *WindowTask) reportReading(r *keyed.Reading) error {
	k := t.keyed
	rp := k.report
	v := rp.spec.Value.Eval(&k.ev.Rec)
	num := math.NaN()
	switch v.Kind {
	case event.Number, event.Bool:
		num = v.Num
	case event.String:
		k.Rejected[keyed.ReasonWrongType]++
		t.dead.AddDeadLetter(t.pipeline, keyed.ReasonWrongType, "the report_by_exception value is a string, not a number", "", r.Seq, r.Payload)
		return nil
	}
	st, _, err := rp.state.Value()
	if err != nil {
		return err
	}
	rp.fired = false
	rp.spec.Block.OnReading(&st, keyed.At{Event: r.Time, Proc: r.Time}, num, rp.emit)
	// Written at every reading, reported or not, as the function state:
	// state_ttl counts from the key's last reading.
	if err := rp.state.Update(st); err != nil {
		return err
	}
	if !rp.fired {
		return nil
	}
	rp.vals[0] = v
	for i, s := range k.slots {
		rp.vals[i+1] = k.ev.Rec.Fields[s]
	}
	t.res = sink.Result{Pipeline: t.pipeline, Key: r.Key, Start: rp.sig.Time, End: rp.sig.Time, Kind: rp.sig.Kind.String(),
		Firing: int(rp.sig.Seq), Seq: r.Seq}
	t.results.AddSignal(t.deviceID, &t.res, reportBlock, rp.names, rp.vals)
	return nil
}
