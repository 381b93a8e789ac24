package keyed

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
)

// MapField assigns the result of an expression to a schema slot; Name is
// the field's name in output records.
type MapField struct {
	Name string
	Slot int
	Prog *expr.Program
}

// EvalSpec is what a pipeline with per-key functions evaluates in its keyed
// subtask instead of its prepare stage: the filter, the map and the
// aggregate arguments, over the reading decoded again from its payload.
type EvalSpec struct {
	Schema  *event.Schema
	Decoder decode.Decoder
	Filter  *expr.Program // nil: keep everything
	Maps    []MapField
	AggArgs []*expr.Program // nil entries for count()
	// Control lists the control paths the programs read (compiled with
	// expr.Options.ControlCapture): Eval reads their values from
	// Reading.Control into Record.Control. Nil: they read none.
	Control *expr.ControlPaths
}

// Verdict is what Evaluator.Eval decided for a reading.
type Verdict uint8

const (
	_         Verdict = iota
	Pass              // Values (and Record) hold the reading's results
	Filtered          // the filter dropped it
	Rejected          // a bad reading: Reason and Detail say why
	Duplicate         // dedup dropped it: its id passed less than within before
	Failed            // a state error (Err): the subtask fails
)

// Reject reasons, the stable metric labels of the prepare stage's.
const (
	ReasonFilterType = "filter_type"
	ReasonWrongType  = "wrong_type"
)

// Evaluator evaluates an EvalSpec per reading inside an Operator's
// Handler. It reuses one Record, so it allocates nothing per reading.
type Evaluator struct {
	spec  EvalSpec
	op    *Operator
	same  []int // same[i] = j < i when AggArgs[i] == AggArgs[j], else -1
	Rec   event.Record
	dedup *dedupGate // nil without a dedup block
	ctl   []byte     // the reading's control values, which Rec.Control aliases
	// Results of the last Eval.
	Values         []float64
	Reason, Detail string
	Err            error
}

// dedupGate is a Dedup between the filter and the map: one DedupEntry per
// (key, id) in a MapState whose TTL is the block's Within, so the state
// layer removes an entry once it no longer drops repeats (see Dedup).
type dedupGate struct {
	id    *expr.Program
	block Dedup
	state *state.MapState[[]byte, DedupEntry]
	buf   []byte
}

// SetDedup makes e drop, after the filter and before the map, a reading
// whose id (the value of id: a string, number or bool; null passes
// undeduplicated) passed less than d.WithinMs before (event time). Call it
// before the first Eval.
func (e *Evaluator) SetDedup(id *expr.Program, d Dedup) error {
	if err := d.Validate(); err != nil {
		return err
	}
	ttl := state.TTLConfig{TTL: time.Duration(d.WithinMs) * time.Millisecond, Update: state.OnCreateAndWrite, Visibility: state.NeverReturnExpired}
	ms, err := state.NewMapState[[]byte, DedupEntry](e.op.Context(), "dedup", state.BytesCodec{}, DedupCodec{}, ttl)
	if err != nil {
		return fmt.Errorf("keyed: %w", err)
	}
	e.dedup = &dedupGate{id: id, block: d, state: ms}
	return nil
}

// pass runs the dedup gate on rec: Pass or Duplicate, Rejected for an id
// that is no value, Failed on a state error.
func (g *dedupGate) pass(e *Evaluator, rec *event.Record) Verdict {
	e.op.Step(rec, g.id.KeyedCalls())
	v := g.id.Eval(rec)
	g.buf = g.buf[:0]
	if v.IsNull() {
		return Pass
	}
	switch v.Kind {
	case event.String:
		g.buf = append(g.buf, 's')
		g.buf = append(g.buf, v.Str...)
	case event.Number, event.Bool:
		g.buf = strconv.AppendFloat(append(g.buf, 'n'), v.Num, 'g', -1, 64)
	default:
		e.Reason, e.Detail = ReasonWrongType, "the dedup id is not a string, number or bool"
		return Rejected
	}
	entry, found, err := g.state.Get(g.buf)
	if err != nil {
		e.Err = err
		return Failed
	}
	if !g.block.OnReading(&entry, found, At{Event: rec.Time, Proc: rec.Time}) {
		return Duplicate
	}
	if err := g.state.Put(g.buf, entry); err != nil {
		e.Err = err
		return Failed
	}
	return Pass
}

// NewEvaluator returns an Evaluator of spec computing per-key calls with op.
func NewEvaluator(spec EvalSpec, op *Operator) *Evaluator {
	return &Evaluator{spec: spec, op: op, same: expr.SameAs(spec.AggArgs), Values: make([]float64, len(spec.AggArgs))}
}

// Eval decodes r (prepared, so it decodes) and evaluates the filter, the
// dedup gate (SetDedup), the map and the aggregate arguments, in that order, each after the per-key
// calls it reads: the filter's see every reading of the key, those of a map
// field and of the aggregates the readings that passed the filter (the
// state of a call moves with the readings its expression sees, as SQL's
// LAG over a WHERE).
func (e *Evaluator) Eval(r *Reading) Verdict {
	rec := &e.Rec
	rec.Reset(e.spec.Schema.Len())
	rec.Payload = append(rec.Payload, r.Payload...)
	rec.Offset = stream.MessageOffset(r.Seq)
	if err := e.spec.Decoder.Decode(rec); err != nil {
		e.Reason, e.Detail = "decode", err.Error()
		return Rejected
	}
	rec.Time = r.Time
	rec.Key = append(rec.Key, r.Key...)
	rec.KeyGroup = r.KeyGroup
	if c := e.spec.Control; c != nil {
		e.ctl = append(e.ctl[:0], r.Control...)
		var err error
		if rec.Control, err = c.Decode(e.ctl, rec.Control); err != nil {
			e.Err = fmt.Errorf("keyed: reading at offset %d: %w", stream.MessageOffset(r.Seq), err)
			return Failed
		}
	}
	if f := e.spec.Filter; f != nil {
		e.op.Step(rec, f.KeyedCalls())
		keep, err := f.EvalBool(rec)
		if err != nil {
			e.Reason, e.Detail = ReasonFilterType, err.Error()
			return Rejected
		}
		if !keep {
			return Filtered
		}
	}
	if e.dedup != nil {
		if v := e.dedup.pass(e, rec); v != Pass {
			return v
		}
	}
	for _, m := range e.spec.Maps {
		e.op.Step(rec, m.Prog.KeyedCalls())
		rec.Fields[m.Slot] = m.Prog.Eval(rec)
	}
	for i, a := range e.spec.AggArgs {
		if a == nil {
			e.Values[i] = 0
			continue
		}
		if j := e.same[i]; j >= 0 {
			e.Values[i] = e.Values[j] // evaluated once: its calls step once
			continue
		}
		e.op.Step(rec, a.KeyedCalls())
		v := a.Eval(rec)
		switch v.Kind {
		case event.Number, event.Bool:
			e.Values[i] = v.Num
		case event.String:
			e.Reason, e.Detail = ReasonWrongType, "an aggregate argument is a string, not a number"
			return Rejected
		default:
			e.Values[i] = math.NaN()
		}
	}
	return Pass
}
