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
	// Block's timers are the keyed operator's: event-time timers fire on
	// the watermark, processing-time ones on the stage's clock
	// (SetProcessingClock).
	Block keyed.Absence
}

// absenceBlock is the block name of absence in record ids.
const absenceBlock = "absence"

// reportBlock is the block name of report_by_exception in record ids.
const reportBlock = "report_by_exception"

// signalBlock is the per-key block hosted in a KeyedStage (one at most): a
// pure state machine of operators/keyed whose state is a ValueState of the
// keyed operator's context (with the pipeline's state_ttl), written at
// every reading so that state_ttl counts from the key's last reading, and
// whose signals become records.
type signalBlock struct {
	name    string
	report  *ReportSpec
	alarm   *AlarmSpec
	absence *AbsenceSpec
	// processing: the block runs on processing time (its timers are
	// processing-time timers, its ids name readings: sink.Span.ByReading).
	processing bool
	bstate     *state.ValueState[keyed.AbsenceState]
	rstate     *state.ValueState[keyed.ReportState]
	astate     *state.ValueState[keyed.AlarmState]
	emit       func(keyed.Signal) // built once: a call does not allocate
	sigs       [2]keyed.Signal
	nsig       int
	names      []string // report: "value", then the map fields; alarm: the map fields
	vals       []event.Value
}

// SetReport makes k run spec on every reading that passes its filter,
// instead of emitting reading records. Call it before the first reading.
func (k *KeyedStage) SetReport(spec ReportSpec) error {
	if err := spec.Block.Validate(); err != nil {
		return err
	}
	b := k.newBlock(reportBlock, append([]string{"value"}, k.names...))
	b.report = &spec
	b.processing = spec.Block.Time == keyed.ProcessingTimeDomain
	var err error
	b.rstate, err = state.NewValueState[keyed.ReportState](k.op.Context(), reportBlock, keyed.ReportCodec{Offsets: b.processing}, k.op.StateTTL())
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
	b.astate, err = state.NewValueState[keyed.AlarmState](k.op.Context(), "alarm", keyed.AlarmCodec{}, k.op.StateTTL())
	return err
}

// SetAbsence makes k run spec on every reading that passes its filter and
// on the key's timers, instead of emitting reading records. Call it before
// the first reading.
func (k *KeyedStage) SetAbsence(spec AbsenceSpec) error {
	if err := spec.Block.Validate(); err != nil {
		return err
	}
	b := k.newBlock(absenceBlock, k.names)
	b.absence = &spec
	b.processing = spec.Block.Time == keyed.ProcessingTimeDomain
	var err error
	b.bstate, err = state.NewValueState[keyed.AbsenceState](k.op.Context(), absenceBlock, keyed.AbsenceCodec{Offsets: b.processing}, k.op.StateTTL())
	return err
}

// SetProcessingClock sets the clock of processing time, monotonic Unix ms
// (the agent's): read once per batch, it is the processing time of the
// batch's readings, and moves the processing-time timers on
// (AdvanceProcessingTime does too, between batches). Without one,
// processing time is the readings' time.
func (k *KeyedStage) SetProcessingClock(now func() int64) { k.clock = now }

// keepTimer gives the current key the processing-time timer next, given
// that it needed old before: a timer set for old (or earlier) is kept, as
// an early firing is harmless (the block answers with the real deadline,
// registered then), so a key's readings cost no timer write but every
// timeout or heartbeat; only a key that had none gets one.
func (k *KeyedStage) keepTimer(old, next int64) error {
	if old != keyed.NoTimer || next == keyed.NoTimer {
		return nil
	}
	return k.op.RegisterProcessingTimer(next)
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

// timer is the keyed operator's TimerHandler, of event time and of
// processing time: an absence deadline or a heartbeat of the current key
// is due.
func (t *WindowTask) timer(_ uint16, key []byte, now int64) error {
	b := t.keyed.block
	if b == nil {
		return nil
	}
	b.nsig = 0
	next := keyed.NoTimer
	value := event.Value{}
	switch {
	case b.absence != nil:
		st, ok, err := b.bstate.Value()
		if err != nil || !ok {
			return err // expired (state_ttl): the key is forgotten
		}
		next = b.absence.Block.OnTimer(&st, now, b.emit)
		if err := b.bstate.Update(st); err != nil {
			return err
		}
	case b.report != nil:
		st, ok, err := b.rstate.Value()
		if err != nil || !ok {
			return err // expired (state_ttl): no heartbeat
		}
		// A heartbeat due while the agent was down is sent once, and the
		// next counts from the clock now, not from the timer's time: no
		// burst of the heartbeats missed.
		next = b.report.Block.OnTimer(&st, max(now, t.keyed.op.ProcessingTime()), b.emit)
		if err := b.rstate.Update(st); err != nil {
			return err
		}
		if !math.IsNaN(st.Value) {
			value = event.Value{Kind: event.Number, Num: st.Value}
		}
	default:
		return nil
	}
	if next != keyed.NoTimer {
		register := t.keyed.op.RegisterTimer
		if b.processing {
			register = t.keyed.op.RegisterProcessingTimer
		}
		if err := register(next); err != nil {
			return err
		}
	}
	for i := range b.vals {
		b.vals[i] = event.Value{} // no reading: the map fields are null
	}
	if b.report != nil {
		b.vals[0] = value // a heartbeat repeats the last reported value
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
	at := keyed.At{Event: r.Time, Proc: k.procNow, Offset: r.Seq}
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
		old := b.report.Block.NextTimer(st)
		b.report.Block.OnReading(&st, at, num, b.emit)
		if err := b.rstate.Update(st); err != nil {
			return err
		}
		if err := k.keepTimer(old, b.report.Block.NextTimer(st)); err != nil {
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
		if b.processing {
			err = k.keepTimer(old, next)
		} else {
			err = k.moveTimer(old, next)
		}
		if err != nil {
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
		if b.processing {
			span.ByReading, span.From, span.N = true, sig.From, sig.N
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
