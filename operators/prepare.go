package operators

import (
	"math"

	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/state"
)

// MapField assigns the result of an expression to a schema slot
// (a `map { NAME = expr }` entry).
type MapField struct {
	Slot int
	Prog *expr.Program
}

// PrepareSpec describes the per-reading steps of a pipeline before its keyed
// window: decode, timestamp, future-skew check, filter, map, key and the
// aggregate arguments.
type PrepareSpec struct {
	Schema    *event.Schema
	Decoder   decode.Decoder
	Timestamp *decode.Timestamp // nil: the pipeline runs on processing time
	// Punctuation, when set, reads the field that marks a message as a
	// watermark instead of a reading (config: watermark { punctuation }).
	Punctuation *decode.Timestamp
	// MaxFutureSkewMs rejects readings stamped more than this ahead of the
	// device clock; 0 turns the check off. Prepare's caller turns it off
	// while the device clock is not synchronised (wallSynced).
	MaxFutureSkewMs int64
	Filter          *expr.Program // nil: keep everything
	Maps            []MapField
	Key             *expr.Program // nil: one key, ""
	// AggArgs has one program per aggregate; nil for count(). Aggregates
	// given the same *Program (avg, min and max of one field) evaluate it
	// once per reading.
	AggArgs []*expr.Program
	// Capture, with ControlState, makes each reading that passes carry
	// the values of Capture's paths in ControlState as it is then
	// (Preparer.Control): a keyed pipeline's expressions read them later,
	// in its keyed subtasks. Nil: nothing is captured.
	Capture      *expr.ControlPaths
	ControlState *control.State
	MaxKeyGroups int
	Parallelism  int
	// From and Until bound the event times this definition takes, From
	// inclusive, Until exclusive: while a changed pipeline rolls over, its
	// old definition takes the readings before the cut and its new one
	// those from it. Both zero: every reading.
	From, Until int64
}

// Outcome is what Prepare did with a reading.
type Outcome uint8

const (
	_           Outcome = iota
	Pass                // the reading goes on to its window subtask
	Filtered            // the filter rejected it (counted, not an error)
	Rejected            // bad reading: dead-letter it with Reject
	Skipped             // not a reading (a CSV header line)
	Punctuation         // a watermark marker: Watermark holds its value
	// Elsewhere: the reading's event time (Time) is outside From–Until,
	// so the pipeline's other definition takes it; its time still
	// advances this definition's watermark, so its windows close.
	Elsewhere
)

// Reject says why a reading was rejected. Reason is a stable metric label.
type Reject struct {
	Reason string
	Detail string
}

// Dead-letter reasons Prepare produces besides the decoder's own.
const (
	ReasonFutureTimestamp = "future_timestamp"
	ReasonMissingKey      = "missing_key"
	ReasonFilterType      = "filter_type"
	ReasonWrongType       = "wrong_type"
	// ReasonTooLarge is a message over its source's max_message_size,
	// dead-lettered with its first bytes only; Prepare never sees it.
	ReasonTooLarge = "too_large"
	// ReasonKeyLimit is a reading of a new key refused because its
	// pipeline holds max_keys live keys already (KeyBudget); the window
	// subtask dead-letters it, not Prepare.
	ReasonKeyLimit = "key_limit"
)

// Preparer runs a PrepareSpec over readings one at a time, reusing one
// Record, so steady-state preparation allocates nothing. Not safe for
// concurrent use: each pipeline's prepare stage owns one.
type Preparer struct {
	spec PrepareSpec
	rec  event.Record
	same []int // same[i] = j < i when AggArgs[i] == AggArgs[j], else -1
	// meta are the schema's metadata slots (meta.topic, ...), filled
	// after decoding.
	meta []metaSlot

	// Results of the last Pass.
	Key      []byte
	KeyGroup uint16
	Subtask  int
	Time     int64
	Values   []float64
	// Result of the last Rejected.
	Reject Reject
	// Result of the last Punctuation.
	Watermark int64
	// Control is the captured control vector of the last Pass (nil
	// without PrepareSpec.Capture); valid until the next Prepare.
	Control []byte
	// ctlVersion is the State's version Control was captured at.
	ctlVersion uint64
	ctlValid   bool
}

// NewPreparer returns a Preparer for spec. The schema must be complete
// (every expression compiled) before this call.
func NewPreparer(spec PrepareSpec) *Preparer {
	if spec.MaxKeyGroups <= 0 {
		spec.MaxKeyGroups = state.DefaultMaxKeyGroups
	}
	if spec.Parallelism <= 0 {
		spec.Parallelism = 1
	}
	return &Preparer{spec: spec, same: expr.SameAs(spec.AggArgs), Values: make([]float64, len(spec.AggArgs)),
		meta: metaSlots(spec.Schema)}
}

// SetRange sets PrepareSpec.From and Until.
func (p *Preparer) SetRange(from, until int64) { p.spec.From, p.spec.Until = from, until }

