package expr

import (
	"errors"
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
)

// evalCase is one expression evaluated against one reading.
type evalCase struct {
	name    string
	src     string
	fields  fields
	want    event.Value
	wantErr error // with errors.Is; want is then ignored
}

func runEvalCases(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			schema := event.NewSchema()
			p := mustCompile(t, tc.src, schema)
			rec := newRecord(schema, tc.fields)
			got, err := p.EvalErr(rec)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("%s: err = %v, want %v", tc.src, err, tc.wantErr)
				}
				if v := p.Eval(rec); !v.IsNull() {
					t.Fatalf("%s: Eval on error = %s, want null", tc.src, show(v))
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: unexpected error %v", tc.src, err)
			}
			if !sameValue(got, tc.want) {
				t.Fatalf("%s = %s, want %s", tc.src, show(got), show(tc.want))
			}
		})
	}
}

func TestProgram_Eval_Literals(t *testing.T) {
	runEvalCases(t, []evalCase{
		{name: "number", src: `42.5`, want: num(42.5)},
		{name: "string", src: `"abc"`, want: str("abc")},
		{name: "true", src: `true`, want: boolean(true)},
		{name: "false", src: `false`, want: boolean(false)},
		{name: "null", src: `null`, want: null},
		{name: "parens", src: `(1)`, want: num(1)},
		{name: "empty string", src: `""`, want: str("")},
	})
}

func TestProgram_Eval_Fields(t *testing.T) {
	rec := fields{"temp": num(21.5), "device": str("d1"), "payload.sensor.temp": num(3), "a b": str("spaced")}
	runEvalCases(t, []evalCase{
		{name: "attr", src: `event.temp`, fields: rec, want: num(21.5)},
		{name: "string", src: `event.device`, fields: rec, want: str("d1")},
		{name: "nested", src: `event.payload.sensor.temp`, fields: rec, want: num(3)},
		{name: "index form", src: `event["payload"]["sensor"].temp`, fields: rec, want: num(3)},
		{name: "index with space", src: `event["a b"]`, fields: rec, want: str("spaced")},
		{name: "missing", src: `event.nope`, fields: rec, want: missing},
		{name: "explicit null", src: `event.n`, fields: fields{"n": null}, want: null},
	})
}

func TestProgram_Eval_Arithmetic(t *testing.T) {
	rec := fields{"temp": num(20), "s": str("5"), "b": boolean(true), "zero": num(0)}
	runEvalCases(t, []evalCase{
		{name: "add", src: `1 + 2`, want: num(3)},
		{name: "sub", src: `event.temp - 25`, fields: rec, want: num(-5)},
		{name: "mul", src: `event.temp * 2`, fields: rec, want: num(40)},
		{name: "div", src: `event.temp / 8`, fields: rec, want: num(2.5)},
		{name: "mod", src: `event.temp % 7`, fields: rec, want: num(6)},
		{name: "mod negative keeps dividend sign", src: `-7 % 3`, want: num(-1)},
		{name: "precedence", src: `event.temp * 9 / 5 + 32`, fields: rec, want: num(68)},
		{name: "parens", src: `(event.temp + 1) * 2`, fields: rec, want: num(42)},
		{name: "negate", src: `-event.temp`, fields: rec, want: num(-20)},
		{name: "const on left", src: `100 - event.temp`, fields: rec, want: num(80)},
		{name: "div by zero", src: `event.temp / event.zero`, fields: rec, want: null},
		{name: "const div by zero", src: `1 / 0`, want: null},
		{name: "mod by zero", src: `event.temp % 0`, fields: rec, want: null},
		{name: "overflow is null", src: `event.temp * 1e308 * 1e308`, fields: rec, want: null},
		{name: "missing left", src: `event.nope + 1`, fields: rec, want: null},
		{name: "missing right", src: `1 + event.nope`, fields: rec, want: null},
		{name: "null field", src: `event.n * 2`, fields: fields{"n": null}, want: null},
		{name: "negate null", src: `-event.nope`, want: null},
		{name: "string field", src: `event.s + 1`, fields: rec, wantErr: ErrType},
		{name: "bool field", src: `1 * event.b`, fields: rec, wantErr: ErrType},
		{name: "string beats null", src: `event.nope + event.s`, fields: rec, wantErr: ErrType},
		{name: "left error first", src: `event.s + tonumber(event.bad)`, fields: fields{"s": str("5"), "bad": str("x")}, wantErr: ErrType},
		{name: "right error after null", src: `event.nope + tonumber(event.s2)`, fields: fields{"s2": str("x")}, wantErr: ErrNumberSyntax},
		{name: "negate string", src: `-event.s`, fields: rec, wantErr: ErrType},
	})
}

