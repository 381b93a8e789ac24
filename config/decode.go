package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
)

// durationHint ends every Detail about a malformed duration.
const durationHint = `durations look like "500ms", "2s", "1m", "1h" or "1d"`

// sizeHint ends every Detail about a malformed size.
const sizeHint = `sizes look like "512KiB", "64MiB", "1GiB", "100MB", or a whole number of bytes`

// decoder collects the diagnostics of one decode; it never stops at the first
// error, so a user sees every mistake at once.
type decoder struct {
	diags hcl.Diagnostics
	funcs map[string]function.Function
	// accepted, when set, is told the schema every block is decoded
	// against: its attribute names and nested block types (the
	// configuration reference and examples/full.hcl are checked with it).
	accepted func(block *hcl.Block, attrNames []string, blocks []hcl.BlockHeaderSchema)
}

func (d *decoder) extend(diags hcl.Diagnostics) { d.diags = d.diags.Extend(diags) }

// errorf adds an error diagnostic on subject.
func (d *decoder) errorf(subject hcl.Range, summary, format string, args ...any) {
	d.diags = d.diags.Append(&hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject.Ptr(),
	})
}

// warnf adds a warning diagnostic on subject.
func (d *decoder) warnf(subject hcl.Range, summary, format string, args ...any) {
	d.diags = d.diags.Append(&hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject.Ptr(),
	})
}

// content decodes body against a schema of attribute names and block
// headers; unknown names get hcl's "Did you mean" diagnostics.
func (d *decoder) content(block *hcl.Block, attrNames []string, blocks ...hcl.BlockHeaderSchema) (attrs, *hcl.BodyContent) {
	schema := &hcl.BodySchema{Blocks: blocks}
	for _, n := range attrNames {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: n})
	}
	c, diags := block.Body.Content(schema)
	d.extend(diags)
	if d.accepted != nil {
		d.accepted(block, attrNames, blocks)
	}
	return attrs{d: d, m: c.Attributes, block: block}, c
}

// single returns the only block of type typ in blocks, or nil when there is
// none; a second one is a "Duplicate" error.
func (d *decoder) single(blocks hcl.Blocks, typ string) *hcl.Block {
	var first *hcl.Block
	for _, b := range blocks {
		if b.Type != typ {
			continue
		}
		if first != nil {
			d.errorf(b.DefRange, "Duplicate "+typ+" block",
				"Only one %s block is allowed here; the first is at %s.", typ, first.DefRange)
			continue
		}
		first = b
	}
	return first
}

// attrs are the attributes of one block, with typed getters that report
// every problem at the value's position and return the default instead.
type attrs struct {
	d     *decoder
	m     hcl.Attributes
	block *hcl.Block
}

// has reports whether name is set (to anything, even null).
func (a attrs) has(name string) bool { _, ok := a.m[name]; return ok }

// rangeOf returns the range of name's value, or the block's header range
// when name is not set (where a missing or defaulted value is reported).
func (a attrs) rangeOf(name string) hcl.Range {
	if at, ok := a.m[name]; ok {
		return at.Expr.Range()
	}
	return a.block.DefRange
}

// what names the block for messages, e.g. `source "mqtt" "sensors"`.
func (a attrs) what() string {
	s := a.block.Type
	for _, l := range a.block.Labels {
		s += fmt.Sprintf(" %q", l)
	}
	return s
}

// require reports each of names that is not set, at the block's header.
func (a attrs) require(names ...string) bool {
	ok := true
	for _, n := range names {
		if !a.has(n) {
			a.d.errorf(a.block.DefRange, "Missing required argument",
				"The %s block needs %q; add %s = ... inside it.", a.what(), n, n)
			ok = false
		}
	}
	return ok
}

