package operators

import (
	"math"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window"
)

// KeyedStage is the front of a subtask of a pipeline with per-key
// functions: a keyed.Operator orders the readings, and its Evaluator runs
// the filter, map and aggregate arguments that the prepare stage left to
// it. Readings that pass go to the task's window, or to its
// per-key blocks (SetReport, SetAlarm, SetAbsence), or else out as records of kind
// "reading" with the map fields.
type KeyedStage struct {
	op      *keyed.Operator
	ev      *keyed.Evaluator
	names   []string // map field names, for records without a window
	slots   []int
	vals    []event.Value
	handler keyed.Handler
	blocks  []*signalBlock // the per-key blocks, chained in this order
	// procTime: processing time is the readings' arrival
	// (SetProcessingTime); false: their time.
	procTime bool
	procNow  int64         // processing time of the reading being processed
	r        keyed.Reading // reused: a Reading per call would escape to the heap
	// keepLate: the batch being processed keeps late readings for the side
	// output (Process's argument, for the Handler).
	keepLate bool
	err      error // the first state error: sticky

	// resumed: the reading being processed arrived just after a resumed
	// session (Batch.Resumed), for the window's lateness in arrival order.
	resumed bool
	// Counters since creation, read by the owner goroutine only: readings
	// the filter dropped, and those dead-lettered, by reason.
	Filtered int64
	Rejected map[string]int64
	// Duplicates counts the readings dedup dropped.
	Duplicates int64
	// overflowed is op.Overflowed already added to the task's Overflowed.
	overflowed int64
}

// NewKeyedStage returns the keyed stage running spec over op.
func NewKeyedStage(op *keyed.Operator, spec keyed.EvalSpec) *KeyedStage {
	k := &KeyedStage{op: op, ev: keyed.NewEvaluator(spec, op), Rejected: map[string]int64{}}
	for _, m := range spec.Maps {
		k.names = append(k.names, m.Name)
		k.slots = append(k.slots, m.Slot)
	}
	k.vals = make([]event.Value, len(k.slots))
	return k
}

// SetKeyed puts k in front of t's window (or makes t emit reading records,
// without one).
func (t *WindowTask) SetKeyed(k *KeyedStage) {
	t.keyed = k
	k.handler = t.released
	k.op.OnTimer(t.eventTimer)
	k.op.OnProcessingTimer(t.processingTimer)
}

// Keyed returns the task's keyed stage, or nil.
func (t *WindowTask) Keyed() *KeyedStage { return t.keyed }

// Err returns the first state error of the keyed stage, or nil.
func (k *KeyedStage) Err() error { return k.err }

// SetDedup drops repeated ids after the filter (keyed.Evaluator.SetDedup).
func (k *KeyedStage) SetDedup(id *expr.Program, d keyed.Dedup) error { return k.ev.SetDedup(id, d) }

// Operator returns the keyed operator.
func (k *KeyedStage) Operator() *keyed.Operator { return k.op }

// Flush writes the readings waiting for the watermark into the backend:
// call it at a barrier before the backend's Snapshot.
func (k *KeyedStage) Flush() error {
	if k.err != nil {
		return k.err
	}
	return k.op.Flush()
}

// FilterSnapshot drops expired per-key state from a snapshot of the
// subtask's backend.
func (k *KeyedStage) FilterSnapshot(s state.Snapshot) state.Snapshot { return k.op.FilterSnapshot(s) }

// cleanupPerBatch bounds the expired per-key states removed per batch.
const cleanupPerBatch = 256

func (t *WindowTask) processKeyed(b *stream.Batch, keepLate bool) {
	k := t.keyed
	if k.err != nil {
		return
	}
	k.keepLate = keepLate
	perRecordWM := len(b.Watermarks) == b.Len()
	arrivals := b.HasArrivals()
	arrival := k.op.Order() == keyed.Arrival
	for i := 0; i < b.Len(); i++ {
		if arrivals {
			// Due timers first: a key whose deadline passed before the
			// reading arrived is silent before the reading resumes it.
			t.arrive(b.Arrivals[i])
			if k.err != nil {
				return
			}
		}
		wm := k.op.Watermark()
		if perRecordWM {
			wm = b.Watermarks[i]
			// In arrival order the window sees readings as they come, so
			// its watermark moves with them, as without the keyed stage.
			// In event-time order it moves only after a release: readings
			// still buffered must not become late for it.
			if arrival && t.op != nil && wm > t.op.Watermark() {
				t.op.AdvanceWatermark(wm, &t.out)
			}
		}
		k.r = keyed.Reading{Key: b.Key(i), KeyGroup: b.KeyGroups[i], Time: b.Times[i], Seq: b.Offsets[i], Payload: b.Payload(i), Control: b.Control(i)}
		if !k.procTime {
			k.procNow = k.r.Time
		}
		k.resumed = b.Resumed(i)
		out, err := k.op.Process(&k.r, wm, k.handler)
		if err != nil {
			k.err = err
			return
		}
		if out == keyed.Late {
			t.Late++
			detail := "older than the watermark: per-key functions see a key's readings in event-time order"
			if k.resumed {
				t.LateResumed++
				detail += "; the broker sent it after newer messages when it resumed the session"
			}
			if keepLate {
				t.late.AddDeadLetter(t.pipeline, "late", detail, "", b.Offsets[i], b.Payload(i))
			}
		}
	}
	if err := k.op.Cleanup(cleanupPerBatch); err != nil {
		k.err = err
	}
	t.collect()
}

