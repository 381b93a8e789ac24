package window

import (
	"fmt"
	"math"

	"github.com/eddy-edge/eddy/window/aggregate"
)

// Element is one reading as the window operator sees it.
type Element struct {
	// Key is the key-by value; KeyGroup = state.KeyGroup(Key, maxKeyGroups).
	Key      []byte
	KeyGroup uint16
	// Time is the event time in ms for event-time assigners, the
	// processing time (the caller's ms: Eddy's is the reading's arrival,
	// wall clock) for processing-time ones;
	// count windows use it only for first/last.
	Time int64
	// Values[i] is the argument of the aggregates with Arg i; NaN is null,
	// and so is an index beyond len(Values). It may alias the caller's
	// memory: the operator copies what it keeps.
	Values []float64
}

// Stats are counters of an Operator.
type Stats struct {
	OpenWindows   int   // window states in the store (panes for paned sliding windows, pane.go)
	PendingTimers int   // timers in the store, all domains
	Accepted      int64 // readings some window took
	Late          int64 // readings with verdict Late
	Unassigned    int64 // readings with verdict Unassigned
	Firings       int64 // firings emitted
}

// Operator is the window operator of one subtask: pure, deterministic and
// not safe for concurrent use. See the package documentation for the model.
type Operator struct {
	spec     Spec
	assigner Assigner
	store    Store
	funcs    []aggregate.Func

	// panes is size/slide when sliding windows are evaluated in panes
	// (pane.go), else 0.
	panes int64

	wm      int64 // current watermark
	procNow int64 // current processing time
	procSet bool  // AdvanceProcessingTime was called

	stats Stats

	wins     []Window // scratch: assigned windows
	set      []Window // scratch: merging window set
	timerKey []byte   // scratch: the key of the timer being handled
	merge    []aggregate.Acc
}

// NewOperator returns an operator for spec over store, which may already hold
// state (a restore); the watermark starts at math.MinInt64 and processing
// time at 0 (set them with AdvanceWatermark/AdvanceProcessingTime).
func NewOperator(spec Spec, store Store) (*Operator, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrBadSpec)
	}
	spec.Aggs = append([]AggSpec(nil), spec.Aggs...)
	op := &Operator{
		spec:     spec,
		assigner: spec.Assigner,
		store:    store,
		wm:       math.MinInt64,
		merge:    make([]aggregate.Acc, len(spec.Aggs)),
	}
	for _, a := range spec.Aggs {
		op.funcs = append(op.funcs, a.Func)
	}
	op.panes = paneCount(spec)
	return op, nil
}

// Funcs returns the aggregate functions in Spec order (for encoding window
// state with AppendWindowState). The caller must not modify it.
func (op *Operator) Funcs() []aggregate.Func { return op.funcs }

// Watermark returns the current event-time watermark.
func (op *Operator) Watermark() int64 { return op.wm }

// ProcessingTime returns the current processing time.
func (op *Operator) ProcessingTime() int64 { return op.procNow }

// Stats returns the operator's counters.
func (op *Operator) Stats() Stats {
	s := op.stats
	s.OpenWindows, s.PendingTimers = op.store.Counts()
	return s
}

// Process adds e to its windows and returns the verdict. Firings caused by e
// (LateUpdate, count-trigger firings, full count windows) are appended to out.
// Event-time lateness is judged against the current watermark. For
// processing-time assigners, e.Time is the reading's processing time; once
// AdvanceProcessingTime(n) has run, a reading stamped ≤ n counts as n+1, so
// windows that fired never reopen.
func (op *Operator) Process(e *Element, out *Output) Verdict {
	if op.assigner.domain == ProcessingTime && op.procSet && e.Time <= op.procNow {
		// Processing time up to procNow is over: every window ending by then
		// has fired and is gone. A reading processed now happens after it,
		// and must not reopen such a window (its firing ids would repeat).
		clamped := *e
		clamped.Time = op.procNow + 1
		e = &clamped
	}
	op.store.SetCurrentKey(e.KeyGroup, e.Key)
	var v Verdict
	switch op.assigner.kind {
	case kindSession:
		v = op.processSession(e, out)
	case kindCount:
		v = op.processCount(e, out)
	default:
		if op.panes > 0 {
			v = op.processPaned(e, out)
		} else {
			v = op.processTime(e, out)
		}
	}
	switch v {
	case Accepted:
		op.stats.Accepted++
	case Late:
		op.stats.Late++
	case Unassigned:
		op.stats.Unassigned++
	}
	return v
}