// eval evaluates name with env() and file() and the template variables vars.
// It returns ok=false when name is unset, null, or wrong (already reported).
func (a attrs) eval(name string, vars templateVars) (cty.Value, bool) {
	at, ok := a.m[name]
	if !ok {
		return cty.NilVal, false
	}
	ok = true
	for _, tr := range at.Expr.Variables() {
		root, rng := tr.RootName(), tr.SourceRange()
		switch {
		case vars.has(root) && len(tr) == 1:
		case vars.has(root):
			a.d.errorf(rng, "Invalid template variable", "${%s} is a plain string; it has no attributes or elements.", root)
			ok = false
		case allTemplateVar.has(root):
			a.d.errorf(rng, "Template variable not allowed here",
				"${%s} cannot be used in %q, which accepts %s.", root, name, vars.describe())
			ok = false
		case len(vars) > 0:
			a.d.errorf(rng, "Unknown template variable",
				"There is no variable %q; %q accepts %s.%s", root, name, vars.describe(), didYouMean(root, vars))
			ok = false
		default:
			a.d.errorf(rng, "Variables not allowed",
				"%q takes a constant value, env(\"NAME\") or file(\"path\"); %q is not defined here.", name, root)
			ok = false
		}
	}
	if !ok {
		return cty.NilVal, false
	}
	ctx := &hcl.EvalContext{Functions: a.d.funcs, Variables: vars.values()}
	v, diags := at.Expr.Value(ctx)
	for _, diag := range diags {
		extra, isCall := hcl.DiagnosticExtra[hclsyntax.FunctionCallDiagExtra](diag)
		var missing missingEnvError
		if isCall && errors.As(extra.FunctionCallError(), &missing) {
			diag.Summary = "Missing environment variable"
			diag.Detail = fmt.Sprintf("The environment variable %q is not set. Set it, or give a default: env(%q, \"default\").", missing.name, missing.name)
			if diag.Context != nil {
				diag.Subject = diag.Context
			}
		}
	}
	a.d.extend(diags)
	if diags.HasErrors() || v.IsNull() || !v.IsWhollyKnown() {
		return cty.NilVal, false
	}
	return v, true
}

// typeError reports a value of the wrong type.
func (a attrs) typeError(name, want, example string) {
	a.d.errorf(a.rangeOf(name), "Incorrect attribute value type",
		"%q must be %s, e.g. %s = %s.", name, want, name, example)
}

// str returns name as a string; template placeholders must be among vars.
func (a attrs) str(name string, vars templateVars, def string) string {
	v, ok := a.eval(name, vars)
	if !ok {
		return def
	}
	if v.Type() != cty.String && !v.Type().IsPrimitiveType() {
		a.typeError(name, "a string", `"..."`)
		return def
	}
	sv, err := convert.Convert(v, cty.String)
	if err != nil {
		a.typeError(name, "a string", `"..."`)
		return def
	}
	s := sv.AsString()
	if len(vars) > 0 {
		// Catches $${name} escapes, which HCL leaves as literal text.
		for _, n := range templateNames(s) {
			if !vars.has(n) {
				a.d.errorf(a.rangeOf(name), "Unknown template variable",
					"There is no variable ${%s}; %q accepts %s.%s", n, name, vars.describe(), didYouMean(n, vars))
			}
		}
	}
	return s
}

// number returns name as a number, or ok=false after reporting.
func (a attrs) number(name, example string) (*big.Float, bool) {
	v, ok := a.eval(name, noVars)
	if !ok {
		return nil, false
	}
	nv, err := convert.Convert(v, cty.Number)
	if err != nil {
		a.typeError(name, "a number", example)
		return nil, false
	}
	return nv.AsBigFloat(), true
}

// integer returns name as a whole number within [lo, hi].
func (a attrs) integer(name string, def, lo, hi int64) int64 {
	f, ok := a.number(name, strconv.FormatInt(def, 10))
	if !ok {
		return def
	}
	n, acc := f.Int64()
	if !f.IsInt() || acc != 0 {
		a.d.errorf(a.rangeOf(name), "Invalid value", "%q must be a whole number, e.g. %s = %d.", name, name, def)
		return def
	}
	if n < lo || n > hi {
		a.d.errorf(a.rangeOf(name), "Value out of range", "%q must be %s; got %d.", name, rangeText(lo, hi), n)
		return def
	}
	return n
}

// float returns name as a number within [lo, hi].
func (a attrs) float(name string, def, lo, hi float64) float64 {
	f, ok := a.number(name, strconv.FormatFloat(def, 'g', -1, 64))
	if !ok {
		return def
	}
	x, _ := f.Float64()
	if x < lo || x > hi || math.IsNaN(x) {
		a.d.errorf(a.rangeOf(name), "Value out of range", "%q must be between %g and %g; got %g.", name, lo, hi, x)
		return def
	}
	return x
}

func rangeText(lo, hi int64) string {
	switch {
	case hi == math.MaxInt64:
		return fmt.Sprintf("at least %d", lo)
	default:
		return fmt.Sprintf("between %d and %d", lo, hi)
	}
}

