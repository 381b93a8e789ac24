package expr

import (
	"errors"
	"fmt"
	"math"

	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// node is a compiled sub-expression: its closure plus what the compiler
// knows about it, used to type-check parents and to pick fast paths.
type node struct {
	eval evalFn
	typ  staticType
	rng  hcl.Range
	// isConst is set when the node's value does not depend on the reading;
	// konst then holds it (strings own their bytes).
	isConst bool
	konst   event.Value
	// slot is the schema slot when the node reads an event field as it is,
	// else -1. Parents read such fields directly instead of calling eval.
	slot int
	// test is set when the node compares a field with a constant.
	test *fieldTest
	// pair is set when the node is fieldTest && (or ||) fieldTest.
	pair *testPair
	// chain is set when the node is arithmetic with constants on the right.
	chain *arithChain
	// control is set when the node reads the control state as it is.
	control bool
}

// compiler holds the state of one Compile call.
type compiler struct {
	schema *event.Schema
	// control is the state control.* reads; nil rejects control.*.
	control *control.State
	// capture, when set, makes control.* read the captured values
	// (Options.ControlCapture).
	capture      *ControlPaths
	readsControl bool
	errs         []error
	diags        hcl.Diagnostics
	// keyed collects per-key calls (nil: they are diagnostics); keyedUsed
	// are the indexes of this expression's, argProgs their arguments'
	// programs; inKeyedArg is set while compiling such an argument.
	keyed      *KeyedCalls
	keyedUsed  []int
	argProgs   []*Program
	inKeyedArg bool
	where      string
}

// kindErrs maps the kind of a bad operand to the index of its prebuilt
// RuntimeError, so reporting a type error at run time does not allocate.
type kindErrs [numKinds]int32

// kindErrs registers the errors for an operand at rng that must be of kind
// want; what names the operand, e.g. "left operand of *".
func (c *compiler) kindErrs(rng hcl.Range, what string, want event.Kind) kindErrs {
	var ke kindErrs
	for k := event.Kind(0); int(k) < numKinds; k++ {
		ke[k] = int32(c.runtimeErr(rng, ErrType, fmt.Sprintf("%s must be a %s, got %s", what, want, k)))
	}
	return ke
}

func (c *compiler) runtimeErr(rng hcl.Range, kind error, detail string) int {
	c.errs = append(c.errs, &RuntimeError{Range: rng, Detail: detail, kind: kind})
	return len(c.errs) - 1
}

func (c *compiler) errorf(subject hcl.Range, summary, format string, args ...any) {
	c.diags = append(c.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject.Ptr(),
	})
}

// bad is the node returned after a diagnostic, so compilation goes on and
// reports every error in one pass.
func bad(rng hcl.Range) node {
	return node{eval: func(*event.Record) event.Value { return nullValue }, rng: rng, slot: -1}
}

// constant returns a node that always yields v. String bytes must be owned
// by the node (not alias a record).
func constant(v event.Value, rng hcl.Range) node {
	n := node{typ: typeOfValue(v), rng: rng, isConst: true, konst: v, slot: -1}
	n.eval = func(*event.Record) event.Value { return v }
	return n
}

func typeOfValue(v event.Value) staticType {
	switch v.Kind {
	case event.Number:
		return typeNumber
	case event.String:
		return typeString
	case event.Bool:
		return typeBool
	case event.Missing, event.Null:
		return typeNull
	}
	return typeAny
}

// fold evaluates n once at compile time when all its operands are
// constants, so the per-reading closure tree only holds work that depends
// on the reading. A runtime error found this way becomes a diagnostic.
func (c *compiler) fold(n node, operands ...node) node {
	for _, o := range operands {
		if !o.isConst {
			return n
		}
	}
	var rec event.Record
	v := n.eval(&rec)
	if v.Kind == kindError {
		re := c.errs[int(v.Num)].(*RuntimeError)
		// Type errors of constants were reported by the static checks.
		if !errors.Is(re, ErrType) || !c.diags.HasErrors() {
			c.errorf(re.Range, "Invalid expression value", "%s.", re.Detail)
		}
		return bad(n.rng)
	}
	if v.Kind == event.String {
		v.Str = append([]byte(nil), v.Str...)
	}
	return constant(v, n.rng)
}

