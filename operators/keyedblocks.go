package operators

import (
	"fmt"
	"math"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/operators/record"
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

// signalBlock is a per-key block hosted in a KeyedStage: a pure state
// machine of operators/keyed whose state is a CachedValue of the keyed
// operator (with the pipeline's state_ttl), written at every reading so
// that state_ttl counts from the key's last reading, and whose signals
// become records. A stage chains its blocks in the order they were set:
// each sees every reading that passed the filter (and dedup), and a
// reading's records come block by block in that order.
type signalBlock struct {
	name    string
	ordinal int // its place in the stage's chain
	report  *ReportSpec
	alarm   *AlarmSpec
	absence *AbsenceSpec
	// processing: the block runs on processing time (its timers are
	// processing-time timers, its ids name readings: record.Span.ByReading).
	processing bool
	bstate     *keyed.CachedValue[keyed.AbsenceState]
	rstate     *keyed.CachedValue[keyed.ReportState]
	astate     *keyed.CachedValue[keyed.AlarmState]
	emit       func(keyed.Signal) // built once: a call does not allocate
	// value, raise and clear are the inputs evaluated for the reading
	// being processed (evalInputs).
	value        event.Value
	raise, clear bool
	sigs         [2]keyed.Signal
	nsig         int
	names        []string // report: "value", then the map fields; alarm: the map fields
	vals         []event.Value
}

// SetReport makes k run spec on every reading that passes its filter,
// instead of emitting reading records. Call it before the first reading.
func (k *KeyedStage) SetReport(spec ReportSpec) error {
	if err := spec.Block.Validate(); err != nil {
		return err
	}
	if k.blockNamed(reportBlock) != nil {
		return fmt.Errorf("%w: a second report_by_exception", keyed.ErrBadBlock)
	}
	b := k.newBlock(reportBlock, append([]string{"value"}, k.names...))
	b.report = &spec
	b.processing = spec.Block.Time == keyed.ProcessingTimeDomain
	var err error
	b.rstate, err = keyed.NewCachedValue[keyed.ReportState](k.op, reportBlock, keyed.ReportCodec{Offsets: b.processing})
	return err
}

// SetAlarm makes k run spec on every reading that passes its filter,
// instead of emitting reading records. Call it before the first reading.
func (k *KeyedStage) SetAlarm(spec AlarmSpec) error {
	if err := spec.Block.Validate(); err != nil {
		return err
	}
	if k.blockNamed(spec.Name) != nil {
		return fmt.Errorf("%w: a second block named %q", keyed.ErrBadBlock, spec.Name)
	}
	// The first alarm's state keeps the name it had when a pipeline had
	// one alarm at most, so that its checkpoints restore.
	stateName := "alarm"
	for _, o := range k.blocks {
		if o.alarm != nil {
			stateName = "alarm " + spec.Name
		}
	}
	b := k.newBlock(spec.Name, k.names)
	b.alarm = &spec
	var err error
	b.astate, err = keyed.NewCachedValue[keyed.AlarmState](k.op, stateName, keyed.AlarmCodec{})
	return err
}

// SetAbsence makes k run spec on every reading that passes its filter and
// on the key's timers, instead of emitting reading records. Call it before
// the first reading.
func (k *KeyedStage) SetAbsence(spec AbsenceSpec) error {
	if err := spec.Block.Validate(); err != nil {
		return err
	}
	if k.blockNamed(absenceBlock) != nil {
		return fmt.Errorf("%w: a second absence", keyed.ErrBadBlock)
	}
	b := k.newBlock(absenceBlock, k.names)
	b.absence = &spec
	b.processing = spec.Block.Time == keyed.ProcessingTimeDomain
	var err error
	b.bstate, err = keyed.NewCachedValue[keyed.AbsenceState](k.op, absenceBlock, keyed.AbsenceCodec{Offsets: b.processing})
	return err
}

// SetProcessingTime puts the stage on processing time: each reading's
// processing time is its arrival (stream.Batch.Arrivals), which first
// moves the processing-time timers on to it, and so does
// WindowTask.AdvanceProcessingTime between readings. Without it,
// processing time is the readings' time.
func (k *KeyedStage) SetProcessingTime() { k.procTime = true }

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

// eventTimer and processingTimer are the keyed operator's TimerHandlers:
// a deadline of the current key is due on that clock.
func (t *WindowTask) eventTimer(_ uint16, key []byte, now int64) error {
	return t.blockTimers(false, key, now)
}

func (t *WindowTask) processingTimer(_ uint16, key []byte, now int64) error {
	return t.blockTimers(true, key, now)
}

// blockTimers runs every block of the current key with timers on this
// clock (an absence deadline, a processing-time heartbeat). A key's timers
// are shared by its blocks, so a block may be called before its own
// deadline: it answers with that deadline, registered again (setting a
// timer twice sets it once), and emits nothing.
func (t *WindowTask) blockTimers(processing bool, key []byte, now int64) error {
	for _, b := range t.keyed.blocks {
		if b.processing != processing || (b.absence == nil && (b.report == nil || !processing)) {
			continue
		}
		if err := t.blockTimer(b, key, now); err != nil {
			return err
		}
	}
	return nil
}

func (t *WindowTask) blockTimer(b *signalBlock, key []byte, now int64) error {
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
	if b.nsig == 0 {
		return nil
	}
	for i := range b.vals {
		b.vals[i] = event.Value{} // no reading: the map fields are null
	}
	if b.report != nil {
		b.vals[0] = value // a heartbeat repeats the last reported value
	}
	t.emitSignals(b, key)
	return nil
}

func (k *KeyedStage) newBlock(name string, names []string) *signalBlock {
	b := &signalBlock{name: name, ordinal: len(k.blocks), names: names, vals: make([]event.Value, len(names))}
	b.emit = func(s keyed.Signal) {
		if b.nsig < len(b.sigs) {
			b.sigs[b.nsig] = s
			b.nsig++
		}
	}
	k.blocks = append(k.blocks, b)
	return b
}

// blockNamed returns the stage's block whose records carry name, or nil.
func (k *KeyedStage) blockNamed(name string) *signalBlock {
	for _, b := range k.blocks {
		if b.name == name {
			return b
		}
	}
	return nil
}

// blockReading runs the stage's blocks on the reading the evaluator passed
// and emits a record per signal. The inputs of every block are evaluated
// first: a reading one of them cannot take is dead-lettered before any
// block sees it, so no block's state holds a reading the others missed.
func (t *WindowTask) blockReading(r *keyed.Reading) error {
	k := t.keyed
	rec := &k.ev.Rec
	for _, b := range k.blocks {
		if detail := b.evalInputs(rec); detail != "" {
			t.rejectBlock(r, detail)
			return nil
		}
	}
	for _, b := range k.blocks {
		if err := t.blockStep(b, r); err != nil {
			return err
		}
	}
	return nil
}

// evalInputs evaluates b's expressions on rec into b.value, b.raise and
// b.clear; it returns why rec cannot be taken, or "".
func (b *signalBlock) evalInputs(rec *event.Record) string {
	var err error
	switch {
	case b.report != nil:
		b.value = b.report.Value.Eval(rec)
		if b.value.Kind == event.String {
			return "the report_by_exception value is a string, not a number"
		}
	case b.alarm != nil:
		if b.raise, err = b.alarm.Raise.EvalBool(rec); err != nil {
			return fmt.Sprintf("alarm %s raise: %v", b.name, err)
		}
		b.clear = !b.raise
		if b.alarm.Clear != nil {
			if b.clear, err = b.alarm.Clear.EvalBool(rec); err != nil {
				return fmt.Sprintf("alarm %s clear: %v", b.name, err)
			}
		}
	}
	return ""
}

// blockStep runs block b on reading r, whose inputs evalInputs took, and
// emits a record per signal.
func (t *WindowTask) blockStep(b *signalBlock, r *keyed.Reading) error {
	k := t.keyed
	rec := &k.ev.Rec
	at := keyed.At{Event: r.Time, Proc: k.procNow, Offset: r.Seq}
	b.nsig = 0
	off := 0
	switch {
	case b.report != nil:
		num := math.NaN()
		if v := b.value; v.Kind == event.Number || v.Kind == event.Bool {
			num = v.Num
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
		b.vals[0] = b.value
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
		st, _, err := b.astate.Value()
		if err != nil {
			return err
		}
		b.alarm.Block.OnReading(&st, at, b.raise, b.clear, b.emit)
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
	t.emitSignals(b, r.Key)
	return nil
}

// emitSignals turns block b's signals into records of key, with the
// block's fields as set.
func (t *WindowTask) emitSignals(b *signalBlock, key []byte) {
	n := uint32(len(t.keyed.blocks))
	for _, sig := range b.sigs[:b.nsig] {
		var span record.Span
		switch sig.Kind {
		case keyed.Raised:
			span = record.Span{Start: sig.Start, HasStart: true}
		case keyed.Cleared, keyed.Resumed:
			span = record.Span{Start: sig.Start, End: sig.End, HasStart: true, HasEnd: true}
		case keyed.Silent:
			span = record.Span{Start: sig.Start, HasStart: true}
		}
		if b.processing {
			span.ByReading, span.From, span.N = true, sig.From, sig.N
		}
		// Seq is in the id; Firing makes the record's place in the
		// release order (time, key, firing) unique: with one block it is
		// Seq, with n it is Seq·n + the block's ordinal, so records of
		// several blocks never share one (the release order keeps it as
		// a uint32, as Seq is; the records of one key and time are a few
		// seqs apart, far from wrapping onto each other).
		firing := sig.Seq*n + uint32(b.ordinal)
		t.res = record.Result{Pipeline: t.pipeline, Key: key, Start: sig.Time, End: sig.Time, Kind: sig.Kind.String(),
			Firing: int(firing), Seq: uint64(sig.Seq)}
		t.results.AddSignal(t.deviceID, &t.res, b.name, span, b.names, b.vals)
	}
}

// rejectBlock dead-letters a reading whose block inputs have the wrong
// type.
func (t *WindowTask) rejectBlock(r *keyed.Reading, detail string) {
	t.keyed.Rejected[keyed.ReasonWrongType]++
	t.dead.AddDeadLetter(t.pipeline, keyed.ReasonWrongType, detail, "", r.Seq, r.Payload)
}
