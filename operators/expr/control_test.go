package expr

import (
	"errors"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// mustCompileControl is mustCompile with control.* reading st.
func mustCompileControl(tb testing.TB, src string, schema *event.Schema, st *control.State) *Program {
	tb.Helper()
	e, diags := hclsyntax.ParseExpression([]byte(src), "test.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		tb.Fatalf("parse %q: %s", src, diags.Error())
	}
	p, diags := CompileWith(e, schema, Options{Control: st})
	if diags.HasErrors() {
		tb.Fatalf("compile %q: %s", src, diags.Error())
	}
	return p
}

func mustApply(tb testing.TB, st *control.State, msgs ...string) {
	tb.Helper()
	for _, m := range msgs {
		if err := st.Apply([]byte(m)); err != nil {
			tb.Fatalf("Apply(%s): %v", m, err)
		}
	}
}

const controlDoc = `{
	"threshold": {"dev-1": 30, "dev-2": 40, "7": 70, "21.5": 215},
	"offset": {"dev-1": -0.5},
	"cal": {"dev-1": {"gain": 2, "unit": "C"}},
	"paused": false,
	"default": 25,
	"name with space": {"x": "y"},
	"tags": ["a", 1]
}`

func TestProgram_Control(t *testing.T) {
	reading := fields{"temp": num(35), "device": str("dev-1"), "ch": num(7), "f": num(21.5), "ok": boolean(true), "n": null}
	other := fields{"temp": num(35), "device": str("dev-9")}
	for _, tc := range []struct {
		src  string
		in   fields
		want event.Value
	}{
		{`control.threshold["dev-1"]`, reading, num(30)},
		{`control["threshold"]["dev-2"]`, reading, num(40)},
		{`control.threshold[7]`, reading, num(70)},
		{`control.default`, reading, num(25)},
		{`control.paused`, reading, boolean(false)},
		{`control.threshold[event.device]`, reading, num(30)},
		{`control.threshold[event.device]`, other, missing},
		{`control.threshold[event.ch]`, reading, num(70)},
		{`control.threshold[event.f]`, reading, num(215)},
		{`control.threshold[event.n]`, reading, missing},
		{`control.threshold[event.absent]`, reading, missing},
		{`control.cal[event.device].gain * event.temp`, reading, num(70)},
		{`control.cal[event.device]["unit"]`, reading, str("C")},
		{`control.cal[event.device].unit`, other, missing},
		{`control["name with space"].x`, reading, str("y")},
		{`control[event.device]`, reading, missing},
		{`control.threshold[lower("DEV-2")]`, reading, num(40)},
		{`control.threshold["dev-${event.ch - 6}"]`, reading, num(30)},
		{`control.tags`, reading, str(`["a",1]`)},
		{`control.cal[event.device]`, reading, str(`{"gain":2,"unit":"C"}`)},
		{`control.paused.x`, reading, missing},
		{`control.nothing.at.all`, reading, missing},
		{`event.temp > control.threshold[event.device]`, reading, boolean(true)},
		{`event.temp > control.threshold[event.device]`, other, null},
		{`event.temp > coalesce(control.threshold[event.device], 40)`, other, boolean(false)},
		{`event.temp + coalesce(control.offset[event.device], 0)`, reading, num(34.5)},
		{`event.temp + coalesce(control.offset[event.device], 0)`, other, num(35)},
		{`has(control.threshold[event.device])`, reading, boolean(true)},
		{`has(control.threshold[event.device])`, other, boolean(false)},
		{`"${event.device}:${control.cal[event.device].unit}"`, reading, str("dev-1:C")},
		{`control.paused ? "off" : "on"`, reading, str("on")},
	} {
		t.Run(tc.src, func(t *testing.T) {
			st := control.New()
			mustApply(t, st, controlDoc)
			schema := event.NewSchema()
			p := mustCompileControl(t, tc.src, schema, st)
			if !p.ReadsControl() {
				t.Fatal("ReadsControl() = false")
			}
			got, err := p.EvalErr(newRecord(schema, tc.in))
			if err != nil {
				t.Fatalf("EvalErr: %v", err)
			}
			if !sameValue(got, tc.want) || (tc.want.Kind == event.Missing) != (got.Kind == event.Missing) {
				t.Fatalf("got %s, want %s", show(got), show(tc.want))
			}
		})
	}
}

// TestProgram_Control_FollowsApply checks that programs read the state at
// evaluation time: each Apply is seen by the next reading, including
// deletions and a Restore.
func TestProgram_Control_FollowsApply(t *testing.T) {
	st := control.New()
	schema := event.NewSchema()
	filter := mustCompileControl(t, `event.temp > coalesce(control.threshold[event.device], 30)`, schema, st)
	adjust := mustCompileControl(t, `event.temp + coalesce(control.offset[event.device], 0)`, schema, st)
	key := mustCompileControl(t, `coalesce(control.group[event.device], event.device)`, schema, st)
	rec := newRecord(schema, fields{"temp": num(35), "device": str("dev-1")})
	steps := []struct {
		msg    string
		pass   bool
		temp   float64
		keyOut string
	}{
		{``, true, 35, "dev-1"},
		{`{"threshold":{"dev-1":40}}`, false, 35, "dev-1"},
		{`{"offset":{"dev-1":1.5},"group":{"dev-1":"north"}}`, false, 36.5, "north"},
		{`{"threshold":{"dev-1":null}}`, true, 36.5, "north"},
		{`{"threshold":{"dev-1":36},"offset":null}`, false, 35, "north"},
		{`restore:{"threshold":{"dev-1":34}}`, true, 35, "dev-1"},
		{`{"threshold":null}`, true, 35, "dev-1"},
		{`{"threshold":{"dev-1":50}}`, false, 35, "dev-1"},
		{`{"threshold":7}`, true, 35, "dev-1"},
		{`{"threshold":{"dev-1":35}}`, false, 35, "dev-1"},
	}
	for _, s := range steps {
		switch {
		case strings.HasPrefix(s.msg, "restore:"):
			if err := st.Restore([]byte(strings.TrimPrefix(s.msg, "restore:"))); err != nil {
				t.Fatal(err)
			}
		case s.msg != "":
			mustApply(t, st, s.msg)
		}
		rec.Scratch = rec.Scratch[:0]
		pass, err := filter.EvalBool(rec)
		if err != nil || pass != s.pass {
			t.Fatalf("after %s: filter %v, %v; want %v", s.msg, pass, err, s.pass)
		}
		if v := adjust.Eval(rec); v.Num != s.temp {
			t.Fatalf("after %s: temp %s, want %v", s.msg, show(v), s.temp)
		}
		k, ok := key.AppendKey(nil, rec)
		if !ok || string(k) != s.keyOut {
			t.Fatalf("after %s: key %q, want %q", s.msg, k, s.keyOut)
		}
	}
}

func TestProgram_Control_RuntimeErrors(t *testing.T) {
	st := control.New()
	mustApply(t, st, `{"t":{"true":1,"dev":"x"}}`)
	for _, tc := range []struct {
		src    string
		in     fields
		detail string
		rng    string
	}{
		{`control.t[event.ok]`, fields{"ok": boolean(true)}, "control key must be a string or a number, got bool", "test.hcl:1,11-19"},
		{`control.t[event.x * 2]`, fields{"x": str("a")}, "left operand of * must be a number", "test.hcl:1,11-18"},
		// An error in a key wins even where the state has nothing.
		{`control.none[event.x * 2]`, fields{"x": str("a")}, "left operand of *", "test.hcl:1,14-21"},
		{`control.t[event.d] + 1`, fields{"d": str("dev")}, "left operand of + must be a number, got string", "test.hcl:1,1-19"},
		{`has(control.t[event.ok])`, fields{"ok": boolean(false)}, "got bool", "test.hcl:1,15-23"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			schema := event.NewSchema()
			p := mustCompileControl(t, tc.src, schema, st)
			v, err := p.EvalErr(newRecord(schema, tc.in))
			var re *RuntimeError
			if !errors.As(err, &re) || !errors.Is(err, ErrType) || !v.IsNull() {
				t.Fatalf("EvalErr = %s, %v; want an ErrType", show(v), err)
			}
			if !strings.Contains(re.Detail, tc.detail) || re.Range.String() != tc.rng {
				t.Fatalf("error %q at %s, want %q at %s", re.Detail, re.Range, tc.detail, tc.rng)
			}
		})
	}
}

