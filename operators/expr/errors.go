package expr

import (
	"errors"

	"github.com/hashicorp/hcl/v2"
)

// Sentinels for reading-level errors. A caller matches them with errors.Is
// on the error returned by EvalErr or EvalBool and dead-letters the reading.
var (
	// ErrType is returned when an operand or argument has the wrong type at
	// run time, such as a string field in arithmetic. Types known at compile
	// time are diagnostics instead.
	ErrType = errors.New("expr: wrong type")
	// ErrNumberSyntax is returned when tonumber gets a string that is not a
	// decimal number.
	ErrNumberSyntax = errors.New("expr: invalid number syntax")
	// ErrNotBool is returned by EvalBool when the result is neither a bool
	// nor null. The caller dead-letters the reading with reason "filter_type".
	ErrNotBool = errors.New("expr: filter result is not a bool")
)

// RuntimeError is a reading-level error. It names the expression that
// failed and wraps one of the sentinels above.
//
// RuntimeErrors are built once, at compile time, so returning one does not
// allocate; treat them as read-only.
type RuntimeError struct {
	// Range is the source range of the operand or call that failed.
	Range hcl.Range
	// Detail says what was wrong, e.g. "operator * needs a number, got string".
	Detail string
	kind   error
}

func (e *RuntimeError) Error() string {
	return "expr: " + e.Range.String() + ": " + e.Detail
}

// Unwrap returns the sentinel that classifies e.
func (e *RuntimeError) Unwrap() error { return e.kind }