// AdvanceWatermark moves the event-time watermark to wm and fires and purges
// the windows it completes, in (time, key, window) order: by window end, then
// key bytes. A wm at or below the current watermark is ignored. wm =
// math.MaxInt64 is end of input: every event-time window fires and is purged,
// and processing-time windows are flushed as by AdvanceProcessingTime(wm).
func (op *Operator) AdvanceWatermark(wm int64, out *Output) {
	if wm <= op.wm {
		return
	}
	op.wm = wm
	for {
		t, ok := op.store.PopTimer(EventTime, wm)
		if !ok {
			break
		}
		op.onTimer(t, out)
	}
	if wm == math.MaxInt64 && op.assigner.domain == ProcessingTime {
		op.AdvanceProcessingTime(wm, out)
	}
}

// AdvanceProcessingTime moves processing time (the caller's ms) to
// nowMs and fires processing-time windows whose End−1 ≤ nowMs (then purges
// them) and due early firings. A value below the current one is ignored.
func (op *Operator) AdvanceProcessingTime(nowMs int64, out *Output) {
	if nowMs < op.procNow {
		return
	}
	op.procNow, op.procSet = nowMs, true
	for {
		t, ok := op.store.PopTimer(ProcessingTime, nowMs)
		if !ok {
			break
		}
		op.onTimer(t, out)
	}
}

// cleanupTime is when a window's state goes: End−1+L for event time
// (saturating), End−1 for processing time (Flink's WindowOperator.cleanupTime).
func (op *Operator) cleanupTime(w Window) int64 {
	if op.assigner.domain == EventTime {
		return addSat(w.MaxTimestamp(), op.spec.AllowedLateness)
	}
	return w.MaxTimestamp()
}

// isWindowLate is Flink's isWindowLate: an event-time window whose cleanup
// time the watermark has reached takes no more readings.
func (op *Operator) isWindowLate(w Window) bool {
	return op.assigner.domain == EventTime && op.cleanupTime(w) <= op.wm
}

// isElementLate is Flink's isElementLate: t + L ≤ watermark.
func (op *Operator) isElementLate(t int64) bool {
	return op.assigner.domain == EventTime && addSat(t, op.spec.AllowedLateness) <= op.wm
}

// pastEnd reports whether w has reached its end (its final firing is done or
// due now).
func (op *Operator) pastEnd(w Window) bool {
	switch op.assigner.domain {
	case EventTime:
		return w.MaxTimestamp() <= op.wm
	case ProcessingTime:
		return w.MaxTimestamp() <= op.procNow
	}
	return false
}

// nextEarly is the first multiple of EarlyEvery after the current processing
// time (aligned, like Flink's ContinuousProcessingTimeTrigger, so a long
// stall yields one early firing, not a burst).
func (op *Operator) nextEarly() int64 {
	start := StartOf(op.procNow, 0, op.spec.EarlyEvery)
	if start > math.MaxInt64-op.spec.EarlyEvery {
		return NoTimer // beyond the end of time
	}
	return start + op.spec.EarlyEvery
}

func (op *Operator) processTime(e *Element, out *Output) Verdict {
	op.wins = op.assigner.AssignWindows(e.Time, op.wins[:0])
	if len(op.wins) == 0 {
		if op.isElementLate(e.Time) {
			return Late
		}
		return Unassigned
	}
	accepted := false
	for _, w := range op.wins {
		if op.isWindowLate(w) {
			continue
		}
		accepted = true
		st := op.store.Window(w)
		created := st == nil
		if created {
			st = op.store.CreateWindow(w, len(op.funcs))
		}
		op.add(st, e)
		op.afterAdd(e.KeyGroup, e.Key, w, st, created, out)
	}
	if !accepted {
		return Late
	}
	return Accepted
}

// add folds e into st's accumulators.
func (op *Operator) add(st *WindowState, e *Element) {
	for i := range op.spec.Aggs {
		a := &op.spec.Aggs[i]
		v := math.NaN()
		if a.Arg >= 0 && a.Arg < len(e.Values) {
			v = e.Values[a.Arg]
		}
		st.Accs[i].Add(a.Func, v, e.Time, a.Arg < 0)
	}
}

