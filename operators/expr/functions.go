package expr

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// anyKind marks a parameter that takes a value of any kind.
const anyKind = event.Missing

// function describes one built-in function.
type function struct {
	// params is the kind each parameter needs (anyKind: any). With
	// variadic set, the last one repeats and may appear zero or more times
	// beyond the first.
	params   []event.Kind
	variadic bool
	result   staticType
	// build returns the closure. args are the compiled arguments and errs
	// their prebuilt type errors, one per argument.
	build func(c *compiler, args []node, errs []kindErrs) evalFn
}

var functions = map[string]function{
	"abs":        numberFunc(math.Abs),
	"ceil":       numberFunc(math.Ceil),
	"floor":      numberFunc(math.Floor),
	"round":      numberFunc(math.Round),
	"sqrt":       numberFunc(math.Sqrt),
	"pow":        {params: []event.Kind{event.Number, event.Number}, result: typeNumber, build: buildPow},
	"min":        {params: []event.Kind{event.Number}, variadic: true, result: typeNumber, build: buildExtremum(false)},
	"max":        {params: []event.Kind{event.Number}, variadic: true, result: typeNumber, build: buildExtremum(true)},
	"lower":      {params: []event.Kind{event.String}, result: typeString, build: buildCase(unicode.ToLower)},
	"upper":      {params: []event.Kind{event.String}, result: typeString, build: buildCase(unicode.ToUpper)},
	"len":        {params: []event.Kind{event.String}, result: typeNumber, build: buildLen},
	"contains":   stringTestFunc(bytes.Contains),
	"startswith": stringTestFunc(bytes.HasPrefix),
	"endswith":   stringTestFunc(bytes.HasSuffix),
	"coalesce":   {params: []event.Kind{anyKind}, variadic: true, build: buildCoalesce},
	"has":        {params: []event.Kind{anyKind}, result: typeBool, build: buildHas},
	"tonumber":   {params: []event.Kind{anyKind}, result: typeNumber, build: buildToNumber},
	"tostring":   {params: []event.Kind{anyKind}, result: typeString, build: buildToString},
}

// functionNames lists the built-ins for diagnostics.
var functionNames = func() []string {
	names := make([]string, 0, len(functions))
	for name := range functions {
		names = append(names, name)
	}
	for name := range keyedFuncs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}()

// call compiles a function call: arity and argument kinds are checked
// here; arguments of unknown kind are checked per reading.
func (c *compiler) call(e *hclsyntax.FunctionCallExpr) node {
	if IsKeyedFunc(e.Name) {
		return c.keyedCall(e)
	}
	fn, ok := functions[e.Name]
	if !ok {
		detail := fmt.Sprintf("There is no function named %q.", e.Name)
		if s := nameSuggestion(e.Name, functionNames); s != "" {
			detail += fmt.Sprintf(" Did you mean %q?", s)
		}
		detail += " Known functions: " + strings.Join(functionNames, ", ") + "."
		c.errorf(e.NameRange, "Call to unknown function", "%s", detail)
		return bad(e.Range())
	}
	if e.ExpandFinal {
		c.errorf(e.Args[len(e.Args)-1].Range(), "Unsupported expression",
			"Eddy expressions have no lists, so arguments cannot be expanded with ....")
		return bad(e.Range())
	}
	nParams := len(fn.params)
	switch {
	case len(e.Args) < nParams:
		c.errorf(e.CloseParenRange, "Not enough function arguments",
			"Function %q expects %s, but got %d.", e.Name, arity(fn), len(e.Args))
		return bad(e.Range())
	case len(e.Args) > nParams && !fn.variadic:
		c.errorf(e.Args[nParams].Range(), "Too many function arguments",
			"Function %q expects %s, but got %d.", e.Name, arity(fn), len(e.Args))
		return bad(e.Range())
	}
	args := make([]node, len(e.Args))
	errs := make([]kindErrs, len(e.Args))
	for i, ae := range e.Args {
		args[i] = c.expr(ae)
		want := fn.params[min(i, nParams-1)]
		if want == anyKind {
			continue
		}
		what := fmt.Sprintf("argument %d of %s", i+1, e.Name)
		c.checkOperand(args[i], want, what)
		errs[i] = c.kindErrs(args[i].rng, what, want)
	}
	n := node{eval: fn.build(c, args, errs), typ: fn.result, rng: e.Range(), slot: -1}
	if e.Name == "coalesce" {
		n.typ = args[0].typ
		for _, a := range args[1:] {
			n.typ = join(n.typ, a.typ)
		}
	}
	if n.eval == nil { // the builder reported a diagnostic
		return bad(e.Range())
	}
	if e.Name == "has" {
		return n // reads the reading even though it looks constant
	}
	return c.fold(n, args...)
}

