package expr

import (
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestKeyed_CallsCollected checks that per-key calls of several programs
// land in one KeyedCalls in compile order, each program listing its own,
// and that a call reads its result from Record.Keyed.
func TestKeyed_CallsCollected(t *testing.T) {
	schema := event.NewSchema()
	calls := &KeyedCalls{}
	compile := func(src string) *Program {
		e, _ := hclsyntax.ParseExpression([]byte(src), "test.hcl", hcl.InitialPos)
		p, diags := CompileWith(e, schema, Options{Keyed: calls})
		if diags.HasErrors() {
			t.Fatalf("%s: %s", src, diags)
		}
		return p
	}
	f := compile(`changed(event.s) && event.v > 0`)
	m := compile(`coalesce(prev(event.v), 0) + delta(event.c) * count_key()`)
	if got := len(calls.Calls); got != 4 {
		t.Fatalf("%d calls, want 4", got)
	}
	want := []KeyedFunc{Changed, Prev, Delta, CountKey}
	for i, c := range calls.Calls {
		if c.Func != want[i] {
			t.Errorf("call %d is %d, want %d", i, c.Func, want[i])
		}
		if (c.Arg == nil) != (c.Func == CountKey) {
			t.Errorf("call %d: argument %v", i, c.Arg)
		}
	}
	if got := f.KeyedCalls(); len(got) != 1 || got[0] != 0 {
		t.Errorf("filter calls %v, want [0]", got)
	}
	if got := m.KeyedCalls(); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("map calls %v, want [1 2 3]", got)
	}
	rec := newRecord(schema, fields{"v": event.NumberValue(5)})
	rec.Keyed = []event.Value{event.BoolValue(true), event.NumberValue(2), event.NumberValue(3), event.NumberValue(4)}
	if ok, err := f.EvalBool(rec); !ok || err != nil {
		t.Errorf("filter = %v, %v; want true", ok, err)
	}
	if v := m.Eval(rec); v.Kind != event.Number || v.Num != 14 {
		t.Errorf("map = %v, want 14", v)
	}
	if v := calls.Calls[1].Arg.Eval(rec); v.Num != 5 {
		t.Errorf("prev's argument = %v, want 5", v)
	}
}

// TestKeyed_Diagnostics pins the errors of per-key calls.
func TestKeyed_Diagnostics(t *testing.T) {
	for _, tc := range []struct {
		src, summary, subject, detail string
		keyed                         bool
	}{
		{`changed(event.x)`, "Per-key function not allowed here", "test.hcl:1,1-8", "not in key", false},
		{`changed(prev(event.x))`, "Nested per-key function", "test.hcl:1,9-13", "compute it in a map field first", true},
		{`prev()`, "Wrong number of function arguments", "test.hcl:1,1-7", `"prev" expects 1 argument(s), but got 0`, true},
		{`count_key(event.x)`, "Wrong number of function arguments", "test.hcl:1,1-19", "expects 0", true},
		{`delta("a")`, "Invalid operand", "test.hcl:1,7-10", "argument 1 of delta: a number is required", true},
		{`changed(event.x) * 2`, "Invalid operand", "test.hcl:1,1-17", "got a bool", true},
	} {
		t.Run(tc.src, func(t *testing.T) {
			e, _ := hclsyntax.ParseExpression([]byte(tc.src), "test.hcl", hcl.InitialPos)
			opts := Options{Where: "key"}
			calls := &KeyedCalls{}
			if tc.keyed {
				opts.Keyed = calls
			}
			p, diags := CompileWith(e, event.NewSchema(), opts)
			if !diags.HasErrors() || p != nil {
				t.Fatalf("no error")
			}
			d := diags[0]
			if d.Summary != tc.summary || d.Subject.String() != tc.subject || !strings.Contains(d.Detail, tc.detail) {
				t.Errorf("got %q at %s: %q; want %q at %s: ...%q...", d.Summary, d.Subject, d.Detail, tc.summary, tc.subject, tc.detail)
			}
			if len(calls.Calls) != 0 {
				t.Errorf("a failed compile left %d calls", len(calls.Calls))
			}
		})
	}
}
