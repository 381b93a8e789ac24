package expr

import (
	"math"

	"github.com/eddy-edge/eddy/operators/event"
)

// kindError marks an internal value that carries a runtime error: Num holds
// the index of the error in the program's error table. It never leaves the
// package: Eval turns it into null, EvalErr and EvalBool into the error.
const kindError event.Kind = 0xff

// numKinds is the number of event kinds, so tables indexed by Kind fit.
const numKinds = int(event.Bool) + 1

// evalFn evaluates one node of a compiled expression. It must not allocate
// in steady state: computed strings go to rec.Scratch.
type evalFn func(rec *event.Record) event.Value

var (
	nullValue  = event.Value{Kind: event.Null}
	trueValue  = event.BoolValue(true)
	falseValue = event.BoolValue(false)
)

func errValue(index int) event.Value {
	return event.Value{Kind: kindError, Num: float64(index)}
}

// numberResult returns x as a Number, or null when x is NaN or infinite:
// results stay finite, so they can always be written as JSON.
func numberResult(x float64) event.Value {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nullValue
	}
	return event.Value{Kind: event.Number, Num: x}
}

// staticType is what the compiler knows about a node's result before any
// reading arrives. typeAny (a field, or a mix) is checked at run time.
type staticType uint8

const (
	typeAny staticType = iota
	typeNull
	typeNumber
	typeString
	typeBool
)

func (t staticType) String() string {
	switch t {
	case typeNull:
		return "null"
	case typeNumber:
		return "number"
	case typeString:
		return "string"
	case typeBool:
		return "bool"
	}
	return "any"
}

// kind returns the event kind a value of static type t has when not null.
func (t staticType) kind() event.Kind {
	switch t {
	case typeNumber:
		return event.Number
	case typeString:
		return event.String
	case typeBool:
		return event.Bool
	}
	return event.Missing
}

// join is the static type of a value that is either a or b; null joins with
// anything because every value may be null.
func join(a, b staticType) staticType {
	switch {
	case a == b:
		return a
	case a == typeNull:
		return b
	case b == typeNull:
		return a
	}
	return typeAny
}

// accepts reports whether an operand of static type t may, at run time, be
// a value of kind want (or null, which every operation accepts).
func (t staticType) accepts(want event.Kind) bool {
	return t == typeAny || t == typeNull || t.kind() == want
}