func arity(fn function) string {
	n := len(fn.params)
	switch {
	case fn.variadic:
		return fmt.Sprintf("at least %d argument(s)", n)
	case n == 1:
		return "1 argument"
	}
	return fmt.Sprintf("%d arguments", n)
}

// argFailed is the result of a call whose argument a is not of the kind it
// needs: the error it carries, null, or a type error.
func argFailed(a event.Value, errs *kindErrs) event.Value {
	switch a.Kind {
	case kindError:
		return a
	case event.Missing, event.Null:
		return nullValue
	}
	return errValue(int(errs[a.Kind]))
}

// numberFunc is a function of one number; null gives null.
func numberFunc(f func(float64) float64) function {
	return function{
		params: []event.Kind{event.Number},
		result: typeNumber,
		build: func(_ *compiler, args []node, errs []kindErrs) evalFn {
			x, xe := args[0].eval, errs[0]
			return func(rec *event.Record) event.Value {
				a := x(rec)
				if a.Kind == event.Number {
					return numberResult(f(a.Num))
				}
				return argFailed(a, &xe)
			}
		},
	}
}

func buildPow(_ *compiler, args []node, errs []kindErrs) evalFn {
	x, y := args[0].eval, args[1].eval
	xe, ye := errs[0], errs[1]
	return func(rec *event.Record) event.Value {
		a, b := x(rec), y(rec)
		if a.Kind == event.Number && b.Kind == event.Number {
			return numberResult(math.Pow(a.Num, b.Num))
		}
		return numbersFailed(a, b, &xe, &ye)
	}
}

// buildExtremum builds max (greater) or min. Any null argument makes the
// result null; errors and wrong types are reported left to right.
func buildExtremum(greater bool) func(*compiler, []node, []kindErrs) evalFn {
	return func(_ *compiler, args []node, errs []kindErrs) evalFn {
		fns := make([]evalFn, len(args))
		for i, a := range args {
			fns[i] = a.eval
		}
		return func(rec *event.Record) event.Value {
			best, sawNull := 0.0, false
			for i, f := range fns {
				a := f(rec)
				if a.Kind != event.Number {
					if a.IsNull() {
						sawNull = true
						continue
					}
					return argFailed(a, &errs[i])
				}
				if i == 0 || (greater && a.Num > best) || (!greater && a.Num < best) {
					best = a.Num
				}
			}
			if sawNull {
				return nullValue
			}
			return event.NumberValue(best)
		}
	}
}

// buildCase builds lower and upper, mapping each rune as strings.ToLower
// and strings.ToUpper do (invalid UTF-8 becomes U+FFFD). A string the
// mapping does not change is returned as it is, without copying.
func buildCase(mapRune func(rune) rune) func(*compiler, []node, []kindErrs) evalFn {
	return func(_ *compiler, args []node, errs []kindErrs) evalFn {
		x, xe := args[0].eval, errs[0]
		return func(rec *event.Record) event.Value {
			a := x(rec)
			if a.Kind != event.String {
				return argFailed(a, &xe)
			}
			if !changesCase(a.Str, mapRune) {
				return a
			}
			start := len(rec.Scratch)
			for s := a.Str; len(s) > 0; {
				r, size := utf8.DecodeRune(s)
				rec.Scratch = utf8.AppendRune(rec.Scratch, mapRune(r))
				s = s[size:]
			}
			end := len(rec.Scratch)
			return event.StringValue(rec.Scratch[start:end:end])
		}
	}
}

func changesCase(s []byte, mapRune func(rune) rune) bool {
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		if r == utf8.RuneError || mapRune(r) != r {
			return true
		}
		s = s[size:]
	}
	return false
}

// buildLen counts Unicode code points (not bytes, not grapheme clusters).
func buildLen(_ *compiler, args []node, errs []kindErrs) evalFn {
	x, xe := args[0].eval, errs[0]
	return func(rec *event.Record) event.Value {
		a := x(rec)
		if a.Kind != event.String {
			return argFailed(a, &xe)
		}
		return event.NumberValue(float64(utf8.RuneCount(a.Str)))
	}
}

