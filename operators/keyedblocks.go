package operators

import (
	"fmt"
	"math"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/operators/sink"
)

// ReportSpec is a pipeline's report_by_exception block, compiled.
type ReportSpec struct {
	Block keyed.ReportByException
	// Value is the reported expression, evaluated after the filter and the
	// map (it sees the map's fields).
	Value *expr.Program
}

// AlarmSpec is a pipeline's alarm block, compiled.
type AlarmSpec struct {
	Name  string // the block name in record ids
	Block keyed.Alarm
	// Raise and Clear are evaluated after the filter and the map; Clear is
	// nil to clear when Raise is false.
	Raise, Clear *expr.Program
}

// AbsenceSpec is a pipeline's absence block, compiled.
type AbsenceSpec struct {
	Block keyed.Absence // event time only: its timers are the keyed operator's
}

// absenceBlock is the block name of absence in record ids.
const absenceBlock = "absence"

// reportBlock is the block name of report_by_exception in record ids.
const reportBlock = "report_by_exception"

// signalBlock is the per-key block hosted in a KeyedStage (one at most): a
// pure state machine of operators/keyed whose state is a CachedValue of the
// keyed operator (with the pipeline's state_ttl), written at
// every reading so that state_ttl counts from the key's last reading, and
// whose signals become records.
type signalBlock struct {
	name    string
	report  *ReportSpec
	alarm   *AlarmSpec
	absence *AbsenceSpec
	bstate  *keyed.CachedValue[keyed.AbsenceState]
	rstate  *keyed.CachedValue[keyed.ReportState]
	astate  *keyed.CachedValue[keyed.AlarmState]
	emit    func(keyed.Signal) // built once: a call does not allocate
	sigs    [2]keyed.Signal
	nsig    int
	names   []string // report: "value", then the map fields; alarm: the map fields
	vals    []event.Value
}

// SetReport makes k run spec on every reading that passes its filter,
// instead of emitting reading records. Call it before the first reading.
func (k *KeyedStage) SetReport(spec ReportSpec) error {
	if err := spec.Block.Validate(); err != nil {
		return err
	}
	b := k.newBlock(reportBlock, append([]string{"value"}, k.names...))
	b.report = &spec
	var err error
	b.rstate, err = keyed.NewCachedValue[keyed.ReportState](k.op, reportBlock, keyed.ReportCodec{})
	return err
}

// SetAlarm makes k run spec on every reading that passes its filter,
// instead of emitting reading records. Call it before the first reading.
func (k *KeyedStage) SetAlarm(spec AlarmSpec) error {
	if err := spec.Block.Validate(); err != nil {
		return err
	}
	b := k.newBlock(spec.Name, k.names)
	b.alarm = &spec
	var err error
	b.astate, err = keyed.NewCachedValue[keyed.AlarmState](k.op, "alarm", keyed.AlarmCodec{})
	return err
}

// SetAbsence makes k run spec on every reading that passes its filter and
// on the key's event-time timers, instead of emitting reading records.
// Call it before the first reading.
func (k *KeyedStage) SetAbsence(spec AbsenceSpec) error {
	if err := spec.Block.Validate(); err != nil {
		return err
	}
	if spec.Block.Time != keyed.EventTimeDomain {
		return fmt.Errorf("%w: absence on %v time: only event time is supported", keyed.ErrBadBlock, spec.Block.Time)
	}
	b := k.newBlock(absenceBlock, k.names)
	b.absence = &spec
	var err error
	b.bstate, err = keyed.NewCachedValue[keyed.AbsenceState](k.op, absenceBlock, keyed.AbsenceCodec{})
	return err
}

// moveTimer replaces the current key's timer at old by one at next
// (either may be keyed.NoTimer).
func (k *KeyedStage) moveTimer(old, next int64) error {
	if old == next {
		return nil
	}
	if old != keyed.NoTimer {
		if err := k.op.DeleteTimer(old); err != nil {
			return err
		}
	}
	if next != keyed.NoTimer {
		return k.op.RegisterTimer(next)
	}
	return nil
}

// timer is the keyed operator's TimerHandler: an absence deadline of the
// current key passed.
func (t *WindowTask) timer(_ uint16, key []byte, now int64) error {
	b := t.keyed.block
	if b == nil || b.absence == nil {
		return nil
	}
	st, _, err := b.bstate.Value()
	if err != nil {
		return err
	}
	b.nsig = 0
	next := b.absence.Block.OnTimer(&st, now, b.emit)
	if err := b.bstate.Update(st); err != nil {
		return err
	}
	if next != keyed.NoTimer {
		if err := t.keyed.op.RegisterTimer(next); err != nil {
			return err
		}
	}
	for i := range b.vals {
		b.vals[i] = event.Value{} // no reading: the map fields are null
	}
	t.emitSignals(key)
	return nil
}