func TestCompileWith_ControlDiagnostics(t *testing.T) {
	for _, tc := range []struct {
		src     string
		summary string
		subject string
		detail  string
	}{
		{`control`, "Missing control value name", "test.hcl:1,1-8", "control is the whole control state"},
		{`control[*]`, "Unsupported expression", "test.hcl:1,1-11", "splat"},
		{`control.a[*].b`, "Unsupported expression", "test.hcl:1,1-15", "splat"},
		{`control.a.*`, "Unsupported expression", "test.hcl:1,1-12", "splat"},
		{`control.a[true]`, "Invalid control key", "test.hcl:1,10-16", "string or a number"},
		{`control.a[null]`, "Invalid control key", "test.hcl:1,10-16", "string or a number"},
		{`control.a[event.x > 1]`, "Invalid control key", "test.hcl:1,11-22", "got a bool"},
		{`control.a[!event.ok]`, "Invalid control key", "test.hcl:1,11-20", "got a bool"},
		{`control.a[uper(event.x)]`, "Call to unknown function", "test.hcl:1,11-15", "upper"},
		{`contrl.a`, "Unknown variable", "test.hcl:1,1-7", `Did you mean "control"?`},
		{`foo.a`, "Unknown variable", "test.hcl:1,1-4", "event fields, the message's metadata and control values"},
		{`(control.a)[event.x]`, "Unsupported expression", "test.hcl:1,1-21", "Only event fields can be indexed"},
		{`control.a[event.x * "2"]`, "Invalid operand", "test.hcl:1,21-24", "right operand of *"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			e, diags := hclsyntax.ParseExpression([]byte(tc.src), "test.hcl", hcl.InitialPos)
			if diags.HasErrors() {
				t.Fatalf("parse: %s", diags.Error())
			}
			p, diags := CompileWith(e, event.NewSchema(), Options{Control: control.New()})
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

// TestCompile_RejectsControl pins that without a control state every
// control reference is the diagnostic Compile has always given.
func TestCompile_RejectsControl(t *testing.T) {
	for _, src := range []string{
		`control.paused`,
		`control.threshold[event.device]`,
		`control.cal[event.device].gain`,
		`event.temp > coalesce(control["t"], 1)`,
	} {
		e, _ := hclsyntax.ParseExpression([]byte(src), "test.hcl", hcl.InitialPos)
		for _, compile := range []func() (*Program, hcl.Diagnostics){
			func() (*Program, hcl.Diagnostics) { return Compile(e, event.NewSchema()) },
			func() (*Program, hcl.Diagnostics) { return CompileWith(e, event.NewSchema(), Options{}) },
		} {
			p, diags := compile()
			if p != nil || !diags.HasErrors() || diags[0].Summary != "Unsupported variable" ||
				!strings.Contains(diags[0].Detail, "not supported in expressions yet") {
				t.Fatalf("%s: %v", src, diags)
			}
			if s := diags[0].Subject.String(); !strings.HasSuffix(s, "-8") && !strings.Contains(src, "coalesce") {
				t.Fatalf("%s: subject %s, want the word control", src, s)
			}
		}
	}
	e, _ := hclsyntax.ParseExpression([]byte(`event.temp`), "test.hcl", hcl.InitialPos)
	if p, _ := Compile(e, event.NewSchema()); p.ReadsControl() {
		t.Fatal("event.temp reads control")
	}
}

// TestProgram_Control_ZeroAllocs extends TestProgram_ZeroAllocs to
// control reads: steady-state evaluation allocates nothing, including
// after the state changes (the first read of an object's text after a
// change allocates it, once).
func TestProgram_Control_ZeroAllocs(t *testing.T) {
	for _, src := range []string{
		`event.temp > control.threshold[event.device]`,
		`event.temp > coalesce(control.threshold[event.device], 30)`,
		`event.temp + coalesce(control.offset[event.device], 0)`,
		`control.cal[event.device].gain * event.temp`,
		`control.threshold[len(event.device)]`,
		`control.threshold["${event.site}/${event.device}"]`,
		`control.default`,
		`has(control.threshold[event.device]) && !control.paused`,
		`control.cal[event.device]`,
		`control.threshold[event.temp > 1]`, // runtime error: bool key
	} {
		if src == `control.threshold[event.temp > 1]` {
			src = `control.threshold[event.temp > 1 ? event.temp > 2 : "x"]`
		}
		t.Run(src, func(t *testing.T) {
			st := control.New()
			mustApply(t, st, controlDoc, `{"threshold":{"dev-0042":20,"8":1},"cal":{"dev-0042":{"gain":1.5}}}`)
			schema := event.NewSchema()
			p := mustCompileControl(t, src, schema, st)
			rec := newRecord(schema, steadyFields)
			key := make([]byte, 0, 64)
			run := func() {
				rec.Scratch = rec.Scratch[:0]
				_, _ = p.EvalErr(rec)
				_, _ = p.EvalBool(rec)
				key, _ = p.AppendKey(key[:0], rec)
			}
			run()
			if n := testing.AllocsPerRun(1000, run); n != 0 {
				t.Fatalf("%v allocs per reading, want 0", n)
			}
		})
	}
}

func BenchmarkProgram_EvalBool_ControlThreshold(b *testing.B) {
	st := control.New()
	mustApply(b, st, controlDoc, `{"threshold":{"dev-0042":20}}`)
	schema := event.NewSchema()
	p := mustCompileControl(b, `event.temp > coalesce(control.threshold[event.device], 30)`, schema, st)
	rec := newRecord(schema, steadyFields)
	b.ReportAllocs()
	for b.Loop() {
		sinkBool, _ = p.EvalBool(rec)
	}
}

func BenchmarkProgram_Eval_ControlOffset(b *testing.B) {
	st := control.New()
	mustApply(b, st, controlDoc, `{"cal":{"dev-0042":{"gain":1.5}}}`)
	schema := event.NewSchema()
	p := mustCompileControl(b, `event.temp * coalesce(control.cal[event.device].gain, 1)`, schema, st)
	rec := newRecord(schema, steadyFields)
	b.ReportAllocs()
	for b.Loop() {
		sinkValue = p.Eval(rec)
	}
}
