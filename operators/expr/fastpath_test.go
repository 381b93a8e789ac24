package expr

import (
	"errors"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
)

// TestProgram_FastPathsMatchGeneric checks the specialised closures (field
// tests, test pairs, arithmetic chains) against the generic ones. Wrapping
// an operand in coalesce(...), or reading a constant from a field, hides
// the shape from the compiler without changing the value.
func TestProgram_FastPathsMatchGeneric(t *testing.T) {
	values := []event.Value{missing, null, num(-3), num(0), num(150), num(250), str("x"), str("d1"), boolean(true), boolean(false)}
	for _, tc := range []struct{ fast, generic string }{
		{`event.a != null && event.a < 200`, `coalesce(event.a != null) && coalesce(event.a < 200)`},
		{`event.a > 5 || event.b == "x"`, `coalesce(event.a > 5) || coalesce(event.b == "x")`},
		{`event.a <= 0 && event.b >= 150`, `coalesce(event.a <= 0) && coalesce(event.b >= 150)`},
		{`event.a == 150 || event.b != true`, `coalesce(event.a == 150) || coalesce(event.b != true)`},
		{`event.a < 200`, `coalesce(event.a) < 200`},
		{`event.a == "d1"`, `coalesce(event.a) == "d1"`},
		{`event.a * 9 / 5 + 32`, `event.a * event.c9 / event.c5 + event.c32`},
		{`(event.a - 1) % 7 / 0`, `(event.a - event.c1) % event.c7 / event.c0`},
		{`-event.a * 1e308 * 10`, `-event.a * event.cbig * event.c10`},
	} {
		t.Run(tc.fast, func(t *testing.T) {
			schema := event.NewSchema()
			fast := mustCompile(t, tc.fast, schema)
			generic := mustCompile(t, tc.generic, schema)
			for _, a := range values {
				for _, b := range values {
					rec := newRecord(schema, fields{"a": a, "b": b, "c0": num(0), "c1": num(1), "c5": num(5),
						"c7": num(7), "c9": num(9), "c10": num(10), "c32": num(32), "cbig": num(1e308)})
					fv, ferr := fast.EvalErr(rec)
					gv, gerr := generic.EvalErr(rec)
					if !sameValue(fv, gv) || !sameError(ferr, gerr) {
						t.Fatalf("a=%s b=%s: fast %s %v, generic %s %v", show(a), show(b), show(fv), ferr, show(gv), gerr)
					}
					fb, ferr := fast.EvalBool(rec)
					gb, gerr := generic.EvalBool(rec)
					if fb != gb || !sameError(ferr, gerr) {
						t.Fatalf("a=%s b=%s: EvalBool fast %v %v, generic %v %v", show(a), show(b), fb, ferr, gb, gerr)
					}
				}
			}
		})
	}
}

// sameError compares runtime errors by sentinel and by what they say,
// leaving out the source range, which differs between the two spellings.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var ra, rb *RuntimeError
	if !errors.As(a, &ra) || !errors.As(b, &rb) {
		return false
	}
	return errors.Is(a, errors.Unwrap(b)) && strings.EqualFold(ra.Detail, rb.Detail)
}
