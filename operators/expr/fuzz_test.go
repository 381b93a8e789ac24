package expr

import (
	"errors"
	"testing"

	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// fuzzReadings are evaluated by every program FuzzCompile compiles: fields
// of each kind, missing and null, and a record shorter than the schema.
var fuzzReadings = []fields{
	{"temp": num(21.5), "device": str("dev-1"), "ok": boolean(true), "n": null, "level": str("12")},
	{"temp": str("hot"), "device": num(0), "ok": str("yes"), "a.b": num(-1e308)},
	{"temp": num(0), "device": str(""), "ok": boolean(false), "level": str("x\xff")},
	{},
}

// FuzzCompile parses arbitrary expression text, compiles it and evaluates
// it against a few readings: nothing may panic, and results must be valid
// Values (a known kind, no internal error value leaking out).
func FuzzCompile(f *testing.F) {
	for _, src := range []string{
		`event.temp != null && event.temp < 200`,
		`event.device`,
		`event.temp * 9 / 5 + 32`,
		`event["a"]["b"] % 0`,
		`-event.temp / 0`,
		`"${event.site}-${event.device}"`,
		`"${upper(event.device)}/${event.temp}/${event.ok}"`,
		`event.ok ? "a" : 1`,
		`!event.ok || event.n == null`,
		`abs(event.temp) + floor(1.5) + ceil(event.temp) + round(event.temp)`,
		`sqrt(pow(event.temp, 2)) > max(1, event.temp, 3) - min(event.temp)`,
		`lower(event.device) == upper(event.device)`,
		`len(event.device) + len("héllo")`,
		`coalesce(event.n, event.missing, event.temp, "none")`,
		`has(event.temp) && contains(event.device, "v") && startswith(event.device, "d") && endswith(event.device, "1")`,
		`tonumber(event.level) + tonumber("1e3")`,
		`tostring(event.temp) == "21.5"`,
		`"%{if event.ok}yes%{else}no%{endif}"`,
		`[for x in event.l : x]`,
		`control.paused`,
		`event.temp > coalesce(control.threshold[event.device], 30)`,
		`control.cal[event.device].gain * event.temp + control["offset"][event.temp]`,
		`has(control.t[event.ok]) || control.t[event.n] == null`,
		`control.a[*]`,
		`evnt.temp`,
		`foo(1)`,
	} {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, diags := hclsyntax.ParseExpression([]byte(src), "fuzz.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			return
		}
		st := control.New()
		if err := st.Apply([]byte(fuzzControl)); err != nil {
			t.Fatal(err)
		}
		for _, opts := range []Options{{}, {Control: st}} {
			fuzzProgram(t, e, opts)
		}
	})
}

// fuzzControl is the control state FuzzCompile's programs read.
const fuzzControl = `{"threshold":{"dev-1":20,"0":1},"cal":{"dev-1":{"gain":2}},"t":{"true":true},"paused":false,"tags":[1]}`

func fuzzProgram(t *testing.T, e hcl.Expression, opts Options) {
	schema := event.NewSchema()
	p, diags := CompileWith(e, schema, opts)
	if diags.HasErrors() {
		if p != nil {
			t.Fatalf("program with error diagnostics")
		}
		for _, d := range diags {
			if d.Subject == nil {
				t.Fatalf("diagnostic without subject: %s", d.Error())
			}
		}
		return
	}
	rec := &event.Record{}
	for _, fs := range fuzzReadings {
		fill(rec, schema, fs)
		checkValue(t, p.Eval(rec))
		v, err := p.EvalErr(rec)
		checkValue(t, v)
		var re *RuntimeError
		if err != nil && (!errors.As(err, &re) || !v.IsNull()) {
			t.Fatalf("EvalErr = %s, %v", show(v), err)
		}
		if _, err := p.EvalBool(rec); err != nil && !errors.As(err, &re) {
			t.Fatalf("EvalBool error %v is not a *RuntimeError", err)
		}
		p.AppendKey(nil, rec)
	}
	rec.Reset(0) // shorter than the schema
	checkValue(t, p.Eval(rec))
}

func checkValue(t *testing.T, v event.Value) {
	t.Helper()
	if v.Kind > event.Bool {
		t.Fatalf("invalid kind %d", v.Kind)
	}
}
