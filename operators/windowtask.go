package operators

import (
	"math"

	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/window"
)

// WindowTask is one parallel subtask of a pipeline's keyed window: it feeds
// batches, watermarks and processing time to a window.Operator and turns its
// firings into output records. Not safe for concurrent use; each subtask
// goroutine owns one.
type WindowTask struct {
	pipeline string
	// definition is the short hash of the pipeline's definition, written
	// into each window result; "" writes none.
	definition string
	deviceID   string
	names      []string
	op         *window.Operator
	out        window.Output
	elem       window.Element
	res        record.Result

	results *Delivery
	late    *Delivery
	dead    *Delivery   // readings the keyed stage rejects
	keyed   *KeyedStage // nil without per-key functions

	// Key limit (LimitKeys): nil keys means none.
	keys        *window.LiveKeys
	budget      *KeyBudget
	keepRefused bool
	refused     *Delivery
	refusedWhy  string

	// Counters since creation, read by the owner goroutine only.
	Late, Unassigned, Fired, Refused int64
	// LateResumed counts the Late readings marked as arrived just after a
	// resumed session (Batch.Resumed): the broker's stored backlog.
	LateResumed int64
	// Overflowed counts result values that overflowed float64 (±Inf, from
	// window.Firing), which the sinks write as null; LastOverflow
	// describes the latest, for the log.
	Overflowed   int64
	LastOverflow Overflow
}

// Overflow describes the values of one result that overflowed float64.
type Overflow struct {
	Aggregates []string // their names in the aggregate block
	Key        string
	Start, End int64 // the window
}

// Late-output details: why a reading went to the side output.
const (
	lateDetail        = "older than the watermark minus allowed_lateness"
	lateResumedDetail = "older than the watermark minus allowed_lateness: the broker sent it after newer messages when it resumed the session"
)

// NewWindowTask returns a subtask running op for pipeline; names are the
// aggregate names in the order of the operator's AggSpecs. A nil op makes a
// pass-through task: every reading is forwarded as it came.
func NewWindowTask(pipeline, deviceID string, names []string, op *window.Operator) *WindowTask {
	return &WindowTask{pipeline: pipeline, deviceID: deviceID, names: names, op: op,
		results: new(Delivery), late: new(Delivery), dead: new(Delivery)}
}

// Label makes every window result carry pipeline as its pipeline's name
// and name the definition that produced it (record.Result.Definition):
// while a changed pipeline rolls over, its old definition runs as a
// second instance, and results of both go out side by side.
func (t *WindowTask) Label(pipeline, definition string) {
	t.pipeline, t.definition = pipeline, definition
}

// Process feeds a batch. Late readings are kept for the side output when
// keepLate is set, else only counted.
func (t *WindowTask) Process(b *stream.Batch, keepLate bool) {
	if t.keyed != nil {
		t.processKeyed(b, keepLate)
		return
	}
	if t.op == nil {
		for i := 0; i < b.Len(); i++ {
			t.results.AddRaw(b.Payload(i))
		}
		return
	}
	perRecordWM := len(b.Watermarks) == b.Len()
	arrivals := b.HasArrivals()
	for i := 0; i < b.Len(); i++ {
		if perRecordWM && b.Watermarks[i] > t.op.Watermark() {
			t.op.AdvanceWatermark(b.Watermarks[i], &t.out)
		}
		if arrivals {
			t.arrive(b.Arrivals[i])
		}
		t.elem.Key = b.Key(i)
		if t.keys != nil && !t.keys.Live(t.elem.Key) {
			if !t.budget.take() {
				t.Refused++
				if t.keepRefused {
					t.refused.AddDeadLetter(t.pipeline, ReasonKeyLimit, t.refusedWhy, "", b.Offsets[i], b.Payload(i))
				}
				continue
			}
			t.keys.Pending = true // its birth is counted: taken from the budget
		}
		t.elem.KeyGroup = b.KeyGroups[i]
		t.elem.Time = b.Times[i]
		t.elem.Values = b.RecordValues(i)
		verdict := t.op.Process(&t.elem, &t.out)
		if t.keys != nil && t.keys.Pending {
			t.keys.Pending = false // no state was created (late): give the room back
			t.budget.release()
		}
		switch verdict {
		case window.Late:
			t.Late++
			detail := lateDetail
			if b.Resumed(i) {
				t.LateResumed++
				detail = lateResumedDetail
			}
			if keepLate {
				t.late.AddDeadLetter(t.pipeline, "late", detail, "", b.Offsets[i], b.Payload(i))
			}
		case window.Unassigned:
			t.Unassigned++
		}
	}
	t.collect()
}

// AdvanceWatermark moves event time forward.
func (t *WindowTask) AdvanceWatermark(wm int64) {
	if t.keyed != nil {
		t.advanceKeyed(wm)
		return
	}
	if t.op == nil {
		return
	}
	t.op.AdvanceWatermark(wm, &t.out)
	t.collect()
}

// arrive moves processing time on to a reading that arrived at ms: the
// window's timers before it fire first (a reading at a window's last
// millisecond still belongs to it), and the keyed stage's up to it (a
// deadline at the reading's arrival passed first). Processing time so
// follows the readings, wherever batches are cut, and a replay of the
// ingest log moves it as the first run did.
func (t *WindowTask) arrive(ms int64) {
	if t.op != nil && ms-1 > t.op.ProcessingTime() {
		t.op.AdvanceProcessingTime(ms-1, &t.out)
	}
	if k := t.keyed; k != nil && k.procTime {
		t.advanceKeyedProcessingTime(ms)
	}
}

// AdvanceProcessingTime moves processing time (wall-clock ms, as the
// readings' arrivals) forward.
func (t *WindowTask) AdvanceProcessingTime(nowMs int64) {
	if t.keyed != nil {
		t.advanceKeyedProcessingTime(nowMs)
	}
	if t.op == nil {
		t.collect()
		return
	}
	t.op.AdvanceProcessingTime(nowMs, &t.out)
	t.collect()
}

// Operator exposes the operator for statistics.
func (t *WindowTask) Operator() *window.Operator { return t.op }

func (t *WindowTask) collect() {
	for i := range t.out.Firings {
		f := &t.out.Firings[i]
		t.res = record.Result{Pipeline: t.pipeline, Key: f.Key, Start: f.Window.Start, End: f.Window.End,
			Kind: f.Kind.String(), Firing: f.Seq, Names: t.names, Values: f.Values, Definition: t.definition}
		t.results.AddResult(t.deviceID, &t.res)
		t.Fired++
		var over []string
		for j, v := range f.Values {
			if math.IsInf(v, 0) && j < len(t.names) {
				t.Overflowed++
				over = append(over, t.names[j])
			}
		}
		if over != nil {
			t.LastOverflow = Overflow{Aggregates: over, Key: string(f.Key), Start: f.Window.Start, End: f.Window.End}
		}
	}
	t.out.Reset()
}

// TakeResults returns the output records collected so far, or nil if none,
// and starts a new collection.
func (t *WindowTask) TakeResults() *Delivery { return take(&t.results) }

// TakeLate returns the late readings collected so far, or nil if none.
func (t *WindowTask) TakeLate() *Delivery { return take(&t.late) }

// TakeRefused returns the readings refused by the key limit collected so
// far (with keepRefused), or nil if none.
func (t *WindowTask) TakeRefused() *Delivery {
	if t.refused == nil {
		return nil
	}
	return take(&t.refused)
}

func take(d **Delivery) *Delivery {
	if (*d).Len() == 0 {
		return nil
	}
	r := *d
	*d = r.next()
	return r
}