// stringTestFunc is a predicate on two strings (haystack, needle).
func stringTestFunc(test func(s, sub []byte) bool) function {
	return function{
		params: []event.Kind{event.String, event.String},
		result: typeBool,
		build: func(_ *compiler, args []node, errs []kindErrs) evalFn {
			x, y := args[0].eval, args[1].eval
			xe, ye := errs[0], errs[1]
			return func(rec *event.Record) event.Value {
				a, b := x(rec), y(rec)
				if a.Kind == event.String && b.Kind == event.String {
					return event.BoolValue(test(a.Str, b.Str))
				}
				return operandsFailed(a, b, event.String, &xe, &ye)
			}
		},
	}
}

// buildCoalesce returns the first argument that is not null, evaluating
// no further; an error before it is returned as it is.
func buildCoalesce(_ *compiler, args []node, _ []kindErrs) evalFn {
	fns := make([]evalFn, len(args))
	for i, a := range args {
		fns[i] = a.eval
	}
	return func(rec *event.Record) event.Value {
		for _, f := range fns {
			if v := f(rec); !v.IsNull() {
				return v
			}
		}
		return nullValue
	}
}

// buildHas tests a field for presence: has(event.x) is true when the
// reading has x and it is not null; has(control.x) likewise for a value of
// the control state (an error in a computed key stays an error).
func buildHas(c *compiler, args []node, _ []kindErrs) evalFn {
	if args[0].control {
		f := args[0].eval
		return func(rec *event.Record) event.Value {
			v := f(rec)
			if v.Kind == kindError {
				return v
			}
			return event.BoolValue(!v.IsNull())
		}
	}
	slot := args[0].slot
	if slot < 0 {
		c.errorf(args[0].rng, "Invalid function argument",
			"has takes an event field, as in has(event.temp), or a control value, as in has(control.threshold[event.device]).")
		return nil
	}
	return func(rec *event.Record) event.Value {
		return event.BoolValue(slot < len(rec.Fields) && !rec.Fields[slot].IsNull())
	}
}

// buildToNumber converts a decimal string (as JSON writes numbers) to a
// number; numbers pass through; bools are a type error.
func buildToNumber(c *compiler, args []node, _ []kindErrs) evalFn {
	x := args[0]
	if x.typ == typeBool {
		c.errorf(x.rng, "Invalid function argument", "tonumber cannot convert a bool.")
		return nil
	}
	boolErr := c.runtimeErr(x.rng, ErrType, "argument 1 of tonumber must be a number or string, got bool")
	syntaxErr := c.runtimeErr(x.rng, ErrNumberSyntax, "argument 1 of tonumber is not a decimal number")
	f := x.eval
	return func(rec *event.Record) event.Value {
		a := f(rec)
		switch a.Kind {
		case event.Number, kindError:
			return a
		case event.String:
			if !isDecimal(a.Str) {
				return errValue(syntaxErr)
			}
			v, err := strconv.ParseFloat(string(a.Str), 64)
			if err != nil { // out of range
				return errValue(syntaxErr)
			}
			return event.NumberValue(v)
		case event.Bool:
			return errValue(boolErr)
		}
		return nullValue
	}
}

// isDecimal reports whether s is [+-]digits[.digits][(e|E)[+-]digits],
// with digits on at least one side of the point. It rules out what
// strconv.ParseFloat accepts beyond that: inf, nan, hex, underscores.
func isDecimal(s []byte) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i, exp = i+1, exp+1
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

var (
	trueText  = []byte("true")
	falseText = []byte("false")
)

// buildToString converts numbers (shortest round-trip form, into
// rec.Scratch) and bools to strings; strings pass through.
func buildToString(_ *compiler, args []node, _ []kindErrs) evalFn {
	f := args[0].eval
	return func(rec *event.Record) event.Value {
		a := f(rec)
		switch a.Kind {
		case event.String, kindError:
			return a
		case event.Number:
			start := len(rec.Scratch)
			rec.Scratch = a.AppendText(rec.Scratch)
			end := len(rec.Scratch)
			return event.StringValue(rec.Scratch[start:end:end])
		case event.Bool:
			if a.Num != 0 {
				return event.StringValue(trueText[:len(trueText):len(trueText)])
			}
			return event.StringValue(falseText[:len(falseText):len(falseText)])
		}
		return nullValue
	}
}