// Prepare decodes and prepares one reading. payload is copied into the
// preparer's record; procTimeMs is the reading's processing time (its
// arrival, a processing-time pipeline's Time) and
// wallNowMs the device's wall clock, both in ms. wallSynced says whether
// that clock is synchronised: when it is not (a device without a real-time
// clock, before NTP), it is no reference and max_future_skew rejects nothing.
func (p *Preparer) Prepare(payload []byte, topic string, offset uint64, procTimeMs, wallNowMs int64, wallSynced bool) Outcome {
	return p.PrepareMessage(payload, topic, nil, offset, procTimeMs, wallNowMs, wallSynced)
}

// PrepareMessage is Prepare of a message with MQTT 5 properties (its
// content type and user properties as the PUBLISH encodes them,
// source.Message.Props), which expressions read as meta.content_type and
// meta.user_properties.NAME; props is copied.
func (p *Preparer) PrepareMessage(payload []byte, topic string, props []byte, offset uint64, procTimeMs, wallNowMs int64, wallSynced bool) Outcome {
	rec := &p.rec
	rec.Reset(p.spec.Schema.Len())
	rec.Payload = append(rec.Payload, payload...)
	rec.Topic = append(rec.Topic, topic...)
	rec.Props = append(rec.Props, props...)
	rec.Offset = offset
	if err := p.spec.Decoder.Decode(rec); err != nil {
		if err == decode.ErrHeader {
			return Skipped
		}
		return p.reject(err)
	}
	if len(p.meta) > 0 {
		fillMeta(rec, p.meta)
	}
	if p.spec.Punctuation != nil {
		if wm, err := p.spec.Punctuation.Extract(rec); err == nil {
			p.Watermark = wm
			return Punctuation
		} else if de, ok := err.(*decode.Error); !ok || de.Reason != decode.ReasonMissingTimestamp {
			return p.reject(err)
		}
	}
	if p.spec.Timestamp != nil {
		ts, err := p.spec.Timestamp.Extract(rec)
		if err != nil {
			return p.reject(err)
		}
		if wallSynced && p.spec.MaxFutureSkewMs > 0 && ts > wallNowMs+p.spec.MaxFutureSkewMs {
			p.Reject = Reject{Reason: ReasonFutureTimestamp, Detail: "timestamp is ahead of the device clock by more than max_future_skew"}
			return Rejected
		}
		rec.Time = ts
	} else {
		rec.Time = procTimeMs
	}
	if (p.spec.From != 0 || p.spec.Until != 0) && (rec.Time < p.spec.From || rec.Time >= p.spec.Until) {
		p.Time = rec.Time
		return Elsewhere
	}
	if p.spec.Filter != nil {
		keep, err := p.spec.Filter.EvalBool(rec)
		if err != nil {
			p.Reject = Reject{Reason: ReasonFilterType, Detail: err.Error()}
			return Rejected
		}
		if !keep {
			return Filtered
		}
	}
	for _, m := range p.spec.Maps {
		rec.Fields[m.Slot] = m.Prog.Eval(rec)
	}
	p.Key = p.Key[:0]
	if p.spec.Key != nil {
		var ok bool
		p.Key, ok = p.spec.Key.AppendKey(p.Key, rec)
		if !ok {
			p.Reject = Reject{Reason: ReasonMissingKey, Detail: "the key expression is null for this reading"}
			return Rejected
		}
	}
	for i, a := range p.spec.AggArgs {
		if a == nil {
			p.Values[i] = 0
			continue
		}
		if j := p.same[i]; j >= 0 {
			p.Values[i] = p.Values[j] // a string there was rejected
			continue
		}
		v := a.Eval(rec)
		switch v.Kind {
		case event.Number, event.Bool:
			p.Values[i] = v.Num
		case event.String:
			// A sensor sending "21.5" or "hot" where a number belongs is
			// a bad reading, not a null: dead-letter it so it is seen.
			p.Reject = Reject{Reason: ReasonWrongType, Detail: "an aggregate argument is a string, not a number"}
			return Rejected
		default:
			// Null or missing: aggregates skip it; count() still counts.
			p.Values[i] = math.NaN()
		}
	}
	if p.spec.Capture != nil {
		p.capture()
	}
	p.KeyGroup = state.KeyGroup(p.Key, p.spec.MaxKeyGroups)
	p.Subtask = state.Subtask(p.KeyGroup, p.spec.Parallelism, p.spec.MaxKeyGroups)
	p.Time = rec.Time
	return Pass
}

// capture sets Control to the control values in force now, encoded
// again only after the control state changed.
func (p *Preparer) capture() {
	st := p.spec.ControlState
	if v := st.Version(); !p.ctlValid || v != p.ctlVersion {
		p.Control = p.spec.Capture.AppendCapture(p.Control[:0], st)
		p.ctlVersion, p.ctlValid = v, true
	}
}

func (p *Preparer) reject(err error) Outcome {
	if de, ok := err.(*decode.Error); ok {
		p.Reject = Reject{Reason: de.Reason, Detail: de.Detail}
	} else {
		p.Reject = Reject{Reason: "decode", Detail: err.Error()}
	}
	return Rejected
}
