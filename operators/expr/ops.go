package expr

import (
	"math"
	"slices"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// binOp is a binary operator, resolved once at compile time.
type binOp uint8

const (
	opInvalid binOp = iota
	opAdd
	opSub
	opMul
	opDiv
	opMod
	opLT
	opLE
	opGT
	opGE
	opEQ
	opNE
	opAnd
	opOr
)

var binOps = map[*hclsyntax.Operation]binOp{
	hclsyntax.OpAdd:                opAdd,
	hclsyntax.OpSubtract:           opSub,
	hclsyntax.OpMultiply:           opMul,
	hclsyntax.OpDivide:             opDiv,
	hclsyntax.OpModulo:             opMod,
	hclsyntax.OpLessThan:           opLT,
	hclsyntax.OpLessThanOrEqual:    opLE,
	hclsyntax.OpGreaterThan:        opGT,
	hclsyntax.OpGreaterThanOrEqual: opGE,
	hclsyntax.OpEqual:              opEQ,
	hclsyntax.OpNotEqual:           opNE,
	hclsyntax.OpLogicalAnd:         opAnd,
	hclsyntax.OpLogicalOr:          opOr,
}

var binOpSymbols = [...]string{
	opAdd: "+", opSub: "-", opMul: "*", opDiv: "/", opMod: "%",
	opLT: "<", opLE: "<=", opGT: ">", opGE: ">=", opEQ: "==", opNE: "!=",
	opAnd: "&&", opOr: "||",
}

func (c *compiler) binary(e *hclsyntax.BinaryOpExpr) node {
	op := binOps[e.Op]
	l := c.expr(e.LHS)
	r := c.expr(e.RHS)
	if op == opInvalid {
		c.unsupported(e.SrcRange, "this operator")
		return bad(e.SrcRange)
	}
	sym := binOpSymbols[op]
	var n node
	switch op {
	case opAdd, opSub, opMul, opDiv, opMod:
		n = c.arithmetic(op, sym, l, r)
	case opLT, opLE, opGT, opGE:
		n = c.ordering(op, sym, l, r)
	case opEQ, opNE:
		n = c.equality(op == opNE, l, r)
	case opAnd, opOr:
		n = c.logic(op == opOr, sym, l, r)
	}
	n.rng = e.SrcRange
	n.slot = -1
	return c.fold(n, l, r)
}

// operandErrs type-checks both operands of a binary operator that needs
// kind want and prepares their runtime errors.
func (c *compiler) operandErrs(sym string, want event.Kind, l, r node) (le, re kindErrs) {
	c.checkOperand(l, want, "left operand of "+sym)
	c.checkOperand(r, want, "right operand of "+sym)
	return c.kindErrs(l.rng, "left operand of "+sym, want), c.kindErrs(r.rng, "right operand of "+sym, want)
}

// numbersFailed decides the result of a numeric operator whose operands
// are not both numbers.
func numbersFailed(a, b event.Value, le, re *kindErrs) event.Value {
	return operandsFailed(a, b, event.Number, le, re)
}

// operandsFailed decides the result of an operator whose operands a and b
// are not both of kind want: the first operand that is an error or of the
// wrong type gives the error, else the result is null.
func operandsFailed(a, b event.Value, want event.Kind, le, re *kindErrs) event.Value {
	switch {
	case a.Kind == kindError:
		return a
	case a.Kind != want && !a.IsNull():
		return errValue(int(le[a.Kind]))
	case b.Kind == kindError:
		return b
	case b.Kind != want && !b.IsNull():
		return errValue(int(re[b.Kind]))
	}
	return nullValue
}

// arith applies op; ok is false when the result is null (division by
// zero, or not finite).
func arith(op binOp, x, y float64) (r float64, ok bool) {
	switch op {
	case opAdd:
		r = x + y
	case opSub:
		r = x - y
	case opMul:
		r = x * y
	case opDiv:
		if y == 0 {
			return 0, false
		}
		r = x / y
	default: // opMod
		if y == 0 {
			return 0, false
		}
		r = math.Mod(x, y)
	}
	return r, !math.IsNaN(r) && !math.IsInf(r, 0)
}

func (c *compiler) arithmetic(op binOp, sym string, l, r node) node {
	le, re := c.operandErrs(sym, event.Number, l, r)
	if r.isConst && r.konst.Kind == event.Number {
		// x op constant: fold into a chain, so event.temp * 9 / 5 + 32
		// is one closure call, not three.
		var ch *arithChain
		if l.chain != nil {
			ch = &arithChain{slot: l.chain.slot, base: l.chain.base, le: l.chain.le, re: l.chain.re, k0: l.chain.k0}
			ch.steps = append(slices.Clip(l.chain.steps), arithStep{op, r.konst.Num})
		} else {
			ch = &arithChain{slot: l.slot, base: l.eval, steps: []arithStep{{op, r.konst.Num}}, le: le, re: re, k0: r.konst}
		}
		return node{eval: ch.eval, typ: typeNumber, chain: ch}
	}
	lf, rf := l.eval, r.eval
	return node{eval: func(rec *event.Record) event.Value {
		a, b := lf(rec), rf(rec)
		if a.Kind == event.Number && b.Kind == event.Number {
			if x, ok := arith(op, a.Num, b.Num); ok {
				return event.NumberValue(x)
			}
			return nullValue
		}
		return numbersFailed(a, b, &le, &re)
	}, typ: typeNumber}
}

// arithChain is x op1 k1 op2 k2 ... with constant k's, evaluated in one
// call. Each step's null result ends the chain, as separate operators would.
type arithChain struct {
	slot  int    // >= 0: x is this field, read directly
	base  evalFn // else x is computed by base
	steps []arithStep
	// le, re and k0 are the first operator's operand errors and constant,
	// for an x that is not a number.
	le, re kindErrs
	k0     event.Value
}

type arithStep struct {
	op binOp
	k  float64
}

func (ch *arithChain) eval(rec *event.Record) event.Value {
	var a event.Value
	if ch.slot >= 0 {
		if ch.slot < len(rec.Fields) {
			a = rec.Fields[ch.slot]
		}
	} else {
		a = ch.base(rec)
	}
	if a.Kind != event.Number {
		return numbersFailed(a, ch.k0, &ch.le, &ch.re)
	}
	x := a.Num
	for _, st := range ch.steps {
		var ok bool
		if x, ok = arith(st.op, x, st.k); !ok {
			return nullValue
		}
	}
	return event.NumberValue(x)
}

// orderMask has bit cmp+1 set for each three-way comparison result (-1, 0,
// 1) that makes the operator true, so one closure serves all four.
func orderMask(op binOp) uint8 {
	switch op {
	case opLT:
		return 0b001
	case opLE:
		return 0b011
	case opGT:
		return 0b100
	}
	return 0b110 // opGE
}

func threeWay(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func (c *compiler) ordering(op binOp, sym string, l, r node) node {
	le, re := c.operandErrs(sym, event.Number, l, r)
	mask := orderMask(op)
	lf, rf := l.eval, r.eval
	eval := func(rec *event.Record) event.Value {
		a, b := lf(rec), rf(rec)
		if a.Kind == event.Number && b.Kind == event.Number {
			return event.BoolValue(mask&(1<<(threeWay(a.Num, b.Num)+1)) != 0)
		}
		return numbersFailed(a, b, &le, &re)
	}
	if l.slot >= 0 && r.isConst && r.konst.Kind == event.Number {
		// event.x < constant, the common filter shape.
		ft := &fieldTest{slot: l.slot, mask: mask, k: r.konst, le: le, re: re}
		return node{eval: ft.eval, typ: typeBool, test: ft}
	}
	return node{eval: eval, typ: typeBool}
}

// equalValues is == on two non-error values: null equals only null (a
// missing field counts as null), values of different kinds are unequal,
// strings compare bytes. It takes pointers because Values are 40 bytes and
// this runs per reading.
func equalValues(a, b *event.Value) bool {
	an := a.Kind == event.Missing || a.Kind == event.Null
	bn := b.Kind == event.Missing || b.Kind == event.Null
	if an || bn {
		return an && bn
	}
	if a.Kind != b.Kind {
		return false
	}
	if a.Kind == event.String {
		return string(a.Str) == string(b.Str)
	}
	return a.Num == b.Num
}

func (c *compiler) equality(negate bool, l, r node) node {
	// Put a constant on the right so the fast path below sees it.
	if l.isConst && !r.isConst {
		l, r = r, l
	}
	lf, rf := l.eval, r.eval
	eval := func(rec *event.Record) event.Value {
		a := lf(rec)
		if a.Kind == kindError {
			return a
		}
		b := rf(rec)
		if b.Kind == kindError {
			return b
		}
		return event.BoolValue(equalValues(&a, &b) != negate)
	}
	if l.slot >= 0 && r.isConst {
		// event.x == constant, the common filter shape.
		ft := &fieldTest{slot: l.slot, equality: true, negate: negate, k: r.konst}
		return node{eval: ft.eval, typ: typeBool, test: ft}
	}
	return node{eval: eval, typ: typeBool}
}

// logic compiles && and || with three-valued (Kleene) logic: false && x is
// false and true || x is true without evaluating x; otherwise a null
// operand makes the result null.
func (c *compiler) logic(or bool, sym string, l, r node) node {
	le, re := c.operandErrs(sym, event.Bool, l, r)
	// decisive is the operand value that settles the result on its own.
	decisive := 0.0
	if or {
		decisive = 1
	}
	if l.test != nil && r.test != nil {
		// event.x != null && event.x < 200: one call, with both tests
		// inline and results in registers.
		tp := &testPair{l: l.test, r: r.test, decisive: truthFalse}
		if or {
			tp.decisive = truthTrue
		}
		return node{eval: func(rec *event.Record) event.Value {
			return truthValue(tp.truth(rec))
		}, typ: typeBool, pair: tp}
	}
	lf, rf := l.eval, r.eval
	return node{eval: func(rec *event.Record) event.Value {
		a := lf(rec)
		if v, done := logicLeft(a, decisive, &le); done {
			return v
		}
		return logicRight(a, rf(rec), decisive, &re)
	}, typ: typeBool}
}

// logicLeft reports whether the left operand a of && or || settles the
// result on its own (decisive is false for &&, true for ||), and the result.
func logicLeft(a event.Value, decisive float64, le *kindErrs) (event.Value, bool) {
	switch a.Kind {
	case event.Bool:
		return a, a.Num == decisive
	case event.Missing, event.Null:
		return nullValue, false
	case kindError:
		return a, true
	}
	return errValue(int(le[a.Kind])), true
}

// logicRight combines the left operand a, which did not settle the result,
// with the right operand b.
func logicRight(a, b event.Value, decisive float64, re *kindErrs) event.Value {
	switch b.Kind {
	case event.Bool:
		if b.Num == decisive || a.Kind == event.Bool {
			return b
		}
		return nullValue
	case event.Missing, event.Null:
		return nullValue
	case kindError:
		return b
	}
	return errValue(int(re[b.Kind]))
}

func (c *compiler) unary(e *hclsyntax.UnaryOpExpr) node {
	v := c.expr(e.Val)
	f := v.eval
	n := node{rng: e.SrcRange, slot: -1}
	switch e.Op {
	case hclsyntax.OpNegate:
		c.checkOperand(v, event.Number, "operand of -")
		errs := c.kindErrs(v.rng, "operand of -", event.Number)
		n.typ = typeNumber
		n.eval = func(rec *event.Record) event.Value {
			a := f(rec)
			switch a.Kind {
			case event.Number:
				return event.NumberValue(-a.Num)
			case event.Missing, event.Null:
				return nullValue
			case kindError:
				return a
			}
			return errValue(int(errs[a.Kind]))
		}
	case hclsyntax.OpLogicalNot:
		c.checkOperand(v, event.Bool, "operand of !")
		errs := c.kindErrs(v.rng, "operand of !", event.Bool)
		n.typ = typeBool
		n.eval = func(rec *event.Record) event.Value {
			a := f(rec)
			switch a.Kind {
			case event.Bool:
				return event.BoolValue(a.Num == 0)
			case event.Missing, event.Null:
				return nullValue
			case kindError:
				return a
			}
			return errValue(int(errs[a.Kind]))
		}
	default:
		c.unsupported(e.SrcRange, "this operator")
		return bad(e.SrcRange)
	}
	return c.fold(n, v)
}

// truth is a bool-or-null result that fits in a register: truthFalse,
// truthTrue, truthNull, or truthError plus the index of a runtime error.
type truth int32

const (
	truthFalse truth = iota
	truthTrue
	truthNull
	truthError
)

func truthOf(b bool) truth {
	if b {
		return truthTrue
	}
	return truthFalse
}

func truthValue(t truth) event.Value {
	switch t {
	case truthFalse:
		return falseValue
	case truthTrue:
		return trueValue
	case truthNull:
		return nullValue
	}
	return errValue(int(t - truthError))
}

// fieldTest is a comparison of an event field with a constant, the shape
// of most filters. Parents that know it call truth directly.
type fieldTest struct {
	slot     int
	equality bool  // == or != (else an ordering)
	negate   bool  // != (with equality)
	mask     uint8 // orderMask (an ordering)
	k        event.Value
	le, re   kindErrs // an ordering's operand errors
}

func (t *fieldTest) truth(rec *event.Record) truth {
	a := &missingValue
	if t.slot < len(rec.Fields) {
		a = &rec.Fields[t.slot]
	}
	if t.equality {
		return truthOf(equalValues(a, &t.k) != t.negate)
	}
	switch a.Kind {
	case event.Number:
		return truthOf(t.mask&(1<<(threeWay(a.Num, t.k.Num)+1)) != 0)
	case event.Missing, event.Null:
		return truthNull
	}
	return truthError + truth(t.le[a.Kind])
}

func (t *fieldTest) eval(rec *event.Record) event.Value { return truthValue(t.truth(rec)) }

// missingValue is read, never written, for fields past the record's end.
var missingValue event.Value

// testPair is fieldTest && fieldTest (or ||), with the same three-valued
// logic as logicLeft and logicRight. The operands are bools or null, never
// of a wrong type.
type testPair struct {
	l, r     *fieldTest
	decisive truth // truthFalse for &&, truthTrue for ||
}

func (tp *testPair) truth(rec *event.Record) truth {
	a := tp.l.truth(rec)
	if a == tp.decisive || a >= truthError {
		return a
	}
	b := tp.r.truth(rec)
	if b == tp.decisive || b >= truthError {
		return b
	}
	if a == truthNull || b == truthNull {
		return truthNull
	}
	return b
}
