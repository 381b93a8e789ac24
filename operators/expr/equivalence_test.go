package expr

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyfunction "github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// referenceFunctions gives HCL's evaluator the functions Eddy has, from
// cty's stdlib where it has them and written from their definitions where
// it does not (has needs no reference: HCL fails on a missing attribute).
var referenceFunctions = map[string]ctyfunction.Function{
	"abs":        stdlib.AbsoluteFunc,
	"ceil":       stdlib.CeilFunc,
	"floor":      stdlib.FloorFunc,
	"min":        stdlib.MinFunc,
	"max":        stdlib.MaxFunc,
	"pow":        stdlib.PowFunc,
	"lower":      stdlib.LowerFunc,
	"upper":      stdlib.UpperFunc,
	"coalesce":   stdlib.CoalesceFunc,
	"tostring":   stdlib.MakeToFunc(cty.String),
	"tonumber":   stdlib.MakeToFunc(cty.Number),
	"sqrt":       numberReference(math.Sqrt),
	"round":      numberReference(math.Round),
	"len":        lenReference,
	"contains":   stringTestReference(strings.Contains),
	"startswith": stringTestReference(strings.HasPrefix),
	"endswith":   stringTestReference(strings.HasSuffix),
}

func numberReference(f func(float64) float64) ctyfunction.Function {
	return ctyfunction.New(&ctyfunction.Spec{
		Params: []ctyfunction.Parameter{{Name: "x", Type: cty.Number}},
		Type:   ctyfunction.StaticReturnType(cty.Number),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			x, _ := args[0].AsBigFloat().Float64()
			return cty.NumberFloatVal(f(x)), nil
		},
	})
}

var lenReference = ctyfunction.New(&ctyfunction.Spec{
	Params: []ctyfunction.Parameter{{Name: "s", Type: cty.String}},
	Type:   ctyfunction.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.NumberIntVal(int64(utf8.RuneCountInString(args[0].AsString()))), nil
	},
})