// boolean returns name as a bool.
func (a attrs) boolean(name string, def bool) bool {
	v, ok := a.eval(name, noVars)
	if !ok {
		return def
	}
	if v.Type() != cty.Bool {
		a.typeError(name, "true or false", strconv.FormatBool(!def))
		return def
	}
	return v.True()
}

// duration returns name parsed as a non-negative duration.
func (a attrs) duration(name string, def time.Duration) time.Duration {
	return a.parsedDuration(name, def, parseDuration)
}

// signedDuration returns name parsed as a duration that may be negative.
func (a attrs) signedDuration(name string, def time.Duration) time.Duration {
	return a.parsedDuration(name, def, parseSignedDuration)
}

// parsedDuration returns name parsed by parse (parseDuration or
// parseSignedDuration), or def after a diagnostic.
func (a attrs) parsedDuration(name string, def time.Duration, parse func(string) (time.Duration, error)) time.Duration {
	v, ok := a.eval(name, noVars)
	if !ok {
		return def
	}
	if v.Type() == cty.Number {
		a.d.errorf(a.rangeOf(name), "Invalid duration",
			"%q needs a unit, written as a string: %s (e.g. \"%ss\").", name, durationHint, v.AsBigFloat().Text('g', -1))
		return def
	}
	if v.Type() != cty.String {
		a.typeError(name, "a duration string", `"2s"`)
		return def
	}
	dur, err := parse(v.AsString())
	switch {
	case errors.Is(err, errNegativeDuration):
		a.d.errorf(a.rangeOf(name), "Negative duration", "%q must be zero or positive; got %q.", name, v.AsString())
		return def
	case err != nil:
		a.d.errorf(a.rangeOf(name), "Invalid duration", "%q is not a duration: %s.", v.AsString(), durationHint)
		return def
	}
	return dur
}

// size returns name as a byte count: a whole number of bytes or a string
// with a unit.
func (a attrs) size(name string, def int64) int64 {
	v, ok := a.eval(name, noVars)
	if !ok {
		return def
	}
	switch v.Type() {
	case cty.Number:
		f := v.AsBigFloat()
		n, acc := f.Int64()
		if !f.IsInt() || acc != 0 || n < 0 {
			a.d.errorf(a.rangeOf(name), "Invalid size", "A size in bytes must be a whole number of zero or more; %s.", sizeHint)
			return def
		}
		return n
	case cty.String:
		n, err := parseSize(v.AsString())
		if err != nil {
			a.d.errorf(a.rangeOf(name), "Invalid size", "%q is not a size: %s.", v.AsString(), sizeHint)
			return def
		}
		return n
	}
	a.typeError(name, "a size", `"64MiB"`)
	return def
}

// enum returns name, which must be one of allowed.
func (a attrs) enum(name string, allowed []string, def string) string {
	s := a.str(name, noVars, def)
	for _, x := range allowed {
		if s == x {
			return s
		}
	}
	a.d.errorf(a.rangeOf(name), "Invalid value", "%q must be one of %s; got %q.%s", name, quoteList(allowed), s, didYouMean(s, allowed))
	return def
}

// strList returns name as a list of strings, each with its range (the
// element's range when the list is written literally). ok is false when
// name is unset or not a list.
func (a attrs) strList(name string, vars templateVars) (_ []string, _ []hcl.Range, ok bool) {
	v, ok := a.eval(name, vars)
	if !ok {
		return nil, nil, false
	}
	if !v.Type().IsListType() && !v.Type().IsTupleType() {
		a.typeError(name, "a list of strings", `["..."]`)
		return nil, nil, false
	}
	exprs, _ := hcl.ExprList(a.m[name].Expr)
	var out []string
	var ranges []hcl.Range
	for i, it := 0, v.ElementIterator(); it.Next(); i++ {
		_, ev := it.Element()
		rng := a.rangeOf(name)
		if len(exprs) == v.LengthInt() {
			rng = exprs[i].Range()
		}
		sv, err := convert.Convert(ev, cty.String)
		if err != nil || sv.IsNull() {
			a.d.errorf(rng, "Incorrect attribute value type", "Every element of %q must be a string.", name)
			continue
		}
		out = append(out, sv.AsString())
		ranges = append(ranges, rng)
	}
	return out, ranges, true
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}