func (k *KeyedStage) newBlock(name string, names []string) *signalBlock {
	b := &signalBlock{name: name, names: names, vals: make([]event.Value, len(names))}
	b.emit = func(s keyed.Signal) {
		if b.nsig < len(b.sigs) {
			b.sigs[b.nsig] = s
			b.nsig++
		}
	}
	k.block = b
	return b
}

// blockReading runs the stage's block on the reading the evaluator passed
// and emits a record per signal.
func (t *WindowTask) blockReading(r *keyed.Reading) error {
	k := t.keyed
	b := k.block
	rec := &k.ev.Rec
	at := keyed.At{Event: r.Time, Proc: r.Time}
	b.nsig = 0
	off := 0
	switch {
	case b.report != nil:
		v := b.report.Value.Eval(rec)
		num := math.NaN()
		switch v.Kind {
		case event.Number, event.Bool:
			num = v.Num
		case event.String:
			t.rejectBlock(r, "the report_by_exception value is a string, not a number")
			return nil
		}
		st, _, err := b.rstate.Value()
		if err != nil {
			return err
		}
		b.report.Block.OnReading(&st, at, num, b.emit)
		if err := b.rstate.Update(st); err != nil {
			return err
		}
		b.vals[0] = v
		off = 1
	case b.absence != nil:
		st, _, err := b.bstate.Value()
		if err != nil {
			return err
		}
		old := b.absence.Block.NextTimer(st)
		next := b.absence.Block.OnReading(&st, at, b.emit)
		if err := b.bstate.Update(st); err != nil {
			return err
		}
		if err := k.moveTimer(old, next); err != nil {
			return err
		}
	case b.alarm != nil:
		raise, err := b.alarm.Raise.EvalBool(rec)
		if err != nil {
			t.rejectBlock(r, fmt.Sprintf("alarm %s raise: %v", b.name, err))
			return nil
		}
		clear := !raise
		if b.alarm.Clear != nil {
			if clear, err = b.alarm.Clear.EvalBool(rec); err != nil {
				t.rejectBlock(r, fmt.Sprintf("alarm %s clear: %v", b.name, err))
				return nil
			}
		}
		st, _, err := b.astate.Value()
		if err != nil {
			return err
		}
		b.alarm.Block.OnReading(&st, at, raise, clear, b.emit)
		if err := b.astate.Update(st); err != nil {
			return err
		}
	}
	if b.nsig == 0 {
		return nil
	}
	for i, s := range k.slots {
		b.vals[off+i] = rec.Fields[s]
	}
	t.emitSignals(r.Key)
	return nil
}

// emitSignals turns the block's signals into records of key, with the
// block's fields as set.
func (t *WindowTask) emitSignals(key []byte) {
	b := t.keyed.block
	for _, sig := range b.sigs[:b.nsig] {
		var span sink.Span
		switch sig.Kind {
		case keyed.Raised:
			span = sink.Span{Start: sig.Start, HasStart: true}
		case keyed.Cleared, keyed.Resumed:
			span = sink.Span{Start: sig.Start, End: sig.End, HasStart: true, HasEnd: true}
		case keyed.Silent:
			span = sink.Span{Start: sig.Start, HasStart: true}
		}
		// Seq is in the id; Firing, the same number, makes the record's
		// place in the release order (time, key, firing) unique (the
		// release order keeps it as a uint32, as Seq is).
		t.res = sink.Result{Pipeline: t.pipeline, Key: key, Start: sig.Time, End: sig.Time, Kind: sig.Kind.String(),
			Firing: int(sig.Seq), Seq: uint64(sig.Seq)}
		t.results.AddSignal(t.deviceID, &t.res, b.name, span, b.names, b.vals)
	}
}

// rejectBlock dead-letters a reading whose block inputs have the wrong
// type.
func (t *WindowTask) rejectBlock(r *keyed.Reading, detail string) {
	t.keyed.Rejected[keyed.ReasonWrongType]++
	t.dead.AddDeadLetter(t.pipeline, keyed.ReasonWrongType, detail, "", r.Seq, r.Payload)
}