func stringTestReference(f func(s, sub string) bool) ctyfunction.Function {
	return ctyfunction.New(&ctyfunction.Spec{
		Params: []ctyfunction.Parameter{{Name: "s", Type: cty.String}, {Name: "sub", Type: cty.String}},
		Type:   ctyfunction.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(f(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

// equivalenceExprs are compared against HCL's evaluator. hum, ok and level
// keep one type (or null/missing) so coalesce, whose cty version unifies
// argument types, means the same in both.
var equivalenceExprs = []string{
	`event.temp`,
	`event.temp * 9 / 5 + 32`,
	`event.temp - event.hum`,
	`event.temp % 7`,
	`-event.temp`,
	`event.temp / event.hum`,
	`(event.temp + 1) * (event.hum - 2)`,
	`event.temp < 200`,
	`event.temp >= event.hum`,
	`event.temp > 10 == event.ok`,
	`event.temp == 20`,
	`event.temp != null && event.temp < 200`,
	`event.device == "d1"`,
	`event.device != event.site`,
	`event.ok && event.temp > 10`,
	`event.ok || event.hum < 50`,
	`!event.ok`,
	`event.temp > 25 ? "hot" : "cold"`,
	`event.ok ? event.hum : event.payload.sensor.temp`,
	`"${event.site}-${event.device}"`,
	`"t=${event.temp} ok=${event.ok}"`,
	`"${event.device}"`,
	`abs(event.temp)`,
	`floor(event.temp)`,
	`ceil(event.hum)`,
	`round(event.temp)`,
	`sqrt(event.hum)`,
	`pow(event.hum, 2)`,
	`max(event.temp, event.hum, 10)`,
	`min(event.temp, event.hum)`,
	`upper(event.device)`,
	`lower(event.site)`,
	`len(event.device)`,
	`coalesce(event.hum, 0)`,
	`tostring(event.temp)`,
	`tonumber(event.level) * 2`,
	`contains(event.device, "1")`,
	`startswith(event.site, "s")`,
	`endswith(event.device, "2")`,
	`event.payload.sensor.temp * 2`,
	`event["payload"]["sensor"]["temp"] > event.hum`,
}

// randomReading draws a reading in which each field may be missing, null
// or of an unexpected type, so both evaluators' edge rules are exercised.
func randomReading(r *rand.Rand) fields {
	fs := fields{}
	maybe := func(path string, v event.Value) {
		switch r.IntN(10) {
		case 0: // missing
		case 1:
			fs[path] = null
		default:
			fs[path] = v
		}
	}
	number := func() event.Value {
		if r.IntN(3) == 0 {
			return num(float64(r.IntN(60) - 10))
		}
		return num(math.Round((r.Float64()*300-50)*100) / 100)
	}
	temp := number()
	if r.IntN(8) == 0 {
		temp = str("warm")
	}
	maybe("temp", temp)
	maybe("hum", number())
	maybe("device", str([]string{"d1", "d2", "Dév-12", ""}[r.IntN(4)]))
	maybe("site", str([]string{"s1", "site-9", "S1"}[r.IntN(3)]))
	maybe("ok", boolean(r.IntN(2) == 0))
	maybe("level", str([]string{"12", "-3.5", "1e2", "abc", "0.25"}[r.IntN(5)]))
	maybe("payload.sensor.temp", number())
	return fs
}

// ctyReading builds HCL's view of the reading: missing fields are absent
// attributes (HCL then fails, and the case is skipped), nulls are nulls.
func ctyReading(fs fields) cty.Value {
	type tree = map[string]any
	root := tree{}
	for path, v := range fs {
		parts := strings.Split(path, ".")
		node := root
		for _, p := range parts[:len(parts)-1] {
			next, ok := node[p].(tree)
			if !ok {
				next = tree{}
				node[p] = next
			}
			node = next
		}
		node[parts[len(parts)-1]] = v
	}
	var build func(tree) cty.Value
	build = func(t tree) cty.Value {
		attrs := map[string]cty.Value{}
		for k, v := range t {
			switch v := v.(type) {
			case tree:
				attrs[k] = build(v)
			case event.Value:
				switch v.Kind {
				case event.Number:
					attrs[k] = cty.NumberFloatVal(v.Num)
				case event.String:
					attrs[k] = cty.StringVal(string(v.Str))
				case event.Bool:
					attrs[k] = cty.BoolVal(v.Num != 0)
				default:
					attrs[k] = cty.NullVal(cty.DynamicPseudoType)
				}
			}
		}
		return cty.ObjectVal(attrs)
	}
	return build(root)
}

// TestProgram_Eval_MatchesHCL checks Eval against HCL's own evaluator on
// random readings, wherever both give a value: HCL fails on missing fields
// and nulls in arithmetic (Eddy yields null) and converts strings in
// arithmetic (Eddy fails), and HCL computes with big floats, so numbers are
// compared with a relative tolerance.
func TestProgram_Eval_MatchesHCL(t *testing.T) {
	seed := uint64(20261129)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	const readings = 400
	for _, src := range equivalenceExprs {
		t.Run(src, func(t *testing.T) {
			e, diags := hclsyntax.ParseExpression([]byte(src), "eq.hcl", hcl.InitialPos)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			schema := event.NewSchema()
			p, diags := Compile(e, schema)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			rec := &event.Record{}
			compared := 0
			for range readings {
				fs := randomReading(r)
				fill(rec, schema, fs)
				got, err := p.EvalErr(rec)
				ctx := &hcl.EvalContext{
					Variables: map[string]cty.Value{"event": ctyReading(fs)},
					Functions: referenceFunctions,
				}
				want, diags := e.Value(ctx)
				if err != nil || diags.HasErrors() || !want.IsWhollyKnown() || !logicOperandsDefined(e, ctx) {
					continue
				}
				if want.Type() == cty.Number && !want.IsNull() {
					if f, _ := want.AsBigFloat().Float64(); math.IsInf(f, 0) {
						continue // HCL's x/0; Eddy's is null by design
					}
				}
				compared++
				if !agrees(got, want) {
					t.Fatalf("reading %v: Eddy %s, HCL %#v", fs, show(got), want)
				}
			}
			if compared < readings/10 {
				t.Fatalf("only %d of %d readings compared", compared, readings)
			}
		})
	}
}

// logicOperandsDefined reports whether every && and || in e has operands
// HCL can evaluate to a bool. HCL's short-circuit rules otherwise turn an
// invalid operand into a result (null && x can be false), where Eddy's
// three-valued logic gives null.
func logicOperandsDefined(e hclsyntax.Expression, ctx *hcl.EvalContext) bool {
	ok := true
	hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
		b, isBinary := n.(*hclsyntax.BinaryOpExpr)
		if !isBinary || (b.Op != hclsyntax.OpLogicalAnd && b.Op != hclsyntax.OpLogicalOr) {
			return nil
		}
		for _, operand := range []hclsyntax.Expression{b.LHS, b.RHS} {
			v, diags := operand.Value(ctx)
			if diags.HasErrors() || v.IsNull() {
				ok = false
			}
		}
		return nil
	})
	return ok
}

func agrees(got event.Value, want cty.Value) bool {
	if want.IsNull() {
		return got.IsNull()
	}
	switch want.Type() {
	case cty.Number:
		w, _ := want.AsBigFloat().Float64()
		return got.Kind == event.Number && math.Abs(got.Num-w) <= 1e-9*math.Max(1, math.Abs(w))
	case cty.String:
		return got.Kind == event.String && string(got.Str) == want.AsString()
	case cty.Bool:
		return got.Kind == event.Bool && (got.Num != 0) == want.True()
	}
	return false
}
