package expr

import (
	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
)

// Program is a compiled expression. Safe for concurrent use (it holds no
// per-call state); Eval writes into caller-owned memory. A Program that
// reads control.* (ReadsControl) is the exception: it reads its
// control.State on every evaluation, so it must be evaluated only on the
// goroutine that owns that State.
type Program struct {
	root evalFn
	rng  hcl.Range
	// readsControl is set when the program reads the control state.
	readsControl bool
	// errs holds every runtime error the program can return, built at
	// compile time; internal error values index it.
	errs []error
	// notBool holds EvalBool's error for each non-bool result kind.
	notBool [numKinds]error
	// test or pair is the root when it is a field test (or two), so
	// EvalBool skips building a Value.
	test *fieldTest
	pair *testPair
	// keyed are the indexes of the per-key calls the program reads.
	keyed []int
}

// Compile compiles e once, for evaluation against records of schema. e
// must have parsed without errors: hclsyntax returns partial expressions
// alongside parse errors, and Compile cannot tell them from whole ones.
//
// Every event field e reads (event.a.b or event["a"]["b"]) is registered
// with schema.Slot, so Compile must run while the pipeline is being built,
// before records flow. On error the schema may keep slots registered by the
// failed expression; a configuration with errors is not run.
//
// The diagnostics carry the exact source range of the offending part. When
// they have errors, the Program is nil.
//
// Compile rejects control.*; CompileWith enables it.
func Compile(e hcl.Expression, schema *event.Schema) (*Program, hcl.Diagnostics) {
	return CompileWith(e, schema, Options{})
}

// Options configure CompileWith. The zero Options compile as Compile does.
type Options struct {
	// Control, when set, lets the expression read the pipeline's control
	// state as control.a.b, control.a[expr] and control["a"] (see the
	// package documentation). The Program reads the State at every
	// evaluation, not at compile time, so it sees every Apply made
	// before the evaluation; it must be evaluated on the goroutine that
	// owns the State. Nil: control.* is a diagnostic.
	Control *control.State
	// ControlCapture, when set (Control then nil), lets the expression
	// read constant control paths from Record.Control, the values
	// captured for the reading, and collects those paths: for programs
	// evaluated away from the State (a keyed pipeline's). Nil with
	// Control nil: control.* is a diagnostic.
	ControlCapture *ControlPaths
	// Keyed, when set, allows the per-key functions (prev, changed, delta,
	// since, first_seen, count_key) and collects their calls: the keyed
	// operator computes them per reading into Record.Keyed before it
	// evaluates the Program (see KeyedCalls). Nil: they are diagnostics
	// saying where they can be used.
	Keyed *KeyedCalls
	// Where names the place of the expression (e.g. "key") in the
	// diagnostic of a per-key function used where Keyed is nil.
	Where string
}

// CompileWith is Compile with options.
func CompileWith(e hcl.Expression, schema *event.Schema, opts Options) (*Program, hcl.Diagnostics) {
	c := &compiler{schema: schema, control: opts.Control, capture: opts.ControlCapture, keyed: opts.Keyed, where: opts.Where}
	var before int
	if c.keyed != nil {
		before = len(c.keyed.Calls)
	}
	n := c.expr(e)
	if c.diags.HasErrors() {
		if c.keyed != nil {
			c.keyed.Calls = c.keyed.Calls[:before]
		}
		return nil, c.diags
	}
	for _, a := range c.argProgs {
		a.errs, a.readsControl = c.errs, c.readsControl
	}
	p := &Program{root: n.eval, rng: n.rng, readsControl: c.readsControl, errs: c.errs, test: n.test, pair: n.pair, keyed: c.keyedUsed}
	for _, k := range []event.Kind{event.Number, event.String} {
		p.notBool[k] = &RuntimeError{
			Range:  n.rng,
			Detail: "filter result must be a bool, got " + k.String(),
			kind:   ErrNotBool,
		}
	}
	return p, c.diags
}

// ReadsControl reports whether p reads the control state (control.*), so
// that the agent can tell a pipeline whose control stream nothing reads.
func (p *Program) ReadsControl() bool { return p.readsControl }

// Range returns the source range of the compiled expression.
func (p *Program) Range() hcl.Range { return p.rng }

// Eval evaluates p against rec. String results alias rec's memory
// (rec.Payload/rec.Scratch) or constants; computed strings are appended to
// rec.Scratch. The result is valid until rec is reset; it must not be
// modified. A runtime error (see ErrType) yields null here; use EvalErr to
// tell it from a null result.
func (p *Program) Eval(rec *event.Record) event.Value {
	v := p.root(rec)
	if v.Kind == kindError {
		return nullValue
	}
	return v
}

// EvalErr is Eval that also reports a runtime error: a *RuntimeError
// wrapping ErrType or ErrNumberSyntax, with a null value. It does not
// allocate.
func (p *Program) EvalErr(rec *event.Record) (event.Value, error) {
	v := p.root(rec)
	if v.Kind == kindError {
		return nullValue, p.errs[int(v.Num)]
	}
	return v, nil
}

// EvalBool: for filters. A null/missing result counts as false; a non-bool,
// non-null result is an error (a reading-level error the caller
// dead-letters with reason "filter_type"): it wraps ErrNotBool. A runtime
// error inside the expression is returned as EvalErr returns it.
func (p *Program) EvalBool(rec *event.Record) (bool, error) {
	var t truth
	switch {
	case p.pair != nil:
		t = p.pair.truth(rec)
	case p.test != nil:
		t = p.test.truth(rec)
	default:
		return p.evalBool(rec)
	}
	switch t {
	case truthFalse, truthNull:
		return false, nil
	case truthTrue:
		return true, nil
	}
	return false, p.errs[int(t-truthError)]
}

func (p *Program) evalBool(rec *event.Record) (bool, error) {
	v := p.root(rec)
	switch v.Kind {
	case event.Bool:
		return v.Num != 0, nil
	case event.Missing, event.Null:
		return false, nil
	case kindError:
		return false, p.errs[int(v.Num)]
	}
	return false, p.notBool[v.Kind]
}

// AppendKey appends the key text of rec to dst: strings raw, numbers in
// the shortest form that round-trips, bools as true/false. It reports false,
// with dst unchanged, when the key is null or missing or the expression
// fails at run time (the caller dead-letters the reading as "missing_key").
func (p *Program) AppendKey(dst []byte, rec *event.Record) ([]byte, bool) {
	v := p.root(rec)
	if v.Kind == kindError || v.IsNull() {
		return dst, false
	}
	return v.AppendText(dst), true
}

// SameAs returns, for each program of progs, the index of an earlier
// identical one (the same *Program, as aggregates of one field share), or
// -1: a caller evaluates each program once per reading and copies the
// value for the others.
func SameAs(progs []*Program) []int {
	same := make([]int, len(progs))
	for i, a := range progs {
		same[i] = -1
		for j := range i {
			if a != nil && progs[j] == a {
				same[i] = j
				break
			}
		}
	}
	return same
}