// expr compiles one expression node.
func (c *compiler) expr(e hcl.Expression) node {
	switch e := e.(type) {
	case *hclsyntax.LiteralValueExpr:
		return c.literal(e.Val, e.SrcRange)
	case *hclsyntax.ParenthesesExpr:
		n := c.expr(e.Expression)
		n.rng = e.SrcRange
		return n
	case *hclsyntax.ScopeTraversalExpr:
		return c.traversal(e)
	case *hclsyntax.BinaryOpExpr:
		return c.binary(e)
	case *hclsyntax.UnaryOpExpr:
		return c.unary(e)
	case *hclsyntax.ConditionalExpr:
		return c.conditional(e)
	case *hclsyntax.TemplateExpr:
		return c.template(e)
	case *hclsyntax.TemplateWrapExpr:
		// "${x}" is x itself, as in HCL.
		n := c.expr(e.Wrapped)
		n.rng = e.SrcRange
		return n
	case *hclsyntax.FunctionCallExpr:
		return c.call(e)
	case *hclsyntax.ForExpr:
		c.unsupported(e.SrcRange, "for expressions")
	case *hclsyntax.SplatExpr:
		c.unsupported(e.SrcRange, "splat expressions")
	case *hclsyntax.TupleConsExpr:
		c.unsupported(e.SrcRange, "lists")
	case *hclsyntax.ObjectConsExpr:
		c.unsupported(e.SrcRange, "objects")
	case *hclsyntax.IndexExpr:
		if isControlRef(e) {
			return c.controlRef(e)
		}
		c.errorf(e.SrcRange, "Unsupported expression",
			`Only event fields can be indexed, and only with a constant string, as in event["name"].`)
	case *hclsyntax.RelativeTraversalExpr:
		if isControlRef(e) {
			return c.controlRef(e)
		}
		c.errorf(e.SrcRange, "Unsupported expression",
			"Attributes can be read only from event, as in event.name.")
	case *hclsyntax.TemplateJoinExpr:
		c.unsupported(e.Range(), "template for directives")
	case *hclsyntax.ExprSyntaxError:
		// The parser reported the details; the program must still fail.
		c.errorf(e.SrcRange, "Invalid expression", "The expression has syntax errors.")
	case nil:
		c.errorf(hcl.Range{}, "Missing expression", "An expression is required.")
		return bad(hcl.Range{})
	default:
		if _, ok := e.(hclsyntax.Expression); ok {
			c.unsupported(e.Range(), fmt.Sprintf("%T expressions", e))
		} else {
			c.errorf(e.Range(), "Unsupported expression",
				"Eddy compiles only native HCL syntax expressions, not JSON ones.")
		}
	}
	return bad(e.Range())
}

func (c *compiler) unsupported(rng hcl.Range, what string) {
	c.errorf(rng, "Unsupported expression", "Eddy expressions do not support %s.", what)
}

// literal converts an HCL constant into a node.
func (c *compiler) literal(v cty.Value, rng hcl.Range) node {
	switch {
	case v.IsNull():
		return constant(nullValue, rng)
	case !v.IsKnown():
		c.errorf(rng, "Invalid literal", "The value is not known.")
	case v.Type() == cty.Number:
		f, _ := v.AsBigFloat().Float64()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			c.errorf(rng, "Number out of range", "Numbers are 64-bit floats; this one does not fit.")
			return bad(rng)
		}
		return constant(event.NumberValue(f), rng)
	case v.Type() == cty.String:
		return constant(event.StringValue([]byte(v.AsString())), rng)
	case v.Type() == cty.Bool:
		return constant(event.BoolValue(v.True()), rng)
	default:
		c.errorf(rng, "Invalid literal", "Literals of type %s are not supported.", v.Type().FriendlyName())
	}
	return bad(rng)
}

// conditional compiles cond ? a : b. Only the chosen branch is evaluated.
func (c *compiler) conditional(e *hclsyntax.ConditionalExpr) node {
	cond := c.expr(e.Condition)
	a := c.expr(e.TrueResult)
	b := c.expr(e.FalseResult)
	c.checkOperand(cond, event.Bool, "condition")
	condErrs := c.kindErrs(cond.rng, "condition", event.Bool)
	cf, af, bf := cond.eval, a.eval, b.eval
	n := node{typ: join(a.typ, b.typ), rng: e.SrcRange, slot: -1}
	n.eval = func(rec *event.Record) event.Value {
		v := cf(rec)
		switch v.Kind {
		case event.Bool:
			if v.Num != 0 {
				return af(rec)
			}
			return bf(rec)
		case event.Missing, event.Null:
			return nullValue
		case kindError:
			return v
		}
		return errValue(int(condErrs[v.Kind]))
	}
	if cond.isConst {
		// Fold the condition only; the chosen branch keeps its own speed.
		if v := cond.konst; v.Kind == event.Bool {
			if v.Num != 0 {
				a.rng = e.SrcRange
				return a
			}
			b.rng = e.SrcRange
			return b
		}
		return c.fold(n, cond)
	}
	return n
}

// checkOperand reports a diagnostic when n can never be of kind want.
func (c *compiler) checkOperand(n node, want event.Kind, what string) {
	if !n.typ.accepts(want) {
		c.errorf(n.rng, "Invalid operand", "Unsuitable value for %s: a %s is required, got a %s.", what, want, n.typ)
	}
}