// afterAdd runs the triggers of a time window that just took a reading,
// stores st and registers the timers of a new window. st is invalid after.
func (op *Operator) afterAdd(kg uint16, key []byte, w Window, st *WindowState, created bool, out *Output) {
	switch {
	case op.assigner.domain == EventTime && w.MaxTimestamp() <= op.wm:
		// Past its end, within lateness (Flink's EventTimeTrigger.onElement
		// returns FIRE): re-fire with the late reading included.
		op.emit(kg, key, w, LateUpdate, st, out)
	case op.spec.TriggerCount > 0:
		st.SinceFire++
		if st.SinceFire >= op.spec.TriggerCount {
			st.SinceFire = 0
			op.emit(kg, key, w, Early, st, out)
		}
	}
	early := int64(NoTimer)
	if created && op.spec.EarlyEvery > 0 && !op.pastEnd(w) {
		early = op.nextEarly()
		if early != NoTimer && op.assigner.domain == ProcessingTime && early >= w.MaxTimestamp() {
			early = NoTimer // the final firing comes first
		}
		st.NextEarly = early
	}
	op.store.PutWindow(w, st)
	if created {
		op.registerTimers(w, early)
	}
}

// registerTimers adds the firing, cleanup and early timers of a new window of
// the current key.
func (op *Operator) registerTimers(w Window, early int64) {
	switch op.assigner.domain {
	case EventTime:
		fire, cleanup := w.MaxTimestamp(), op.cleanupTime(w)
		if fire > op.wm && fire != cleanup {
			op.store.AddTimer(EventTime, fire, w)
		}
		op.store.AddTimer(EventTime, cleanup, w)
	case ProcessingTime:
		op.store.AddTimer(ProcessingTime, w.MaxTimestamp(), w)
	}
	if early != NoTimer {
		op.store.AddTimer(ProcessingTime, early, w)
	}
}

// deleteTimers removes every timer a window of the current key may have,
// except those of domain popped at time poppedAt (already gone).
func (op *Operator) deleteTimers(w Window, early int64, popped Domain, poppedAt int64) {
	del := func(d Domain, t int64) {
		if d != popped || t != poppedAt {
			op.store.DeleteTimer(d, t, w)
		}
	}
	switch op.assigner.domain {
	case EventTime:
		fire, cleanup := w.MaxTimestamp(), op.cleanupTime(w)
		if fire != cleanup {
			del(EventTime, fire)
		}
		del(EventTime, cleanup)
	case ProcessingTime:
		del(ProcessingTime, w.MaxTimestamp())
	}
	if early != NoTimer {
		del(ProcessingTime, early)
	}
}

// emit appends a firing of (key, w) with st's results and counts it.
func (op *Operator) emit(kg uint16, key []byte, w Window, kind Kind, st *WindowState, out *Output) {
	f := out.add(kg, key, w, kind, st.Fired, len(op.funcs))
	for i := range op.spec.Aggs {
		f.Values[i] = st.Accs[i].Value(op.funcs[i], op.spec.Aggs[i].Q)
	}
	st.Fired++
	op.stats.Firings++
}

// onTimer handles one due timer.
func (op *Operator) onTimer(t Timer, out *Output) {
	if op.panes > 0 {
		op.onPaneTimer(t, out)
		return
	}
	op.timerKey = append(op.timerKey[:0], t.Key...)
	key, kg, w := op.timerKey, t.KeyGroup, t.Window
	op.store.SetCurrentKey(kg, key)
	st := op.store.Window(w)
	if st == nil {
		return // a timer of a purged window
	}
	final := t.Domain == op.assigner.domain && t.Time == w.MaxTimestamp()
	if final {
		op.emit(kg, key, w, Final, st, out)
	} else if t.Domain == ProcessingTime && t.Time == st.NextEarly {
		st.NextEarly = NoTimer
		if !op.pastEnd(w) {
			op.emit(kg, key, w, Early, st, out)
			next := op.nextEarly()
			if next != NoTimer && (op.assigner.domain != ProcessingTime || next < w.MaxTimestamp()) {
				st.NextEarly = next
			}
		}
		next := st.NextEarly
		op.store.PutWindow(w, st)
		if next != NoTimer {
			op.store.AddTimer(ProcessingTime, next, w)
		}
		return
	}
	early := st.NextEarly
	if t.Domain == op.assigner.domain && t.Time == op.cleanupTime(w) {
		op.purge(w, early, t.Domain, t.Time)
		return
	}
	if final && early != NoTimer {
		st.NextEarly = NoTimer
		op.store.PutWindow(w, st)
		op.store.DeleteTimer(ProcessingTime, early, w)
		return
	}
	op.store.PutWindow(w, st)
}

