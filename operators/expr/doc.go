// Package expr compiles the HCL expressions of a pipeline (filter, key, map
// and aggregate arguments) into trees of Go closures over *event.Record.
//
// # Life cycle
//
// While a pipeline is built, Compile turns each hcl.Expression into a
// Program once, registering every field it reads in the pipeline's
// event.Schema, so the decoders fill those slots. Per reading, the agent
// calls Eval (map, aggregate arguments), EvalBool (filter) or AppendKey
// (key by). These never allocate once rec.Scratch has grown to the
// largest string a reading needs: strings alias the record's memory or the
// program's constants, and computed strings are appended to rec.Scratch,
// which Record.Reset empties while keeping its capacity. A Program holds no
// per-call state, so one Program may serve many goroutines, each with its
// own records; one that reads control.* is bound to its State's goroutine.
//
// # Language
//
// Expressions are HCL native syntax (hclsyntax) restricted to:
//
//   - literals: numbers, "strings", true, false, null;
//   - event fields: event.a.b.c, or event["a"]["b"] for names that are not
//     identifiers;
//   - control values, when the pipeline has a control stream (see Control
//     state below): control.a.b, control["a"], control.a[expr];
//   - arithmetic + - * / % and unary -, on numbers (float64);
//   - comparison < <= > >= on numbers, == and != on any values;
//   - logic && || !, and cond ? a : b;
//   - templates "${event.site}-${event.device}", including %{if} directives;
//   - functions abs, ceil, floor, round (half away from zero), sqrt,
//     pow(x, y), min(x, ...), max(x, ...), lower, upper, len (Unicode code
//     points), contains(s, sub), startswith(s, prefix), endswith(s, suffix),
//     coalesce(a, ...), has(event.x), has(control.x), tonumber,
//     tostring;
//   - with Options.Keyed, the per-key functions prev(x), changed(x),
//     delta(x), since(x), first_seen() and count_key() (see Per-key
//     functions below).
//
// Anything else (other variables, unknown functions, wrong arity, lists,
// objects, for expressions, splats, indexes other than event["name"] and
// control keys) is a compile-time
// diagnostic whose Subject is the offending part, with a "Did you mean"
// hint for near-miss names and the list of functions for unknown ones.
// Operands whose type is known at compile time are type-checked then
// ("a" * 2 is a diagnostic), and constant sub-expressions are computed once.
//
// # Control state
//
// CompileWith with Options.Control lets expressions read the pipeline's
// control state (package control): a JSON document the cloud updates by
// sending merge messages on a control stream, such as per-device
// thresholds or calibration offsets:
//
//	filter = event.temp > control.threshold[event.device]
//	map { temp = event.temp + coalesce(control.offset[event.device], 0) }
//
// A control reference is control followed by keys: constant ones
// (.name, ["name"], or [3], the key "3") and computed ones ([expr], with
// expr any expression giving a string, or a number, which is written as
// key-by writes it: 3, 21.5). control.cal[event.device].gain mixes both.
// Reading a missing value, or through a leaf, or with a null key, gives a
// missing value, so the null rules below apply: with no threshold for
// the device, event.temp > control.threshold[event.device] is null and
// the filter drops the reading. Write a default with coalesce, as in
// event.temp > coalesce(control.threshold[event.device], 30), and test
// presence with has(control.threshold[event.device]). Values are read as
// the JSON decoder reads fields: numbers, strings and bools as they are,
// arrays and objects as their JSON text.
//
// The state is read at each evaluation, never at compile time: a reading
// evaluated after State.Apply sees the new values. Such a Program must be
// evaluated on the goroutine that owns the State (the pipeline's prepare
// stage); ReadsControl tells the programs that read it. Reading the state
// does not allocate; a computed key that is a bool is a runtime ErrType.
// control alone, splats, and bool or null constant keys are compile-time
// diagnostics; without Options.Control every control reference is one.
//
// A program evaluated away from the State (a keyed pipeline's, after its
// event-time buffer) is compiled with Options.ControlCapture instead: its
// control references must be constant paths, which a ControlPaths
// collects; the prepare stage captures their values per reading
// (AppendCapture) and the program reads them from Record.Control
// (Decode), so it sees the values in force when the reading arrived.
//
// # Per-key functions
//
// A per-key function's result depends on the key's earlier readings, which
// a Program cannot see: CompileWith with Options.Keyed compiles each call
// into a slot of the pipeline's KeyedCalls (its argument becomes a Program
// of its own) and the call into a read of Record.Keyed[slot]. The keyed
// operator (operators/keyed) evaluates the arguments of the calls a
// Program lists (KeyedCalls), combines them with the key's state and
// fills Record.Keyed before it evaluates the Program. A call is computed
// for every reading its expression sees, even in a branch not taken. A
// per-key call inside another's argument is a diagnostic, and so is one
// without Options.Keyed (in key, say; Options.Where names the place).
//
// # Null rules
//
// A missing field and a null field behave alike (Eval returns a missing
// field as Kind Missing, everything computed as Null). The rules are SQL's:
//
//   - arithmetic, comparison < <= > >=, unary - and !, and every function
//     except coalesce and has give null when an operand is null:
//     event.temp > 10 with temp missing is null, so a filter drops it;
//   - == and != compare null as a value: null == null is true, x == null is
//     false for any other x, so event.temp != null tests presence; values of
//     different kinds are unequal ("1" == 1 is false);
//   - && and || use three-valued logic: false && x is false and true || x
//     is true (x is then not evaluated), otherwise null makes null;
//   - cond ? a : b with a null cond is null; only the chosen branch is
//     evaluated, and it is returned as it is (HCL would convert both
//     branches to one type; Eddy does not);
//   - a template with a null interpolation is null;
//   - coalesce returns its first non-null argument (or null), evaluating no
//     further; has(event.x) is true when x is present and not null;
//   - x / 0 and x % 0 are null, as are results that are not finite
//     (sqrt(-1), overflow), so every number is valid JSON;
//   - % keeps the sign of the dividend (math.Mod), as HCL's does.
//
// # Runtime errors
//
// An operand of the wrong type that the compiler could not rule out (a
// string field in arithmetic, a number given to upper, a non-bool operand
// of &&, tonumber("12abc")) is a reading-level error. Errors win over nulls
// and travel up the tree unchanged: the first one, in left-to-right order,
// is the result, except where a branch is not evaluated (&&, ||, ?:,
// coalesce). Eval reports an error as null; EvalErr returns it as a
// *RuntimeError wrapping ErrType or ErrNumberSyntax, with the source range
// of the bad operand. EvalBool returns it too, and wraps ErrNotBool when a
// filter's result is a number or a string (dead-letter reason
// "filter_type"); AppendKey reports it as a missing key. None of these
// allocate: the errors are built at compile time.
//
// # Differences from HCL
//
// Where both give a value, Eval agrees with HCL's evaluator (a test checks
// it on random readings). HCL fails where Eddy gives null (missing fields,
// null operands, division by zero) and converts where Eddy fails (HCL's
// "5" + 1 is 6; Eddy's is a type error, since a field that is sometimes a
// string is a data problem worth dead-lettering). Numbers are float64 where
// HCL uses big floats, so 0.1 + 0.2 == 0.3 is false, as in JSON consumers.
package expr
