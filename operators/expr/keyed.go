package expr

import (
	"fmt"
	"strconv"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// KeyedFunc names a per-key function: one whose result depends on the
// earlier readings of the reading's key (package operators/keyed keeps that
// state and computes the results).
type KeyedFunc uint8

const (
	_         KeyedFunc = iota
	Prev                // prev(x): x of the key's previous reading; null at first
	Changed             // changed(x): x differs from the previous reading's; true at first
	Delta               // delta(x): x − prev(x); a decrease (counter reset) gives x; null at first
	Since               // since(x): ms since x took its current value
	FirstSeen           // first_seen(): time of the key's first reading, ms
	CountKey            // count_key(): the key's readings so far, this one included
)

// keyedFuncs maps the names of the per-key functions to their kinds, the
// kind their argument needs (anyKind: any; 0: no argument) and the static
// type of their result.
var keyedFuncs = map[string]struct {
	fn     KeyedFunc
	param  event.Kind
	hasArg bool
	result staticType
}{
	"prev":       {Prev, anyKind, true, typeAny},
	"changed":    {Changed, anyKind, true, typeBool},
	"delta":      {Delta, event.Number, true, typeNumber},
	"since":      {Since, anyKind, true, typeNumber},
	"first_seen": {FirstSeen, 0, false, typeNumber},
	"count_key":  {CountKey, 0, false, typeNumber},
}

// String is the function's name in expressions ("delta").
func (f KeyedFunc) String() string {
	for name, k := range keyedFuncs {
		if k.fn == f {
			return name
		}
	}
	return "KeyedFunc(" + strconv.Itoa(int(f)) + ")"
}

// KeyedCall is one call of a per-key function in a pipeline's expressions.
type KeyedCall struct {
	Func KeyedFunc
	// Arg is the compiled argument; nil for first_seen and count_key.
	Arg   *Program
	Range hcl.Range
}

// KeyedCalls collects the per-key function calls of one pipeline's
// expressions, in compile order: call i's result is read from
// event.Record.Keyed[i]. Give the same KeyedCalls to every CompileWith of
// the pipeline that may use them (filter, map, aggregate arguments).
type KeyedCalls struct {
	Calls []KeyedCall
}

// keyedCall compiles a call of a per-key function: its argument becomes a
// Program of its own (the keyed operator evaluates it, then the state
// gives the result), and the call reads the result from rec.Keyed.
func (c *compiler) keyedCall(e *hclsyntax.FunctionCallExpr) node {
	kf := keyedFuncs[e.Name]
	rng := e.Range()
	if c.keyed == nil {
		c.errorf(e.NameRange, "Per-key function not allowed here",
			"%s() reads the state of the reading's key, so it can be used only in filter, map and aggregate arguments, where the key is known; not in %s.", e.Name, c.place())
		return bad(rng)
	}
	if c.inKeyedArg {
		c.errorf(e.NameRange, "Nested per-key function",
			"The argument of a per-key function cannot call another one (%s() here); compute it in a map field first.", e.Name)
		return bad(rng)
	}
	want := 0
	if kf.hasArg {
		want = 1
	}
	if len(e.Args) != want {
		c.errorf(e.Range(), "Wrong number of function arguments", "Function %q expects %d argument(s), but got %d.", e.Name, want, len(e.Args))
		return bad(rng)
	}
	call := KeyedCall{Func: kf.fn, Range: rng}
	if kf.hasArg {
		c.inKeyedArg = true
		a := c.expr(e.Args[0])
		c.inKeyedArg = false
		if kf.param != anyKind {
			c.checkOperand(a, kf.param, fmt.Sprintf("argument 1 of %s", e.Name))
		}
		call.Arg = &Program{root: a.eval, rng: a.rng}
		c.argProgs = append(c.argProgs, call.Arg)
	}
	i := len(c.keyed.Calls)
	c.keyed.Calls = append(c.keyed.Calls, call)
	c.keyedUsed = append(c.keyedUsed, i)
	return node{
		eval: func(rec *event.Record) event.Value {
			if i < len(rec.Keyed) {
				return rec.Keyed[i]
			}
			return nullValue
		},
		typ:  kf.result,
		rng:  rng,
		slot: -1,
	}
}

// place names where the expression being compiled sits, for diagnostics.
func (c *compiler) place() string {
	if c.where != "" {
		return c.where
	}
	return "this expression"
}

// KeyedCalls returns the indexes into the pipeline's KeyedCalls of the
// per-key calls p makes, in evaluation order; the keyed operator computes
// them before it evaluates p.
func (p *Program) KeyedCalls() []int { return p.keyed }

// IsKeyedFunc reports whether name is a per-key function.
func IsKeyedFunc(name string) bool { _, ok := keyedFuncs[name]; return ok }
