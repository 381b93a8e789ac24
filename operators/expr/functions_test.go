package expr

import (
	"testing"
)

func TestProgram_Eval_Functions(t *testing.T) {
	rec := fields{
		"temp": num(-2.5), "device": str("Dev-1"), "s": str("héllo"), "numtext": str("12.5e1"),
		"bad": str("12abc"), "ok": boolean(true), "n": null, "x": num(2),
	}
	runEvalCases(t, []evalCase{
		{name: "abs", src: `abs(event.temp)`, fields: rec, want: num(2.5)},
		{name: "floor", src: `floor(event.temp)`, fields: rec, want: num(-3)},
		{name: "ceil", src: `ceil(event.temp)`, fields: rec, want: num(-2)},
		{name: "round half away from zero", src: `round(event.temp)`, fields: rec, want: num(-3)},
		{name: "round up", src: `round(2.4)`, want: num(2)},
		{name: "sqrt", src: `sqrt(event.x * 8)`, fields: rec, want: num(4)},
		{name: "sqrt negative is null", src: `sqrt(event.temp)`, fields: rec, want: null},
		{name: "pow", src: `pow(event.x, 10)`, fields: rec, want: num(1024)},
		{name: "pow overflow is null", src: `pow(10, event.x * 400)`, fields: rec, want: null},
		{name: "min", src: `min(event.x, 5, event.temp)`, fields: rec, want: num(-2.5)},
		{name: "max", src: `max(event.x, 5, event.temp)`, fields: rec, want: num(5)},
		{name: "max one", src: `max(event.x)`, fields: rec, want: num(2)},
		{name: "max null", src: `max(event.x, event.nope)`, fields: rec, want: null},
		{name: "max string", src: `max(event.x, event.s)`, fields: rec, wantErr: ErrType},
		{name: "lower", src: `lower(event.device)`, fields: rec, want: str("dev-1")},
		{name: "upper", src: `upper(event.s)`, fields: rec, want: str("HÉLLO")},
		{name: "upper unchanged", src: `upper("ABC")`, want: str("ABC")},
		{name: "lower null", src: `lower(event.nope)`, want: null},
		{name: "lower number", src: `lower(event.x)`, fields: rec, wantErr: ErrType},
		{name: "len counts characters", src: `len(event.s)`, fields: rec, want: num(5)},
		{name: "len null", src: `len(event.nope)`, want: null},
		{name: "contains", src: `contains(event.device, "v-")`, fields: rec, want: boolean(true)},
		{name: "contains not", src: `contains(event.device, "x")`, fields: rec, want: boolean(false)},
		{name: "startswith", src: `startswith(event.device, "Dev")`, fields: rec, want: boolean(true)},
		{name: "endswith", src: `endswith(event.device, "-2")`, fields: rec, want: boolean(false)},
		{name: "contains null", src: `contains(event.nope, "x")`, want: null},
		{name: "contains number", src: `contains(event.device, event.x)`, fields: rec, wantErr: ErrType},
		{name: "coalesce first", src: `coalesce(event.temp, 0)`, fields: rec, want: num(-2.5)},
		{name: "coalesce skips nulls", src: `coalesce(event.nope, event.n, "dflt")`, fields: rec, want: str("dflt")},
		{name: "coalesce all null", src: `coalesce(event.nope, event.n)`, fields: rec, want: null},
		{name: "coalesce is lazy", src: `coalesce(event.x, event.s * 2)`, fields: rec, want: num(2)},
		{name: "has", src: `has(event.temp)`, fields: rec, want: boolean(true)},
		{name: "has missing", src: `has(event.nope)`, fields: rec, want: boolean(false)},
		{name: "has null", src: `has(event.n)`, fields: rec, want: boolean(false)},
		{name: "tonumber", src: `tonumber(event.numtext)`, fields: rec, want: num(125)},
		{name: "tonumber number", src: `tonumber(event.x)`, fields: rec, want: num(2)},
		{name: "tonumber null", src: `tonumber(event.nope)`, want: null},
		{name: "tonumber syntax", src: `tonumber(event.bad)`, fields: rec, wantErr: ErrNumberSyntax},
		{name: "tonumber bool", src: `tonumber(event.ok)`, fields: rec, wantErr: ErrType},
		{name: "tostring number", src: `tostring(event.temp)`, fields: rec, want: str("-2.5")},
		{name: "tostring bool", src: `tostring(event.ok)`, fields: rec, want: str("true")},
		{name: "tostring string", src: `tostring(event.device)`, fields: rec, want: str("Dev-1")},
		{name: "tostring null", src: `tostring(event.nope)`, want: null},
		{name: "constant call folded", src: `upper("a") == "A"`, want: boolean(true)},
	})
}

func TestIsDecimal(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "-1": true, "+1.5": true, "1.": true, ".5": true, "1e3": true, "1E-3": true, "12.5e+1": true,
		"": false, "-": false, ".": false, "e3": false, "1e": false, "1e+": false, "inf": false, "NaN": false,
		"0x10": false, "1_000": false, " 1": false, "1 ": false, "1.2.3": false,
	} {
		if got := isDecimal([]byte(s)); got != want {
			t.Errorf("isDecimal(%q) = %v, want %v", s, got, want)
		}
	}
}
