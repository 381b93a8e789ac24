package expr

import (
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestCompile_Diagnostics pins summary, subject (file:line,col-col as
// hcl.Range prints it) and a piece of the detail of every compile error.
func TestCompile_Diagnostics(t *testing.T) {
	for _, tc := range []struct {
		src     string
		summary string
		subject string
		detail  string
	}{
		{`evnt.temp`, "Unknown variable", "test.hcl:1,1-5", `Did you mean "event"?`},
		{`foo.x`, "Unknown variable", "test.hcl:1,1-4", "only event fields"},
		{`control.paused`, "Unsupported variable", "test.hcl:1,1-8", "not supported in expressions yet"},
		{`event`, "Missing field name", "test.hcl:1,1-6", "name one of its fields"},
		{`event[0]`, "Invalid field name", "test.hcl:1,6-9", "constant string"},
		{`event.a[1]`, "Invalid field name", "test.hcl:1,8-11", "constant string"},
		{`uper(event.x)`, "Call to unknown function", "test.hcl:1,1-5", `Did you mean "upper"?`},
		{`median(event.x)`, "Call to unknown function", "test.hcl:1,1-7", "Known functions: abs, ceil, changed, coalesce, contains, count_key, delta, endswith, first_seen, floor, has, len, lower, max, min, pow, prev, round, since, sqrt, startswith, tonumber, tostring, upper."},
		{`abs(1, 2)`, "Too many function arguments", "test.hcl:1,8-9", `"abs" expects 1 argument, but got 2`},
		{`pow(1)`, "Not enough function arguments", "test.hcl:1,6-7", "expects 2 arguments"},
		{`max()`, "Not enough function arguments", "test.hcl:1,5-6", "at least 1 argument"},
		{`"a" * 2`, "Invalid operand", "test.hcl:1,1-4", "left operand of *: a number is required, got a string"},
		{`event.x + true`, "Invalid operand", "test.hcl:1,11-15", "right operand of +"},
		{`event.x < "10"`, "Invalid operand", "test.hcl:1,11-15", "right operand of <"},
		{`event.ok && 1`, "Invalid operand", "test.hcl:1,13-14", "a bool is required, got a number"},
		{`!"x"`, "Invalid operand", "test.hcl:1,2-5", "operand of !"},
		{`-event.ok == true ? 1 : 2`, "", "", ""}, // fine: type unknown until run time
		{`-"x"`, "Invalid operand", "test.hcl:1,2-5", "operand of -"},
		{`1 ? 2 : 3`, "Invalid operand", "test.hcl:1,1-2", "condition"},
		{`lower(event.x) * 2`, "Invalid operand", "test.hcl:1,1-15", "got a string"},
		{`upper(1)`, "Invalid operand", "test.hcl:1,7-8", "argument 1 of upper"},
		{`has(1)`, "Invalid function argument", "test.hcl:1,5-6", "has(event.temp)"},
		{`tonumber(true)`, "Invalid function argument", "test.hcl:1,10-14", "bool"},
		{`tonumber("abc")`, "Invalid expression value", "test.hcl:1,10-15", "not a decimal number"},
		{`[1, 2]`, "Unsupported expression", "test.hcl:1,1-7", "lists"},
		{`{a = 1}`, "Unsupported expression", "test.hcl:1,1-8", "objects"},
		{`[for x in event.l : x]`, "Unsupported expression", "test.hcl:1,1-23", "for expressions"},
		{`event.l[*].x`, "Unsupported expression", "test.hcl:1,1-13", "splat"},
		{`event[event.k]`, "Unsupported expression", "test.hcl:1,1-15", "constant string"},
		{`upper(event.x).y`, "Unsupported expression", "test.hcl:1,1-17", "only from event"},
		{`abs(event.l...)`, "Unsupported expression", "test.hcl:1,5-12", "cannot be expanded"},
		{"event.temp +\n  foo.bar", "Unknown variable", "test.hcl:2,3-6", "only event fields"},
		{`1e400`, "Number out of range", "test.hcl:1,1-6", "64-bit"},
		{`chnged(event.x)`, "Call to unknown function", "test.hcl:1,1-7", `Did you mean "changed"?`},
		{`prev(event.x)`, "Per-key function not allowed here", "test.hcl:1,1-5", "only in filter, map and aggregate arguments"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			e, diags := hclsyntax.ParseExpression([]byte(tc.src), "test.hcl", hcl.InitialPos)
			if diags.HasErrors() {
				t.Fatalf("parse: %s", diags.Error())
			}
			p, diags := Compile(e, event.NewSchema())
			if tc.summary == "" {
				if diags.HasErrors() || p == nil {
					t.Fatalf("unexpected diagnostics: %s", diags.Error())
				}
				return
			}
			if !diags.HasErrors() || p != nil {
				t.Fatalf("no error; program %v", p)
			}
			d := diags[0]
			if d.Summary != tc.summary || d.Subject == nil || d.Subject.String() != tc.subject ||
				!strings.Contains(d.Detail, tc.detail) {
				t.Fatalf("got %q at %v: %q\nwant %q at %s: ...%q...", d.Summary, d.Subject, d.Detail, tc.summary, tc.subject, tc.detail)
			}
		})
	}
}

func TestCompile_AllErrorsInOnePass(t *testing.T) {
	e, _ := hclsyntax.ParseExpression([]byte(`foo.x + uper(event.y) + "a" * 1`), "test.hcl", hcl.InitialPos)
	_, diags := Compile(e, event.NewSchema())
	if len(diags) != 3 {
		t.Fatalf("got %d diagnostics, want 3: %s", len(diags), diags.Error())
	}
}

func TestNameSuggestion(t *testing.T) {
	for _, tc := range []struct{ given, want string }{
		{"evnt", "event"}, {"Event", "event"}, {"evenst", "event"}, {"device", ""},
	} {
		if got := nameSuggestion(tc.given, []string{"event"}); got != tc.want {
			t.Errorf("nameSuggestion(%q) = %q, want %q", tc.given, got, tc.want)
		}
	}
}
