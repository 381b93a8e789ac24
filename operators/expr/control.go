package expr

import (
	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// rootControl names the control state (package control).
const rootControl = "control"

// controlStep is one step of a control path: a constant key, or a key
// computed per reading (control.threshold[event.device]).
type controlStep struct {
	name string
	key  evalFn // nil for a constant key
	// boolErr is the error index for a key that is a bool at run time.
	boolErr int
}

// isControlRef reports whether e reads the control state: control.a,
// control.a[x], control.a[x].b and so on.
func isControlRef(e hclsyntax.Expression) bool {
	for {
		switch x := e.(type) {
		case *hclsyntax.IndexExpr:
			e = x.Collection
		case *hclsyntax.RelativeTraversalExpr:
			e = x.Source
		case *hclsyntax.ScopeTraversalExpr:
			return x.Traversal.RootName() == rootControl
		default:
			return false
		}
	}
}

// controlRef compiles a control reference (isControlRef) into a read of
// the control state at evaluation time. Without a control state it is
// the diagnostic Compile always gave.
func (c *compiler) controlRef(e hclsyntax.Expression) node {
	rng := e.Range()
	if c.control == nil && c.capture == nil {
		c.errorf(rootRange(e), "Unsupported variable",
			"control.* is not supported in expressions yet; only event fields can be read.")
		return bad(rng)
	}
	steps, ok := c.controlSteps(e, nil)
	if !ok {
		return bad(rng)
	}
	if len(steps) == 0 {
		c.errorf(rng, "Missing control value name",
			"control is the whole control state; name one of its values, as in control.threshold or control.threshold[event.device].")
		return bad(rng)
	}
	if c.capture != nil {
		return c.captureRef(e, steps)
	}
	c.readsControl = true
	n := node{typ: typeAny, rng: rng, slot: -1, control: true}
	st := c.control
	if static := staticPath(steps); static != nil {
		n.eval = func(*event.Record) event.Value { return st.Lookup(static) }
		return n
	}
	r := &controlRead{state: st, steps: steps}
	for r.prefix < len(steps) && steps[r.prefix].key == nil {
		r.prefix++
	}
	n.eval = r.eval
	return n
}

// rootRange returns the range of the root name of a control reference.
func rootRange(e hclsyntax.Expression) hcl.Range {
	for {
		switch x := e.(type) {
		case *hclsyntax.IndexExpr:
			e = x.Collection
		case *hclsyntax.RelativeTraversalExpr:
			e = x.Source
		case *hclsyntax.ScopeTraversalExpr:
			return x.Traversal[0].SourceRange()
		default:
			return e.Range()
		}
	}
}

// staticPath returns the keys of steps when none is computed, else nil.
func staticPath(steps []controlStep) []string {
	path := make([]string, 0, len(steps))
	for _, s := range steps {
		if s.key != nil {
			return nil
		}
		path = append(path, s.name)
	}
	return path
}

// controlSteps appends the steps of the control reference e to steps.
// It compiles every index expression even after an error, so one pass
// reports every diagnostic.
func (c *compiler) controlSteps(e hclsyntax.Expression, steps []controlStep) ([]controlStep, bool) {
	switch e := e.(type) {
	case *hclsyntax.ScopeTraversalExpr:
		return c.traversalSteps(e.Traversal[1:], steps)
	case *hclsyntax.RelativeTraversalExpr:
		steps, ok := c.controlSteps(e.Source, steps)
		if !ok {
			return nil, false
		}
		return c.traversalSteps(e.Traversal, steps)
	case *hclsyntax.IndexExpr:
		steps, ok := c.controlSteps(e.Collection, steps)
		k := c.expr(e.Key)
		step, kok := c.indexStep(k)
		if !ok || !kok {
			return nil, false
		}
		return append(steps, step), true
	}
	// isControlRef admits nothing else.
	c.errorf(e.Range(), "Unsupported expression", "Eddy expressions do not support this control reference.")
	return nil, false
}

// indexStep turns a compiled index expression into a step: a constant
// when it is one, else a key computed per reading.
func (c *compiler) indexStep(k node) (controlStep, bool) {
	const detail = "A control key must be a string or a number, as in control.threshold[event.device]; got a %s."
	if k.isConst {
		switch k.konst.Kind {
		case event.String, event.Number:
			return controlStep{name: string(k.konst.AppendText(nil))}, true
		}
		c.errorf(k.rng, "Invalid control key", detail, k.typ)
		return controlStep{}, false
	}
	if k.typ == typeBool {
		c.errorf(k.rng, "Invalid control key", detail, k.typ)
		return controlStep{}, false
	}
	return controlStep{
		key:     k.eval,
		boolErr: c.runtimeErr(k.rng, ErrType, "control key must be a string or a number, got bool"),
	}, true
}

// traversalSteps appends the constant steps .name and ["name"] (or [3],
// which is the key "3", as a number computed per reading would be).
func (c *compiler) traversalSteps(t hcl.Traversal, steps []controlStep) ([]controlStep, bool) {
	for _, step := range t {
		switch step := step.(type) {
		case hcl.TraverseAttr:
			steps = append(steps, controlStep{name: step.Name})
		case hcl.TraverseIndex:
			k := step.Key
			switch {
			case k.IsNull() || !k.IsKnown():
			case k.Type() == cty.String:
				steps = append(steps, controlStep{name: k.AsString()})
				continue
			case k.Type() == cty.Number:
				f, _ := k.AsBigFloat().Float64()
				steps = append(steps, controlStep{name: string(event.NumberValue(f).AppendText(nil))})
				continue
			}
			c.errorf(step.SrcRange, "Invalid control key",
				`A control key must be a string or a number, as in control["name"] or control.offset[3].`)
			return nil, false
		default:
			c.errorf(step.SourceRange(), "Unsupported expression", "Eddy expressions do not support splats.")
			return nil, false
		}
	}
	return steps, true
}

// controlRead reads the control state along steps with computed keys.
//
// It caches the node its constant prefix leads to (control.threshold in
// control.threshold[event.device]) until the state's Version moves. That
// is per-call state, which is why a Program reading control is bound to
// its State's goroutine, as the State itself is.
type controlRead struct {
	state  *control.State
	steps  []controlStep
	prefix int // steps[:prefix] are constant keys
	// base is the node steps[:prefix] lead to, valid while baseOK and
	// the state is at baseVersion.
	base        control.Node
	baseVersion uint64
	baseOK      bool
}

// eval walks the state. A null key makes the result missing; every key is
// still evaluated, left to right, so a reading's type error does not hide
// behind the control state's content.
func (r *controlRead) eval(rec *event.Record) event.Value {
	if v := r.state.Version(); !r.baseOK || r.baseVersion != v {
		n := r.state.Root()
		for _, s := range r.steps[:r.prefix] {
			n = n.Field(s.name)
		}
		r.base, r.baseVersion, r.baseOK = n, v, true
	}
	n := r.base
	for i := r.prefix; i < len(r.steps); i++ {
		s := &r.steps[i]
		if s.key == nil {
			n = n.Field(s.name)
			continue
		}
		k := s.key(rec)
		switch k.Kind {
		case event.String:
			n = n.FieldBytes(k.Str)
		case event.Number:
			// Written as key-by writes it, in Scratch, which is given
			// back at once: the lookup's result does not alias it.
			start := len(rec.Scratch)
			rec.Scratch = k.AppendText(rec.Scratch)
			n = n.FieldBytes(rec.Scratch[start:])
			rec.Scratch = rec.Scratch[:start]
		case event.Missing, event.Null:
			n = control.Node{}
		case kindError:
			return k
		default:
			return errValue(s.boolErr)
		}
	}
	return n.Value()
}