// purge drops the state and timers of window w of the current key; the
// timer (popped, poppedAt) that triggered it is already gone.
func (op *Operator) purge(w Window, early int64, popped Domain, poppedAt int64) {
	op.deleteTimers(w, early, popped, poppedAt)
	op.store.DeleteWindow(w)
	if op.assigner.IsMerging() {
		op.set = op.store.MergingWindows(op.set[:0])
		for i, s := range op.set {
			if s == w {
				op.set = append(op.set[:i], op.set[i+1:]...)
				break
			}
		}
		op.store.PutMergingWindows(op.set)
	}
}

// processCount handles a reading of a count window assigner: the key's
// reading number is the "time" of count windows.
func (op *Operator) processCount(e *Element, out *Output) Verdict {
	c := op.store.ReadingCount()
	op.wins = op.assigner.AssignWindows(c, op.wins[:0])
	for _, w := range op.wins {
		st := op.store.Window(w)
		created := st == nil
		if created {
			st = op.store.CreateWindow(w, len(op.funcs))
		}
		op.add(st, e)
		if c == w.MaxTimestamp() {
			op.emit(e.KeyGroup, e.Key, w, Final, st, out)
			early := st.NextEarly
			op.store.DeleteWindow(w)
			if early != NoTimer {
				op.store.DeleteTimer(ProcessingTime, early, w)
			}
			continue
		}
		op.afterAdd(e.KeyGroup, e.Key, w, st, created, out)
	}
	op.store.PutReadingCount(c + 1)
	return Accepted
}

// processSession handles a reading of a session assigner (Flink's
// MergingWindowSet.addWindow): [t, t+gap) merges with every session of the
// key it overlaps or touches.
func (op *Operator) processSession(e *Element, out *Output) Verdict {
	op.wins = op.assigner.AssignWindows(e.Time, op.wins[:0])
	nw := op.wins[0]
	op.set = op.store.MergingWindows(op.set[:0])
	merged, n := nw, 0
	var target Window // the existing window whose state is kept
	for _, w := range op.set {
		if w.Intersects(nw) {
			merged = merged.Cover(w)
			if n == 0 {
				target = w
			}
			n++
		}
	}
	if n == 0 {
		if op.isWindowLate(nw) {
			return Late
		}
		st := op.store.CreateWindow(nw, len(op.funcs))
		op.add(st, e)
		op.afterAdd(e.KeyGroup, e.Key, nw, st, true, out)
		op.set = append(op.set, nw)
		op.store.PutMergingWindows(op.set)
		return Accepted
	}
	// Keep the state of the window equal to the merge result, if any (it
	// keeps its firing count), else of the first intersecting window.
	for _, w := range op.set {
		if w == merged {
			target = w
		}
	}
	// Fold every other intersecting window into target.
	keep := op.set[:0] // filtered in place: keep never overtakes the loop
	for _, w := range op.set {
		switch {
		case w == target:
		case w.Intersects(nw):
			op.absorb(w, target)
		default:
			keep = append(keep, w)
		}
	}
	op.set = append(keep, merged)
	if merged != target {
		st := op.store.Window(target)
		early := st.NextEarly
		st.Fired = 0 // a new window: its firings count from 0
		op.store.PutWindow(target, st)
		op.deleteTimers(target, early, DomainInvalid, 0)
		op.store.MoveWindow(target, merged)
		op.registerTimers(merged, early)
	}
	st := op.store.Window(merged)
	op.add(st, e)
	op.afterAdd(e.KeyGroup, e.Key, merged, st, false, out)
	op.store.PutMergingWindows(op.set)
	return Accepted
}

// absorb merges the state of window from into window into (both of the
// current key) and deletes from with its timers.
func (op *Operator) absorb(from, into Window) {
	src := op.store.Window(from)
	for i := range op.merge {
		op.merge[i].CopyFrom(&src.Accs[i])
	}
	early := src.NextEarly
	op.deleteTimers(from, early, DomainInvalid, 0)
	op.store.DeleteWindow(from)
	dst := op.store.Window(into)
	for i := range op.merge {
		dst.Accs[i].Merge(op.funcs[i], &op.merge[i])
	}
	op.store.PutWindow(into, dst)
}
