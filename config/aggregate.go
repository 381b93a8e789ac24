package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Aggregate functions.
var aggregateFuncs = []string{"count", "sum", "min", "max", "avg", "first", "last", "stddev", "variance", "median", "percentile"}

// reservedFields are the output record's own fields, which an aggregate
// cannot be named (the output record's own fields; see README "Configuration").
var reservedFields = []string{"id", "pipeline", "key", "window_start", "window_end", "window_start_ms", "window_end_ms", "kind", "firing", "definition"}

// Aggregate is one NAME = FUNC(args) of an aggregate block.
type Aggregate struct {
	// Name is the output field.
	Name string
	// Func is one of count, sum, min, max, avg, first, last, stddev,
	// variance, median, percentile.
	Func string
	// Arg is the expression over event aggregated; nil for count().
	Arg hcl.Expression
	// Q is percentile's quantile in (0, 1); 0 for the others.
	Q     float64
	Range hcl.Range
}

// decodeAggregates checks the call shape of each aggregate, in source order.
func (d *decoder) decodeAggregates(b *hcl.Block) []Aggregate {
	attrs, diags := b.Body.JustAttributes()
	d.extend(diags)
	var out []Aggregate
	for _, at := range sortedAttrs(attrs) {
		if contains(reservedFields, at.Name) {
			d.errorf(at.NameRange, "Reserved field name", "%q is a field of every output record; name the aggregate differently.", at.Name)
			continue
		}
		call, diags := hcl.ExprCall(at.Expr)
		if diags.HasErrors() {
			d.errorf(at.Expr.Range(), "Invalid aggregate", "%q must be a call like avg(event.temp) or count(); functions: %s.", at.Name, joinNames(aggregateFuncs))
			continue
		}
		if !contains(aggregateFuncs, call.Name) {
			d.errorf(call.NameRange, "Unknown aggregate function", "There is no aggregate %q; use one of %s.%s",
				call.Name, joinNames(aggregateFuncs), didYouMean(call.Name, aggregateFuncs))
			continue
		}
		agg := Aggregate{Name: at.Name, Func: call.Name, Range: at.Range}
		args := call.Arguments
		switch call.Name {
		case "count":
			// count() counts readings; count(expr) counts readings whose
			// expr is not null, as SQL's COUNT(expr).
			if len(args) > 1 {
				d.errorf(call.ArgsRange, "Wrong number of arguments", "count() counts readings; count(event.x) counts readings where event.x is not null.")
				continue
			}
			if len(args) == 1 {
				agg.Arg = args[0]
			}
		case "percentile":
			if len(args) != 2 {
				d.errorf(call.ArgsRange, "Wrong number of arguments", "percentile takes an expression and a quantile, e.g. percentile(event.temp, 0.95).")
				continue
			}
			q, ok := numberLiteral(args[1])
			if !ok {
				d.errorf(args[1].Range(), "Invalid quantile", "The quantile must be a number literal between 0 and 1, e.g. 0.95.")
				continue
			}
			if q <= 0 || q >= 1 {
				d.errorf(args[1].Range(), "Quantile out of range", "The quantile must be strictly between 0 and 1, e.g. 0.95 for the 95th percentile; got %g.", q)
				continue
			}
			agg.Arg, agg.Q = args[0], q
		default:
			if len(args) != 1 {
				d.errorf(call.ArgsRange, "Wrong number of arguments", "%s takes exactly one expression, e.g. %s(event.temp).", call.Name, call.Name)
				continue
			}
			agg.Arg = args[0]
		}
		out = append(out, agg)
	}
	return out
}

// numberLiteral returns expr's value when it is a constant number.
func numberLiteral(expr hcl.Expression) (float64, bool) {
	if len(expr.Variables()) > 0 {
		return 0, false
	}
	v, diags := expr.Value(nil)
	if diags.HasErrors() || v.IsNull() || v.Type() != cty.Number {
		return 0, false
	}
	f, _ := v.AsBigFloat().Float64()
	return f, true
}

func joinNames(xs []string) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s
}