func TestProgram_Eval_Comparison(t *testing.T) {
	rec := fields{"temp": num(20), "device": str("d1"), "other": str("d2"), "ok": boolean(true), "s": str("x")}
	runEvalCases(t, []evalCase{
		{name: "lt", src: `event.temp < 200`, fields: rec, want: boolean(true)},
		{name: "lt false", src: `event.temp < 20`, fields: rec, want: boolean(false)},
		{name: "le", src: `event.temp <= 20`, fields: rec, want: boolean(true)},
		{name: "gt", src: `event.temp > 20`, fields: rec, want: boolean(false)},
		{name: "ge", src: `event.temp >= 20`, fields: rec, want: boolean(true)},
		{name: "const left", src: `10 < event.temp`, fields: rec, want: boolean(true)},
		{name: "two fields", src: `event.temp > event.temp - 1`, fields: rec, want: boolean(true)},
		{name: "lt missing is null", src: `event.nope < 200`, fields: rec, want: null},
		{name: "lt string is error", src: `event.s < 200`, fields: rec, wantErr: ErrType},
		{name: "eq number", src: `event.temp == 20`, fields: rec, want: boolean(true)},
		{name: "ne number", src: `event.temp != 20`, fields: rec, want: boolean(false)},
		{name: "eq string", src: `event.device == "d1"`, fields: rec, want: boolean(true)},
		{name: "eq string differs", src: `event.device == "d2"`, fields: rec, want: boolean(false)},
		{name: "eq string const left", src: `"d1" == event.device`, fields: rec, want: boolean(true)},
		{name: "eq two fields", src: `event.device == event.other`, fields: rec, want: boolean(false)},
		{name: "eq bool", src: `event.ok == true`, fields: rec, want: boolean(true)},
		{name: "eq kinds differ", src: `event.temp == "20"`, fields: rec, want: boolean(false)},
		{name: "ne null present", src: `event.temp != null`, fields: rec, want: boolean(true)},
		{name: "ne null missing", src: `event.nope != null`, fields: rec, want: boolean(false)},
		{name: "eq null missing", src: `event.nope == null`, fields: rec, want: boolean(true)},
		{name: "eq null null", src: `event.n == null`, fields: fields{"n": null}, want: boolean(true)},
		{name: "null eq null", src: `null == null`, want: boolean(true)},
		{name: "eq error propagates", src: `(event.s * 2) == 1`, fields: rec, wantErr: ErrType},
	})
}