// advanceKeyed releases what the watermark passed, then moves the
// window's watermark.
func (t *WindowTask) advanceKeyed(wm int64) {
	k := t.keyed
	if k.err == nil {
		if err := k.op.AdvanceWatermark(wm, k.handler); err != nil {
			k.err = err
		}
	}
	if t.op != nil {
		t.op.AdvanceWatermark(wm, &t.out)
	}
	t.collect()
}

// advanceKeyedProcessingTime moves the keyed stage's processing time to
// now (never back) and fires its due processing-time timers.
func (t *WindowTask) advanceKeyedProcessingTime(now int64) {
	k := t.keyed
	if k.err != nil {
		return
	}
	k.procNow = max(k.procNow, now)
	if err := k.op.AdvanceProcessingTime(now); err != nil {
		k.err = err
	}
}

// released is the keyed operator's Handler: one reading, in its key's
// order.
func (t *WindowTask) released(r *keyed.Reading) error {
	k := t.keyed
	verdict := k.ev.Eval(r)
	if n := k.op.Overflowed; n > k.overflowed {
		t.keyedOverflow(r, n-k.overflowed)
		k.overflowed = n
	}
	switch verdict {
	case keyed.Filtered:
		k.Filtered++
		return nil
	case keyed.Duplicate:
		k.Duplicates++
		return nil
	case keyed.Failed:
		return k.ev.Err
	case keyed.Rejected:
		k.Rejected[k.ev.Reason]++
		t.dead.AddDeadLetter(t.pipeline, k.ev.Reason, k.ev.Detail, "", r.Seq, r.Payload)
		return nil
	}
	if t.op != nil {
		t.elem.Key, t.elem.KeyGroup, t.elem.Time, t.elem.Values = r.Key, r.KeyGroup, r.Time, k.ev.Values
		switch t.op.Process(&t.elem, &t.out) {
		case window.Late:
			// Only in arrival order: in event-time order the keyed
			// operator set it aside before the window could see it.
			t.Late++
			detail := lateDetail
			if k.resumed {
				t.LateResumed++
				detail = lateResumedDetail
			}
			if k.keepLate {
				t.late.AddDeadLetter(t.pipeline, "late", detail, "", r.Seq, r.Payload)
			}
		case window.Unassigned:
			t.Unassigned++
		}
		return nil
	}
	if len(k.blocks) > 0 {
		return t.blockReading(r)
	}
	for i, s := range k.slots {
		k.vals[i] = k.ev.Rec.Fields[s]
	}
	t.res = record.Result{Pipeline: t.pipeline, Key: r.Key, Start: r.Time, End: r.Time, Kind: record.KindReading, Seq: r.Seq}
	t.results.AddReading(t.deviceID, &t.res, k.names, k.vals)
	return nil
}

// keyedOverflow counts n per-key function results of reading r that
// overflowed float64 and are null, with the window results' overflows:
// the same counter and log line, naming the function, and the reading's
// time as the window's start and end.
func (t *WindowTask) keyedOverflow(r *keyed.Reading, n int64) {
	t.Overflowed += n
	t.LastOverflow = Overflow{Aggregates: []string{t.keyed.op.LastOverflowed.String()}, Key: string(r.Key), Start: r.Time, End: r.Time}
}

// Watermark returns the task's event-time watermark: its window's, else
// its keyed operator's; math.MinInt64 when it has neither.
func (t *WindowTask) Watermark() int64 {
	switch {
	case t.op != nil:
		return t.op.Watermark()
	case t.keyed != nil:
		return t.keyed.op.Watermark()
	}
	return math.MinInt64
}

// TakeDead returns the dead letters of the keyed stage collected so far,
// or nil if none.
func (t *WindowTask) TakeDead() *Delivery { return take(&t.dead) }