func TestProgram_Eval_Logic(t *testing.T) {
	rec := fields{"t": boolean(true), "f": boolean(false), "n": null, "s": str("x"), "temp": num(150)}
	runEvalCases(t, []evalCase{
		{name: "and", src: `event.t && event.t`, fields: rec, want: boolean(true)},
		{name: "and false", src: `event.t && event.f`, fields: rec, want: boolean(false)},
		{name: "or", src: `event.f || event.t`, fields: rec, want: boolean(true)},
		{name: "or false", src: `event.f || event.f`, fields: rec, want: boolean(false)},
		{name: "not", src: `!event.t`, fields: rec, want: boolean(false)},
		{name: "not null", src: `!event.n`, fields: rec, want: null},
		{name: "false and null", src: `event.f && event.n`, fields: rec, want: boolean(false)},
		{name: "null and false", src: `event.n && event.f`, fields: rec, want: boolean(false)},
		{name: "true and null", src: `event.t && event.n`, fields: rec, want: null},
		{name: "null and true", src: `event.n && event.t`, fields: rec, want: null},
		{name: "true or null", src: `event.t || event.n`, fields: rec, want: boolean(true)},
		{name: "null or true", src: `event.n || event.t`, fields: rec, want: boolean(true)},
		{name: "null or false", src: `event.n || event.f`, fields: rec, want: null},
		{name: "false short-circuits error", src: `event.f && event.s`, fields: rec, want: boolean(false)},
		{name: "true short-circuits error", src: `event.t || event.s`, fields: rec, want: boolean(true)},
		{name: "string operand", src: `event.t && event.s`, fields: rec, wantErr: ErrType},
		{name: "string left operand", src: `event.s || event.t`, fields: rec, wantErr: ErrType},
		{name: "not string", src: `!event.s`, fields: rec, wantErr: ErrType},
		{name: "filter shape", src: `event.temp != null && event.temp < 200`, fields: rec, want: boolean(true)},
		{name: "filter shape missing", src: `event.nope != null && event.nope < 200`, fields: rec, want: boolean(false)},
	})
}

func TestProgram_Eval_Conditional(t *testing.T) {
	rec := fields{"temp": num(30), "n": null, "s": str("x")}
	runEvalCases(t, []evalCase{
		{name: "true branch", src: `event.temp > 25 ? "hot" : "ok"`, fields: rec, want: str("hot")},
		{name: "false branch", src: `event.temp > 35 ? "hot" : "ok"`, fields: rec, want: str("ok")},
		{name: "null condition", src: `event.n ? 1 : 2`, fields: rec, want: null},
		{name: "missing condition", src: `event.nope > 1 ? 1 : 2`, fields: rec, want: null},
		{name: "string condition", src: `event.s ? 1 : 2`, fields: rec, wantErr: ErrType},
		{name: "const condition", src: `true ? event.temp : 0`, fields: rec, want: num(30)},
		{name: "branch not taken is not evaluated", src: `event.temp > 0 ? 1 : event.s * 2`, fields: rec, want: num(1)},
		{name: "mixed branch types", src: `event.temp > 0 ? event.s : 1`, fields: rec, want: str("x")},
	})
}

func TestProgram_Eval_Template(t *testing.T) {
	rec := fields{"site": str("s1"), "device": str("d1"), "temp": num(21.5), "ok": boolean(true), "n": null}
	runEvalCases(t, []evalCase{
		{name: "two parts", src: `"${event.site}-${event.device}"`, fields: rec, want: str("s1-d1")},
		{name: "number", src: `"t=${event.temp}"`, fields: rec, want: str("t=21.5")},
		{name: "bool", src: `"${event.ok}!"`, fields: rec, want: str("true!")},
		{name: "wrap keeps type", src: `"${event.temp}"`, fields: rec, want: num(21.5)},
		{name: "literal only", src: `"plain"`, want: str("plain")},
		{name: "escape", src: `"$${x}"`, want: str("${x}")},
		{name: "constant parts folded", src: `"a${1 + 1}b"`, want: str("a2b")},
		{name: "null part", src: `"${event.site}/${event.n}"`, fields: rec, want: null},
		{name: "missing part", src: `"${event.site}/${event.nope}"`, fields: rec, want: null},
		{name: "error part", src: `"${event.site}/${event.site * 2}"`, fields: rec, wantErr: ErrType},
		{name: "error beats earlier null", src: `"${event.n}/${event.site * 2}"`, fields: rec, wantErr: ErrType},
		{name: "computed part", src: `"${event.site}/${upper(event.device)}/${lower("X")}"`, fields: rec, want: str("s1/D1/x")},
		{name: "nested template", src: `"<${"${event.site}:${upper(event.device)}"}>"`, fields: rec, want: str("<s1:D1>")},
		{name: "if directive", src: `"%{if event.ok}yes%{else}no%{endif}"`, fields: rec, want: str("yes")},
	})
}
