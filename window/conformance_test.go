package window

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window/aggregate"
	"github.com/eddy-edge/eddy/window/watermark"
)

// The conformance suite replays the scenarios of testdata/conformance/*.txt.
// Each scenario cites the rule it pins and lists inputs with the firings,
// verdicts and counters expected, all derived by hand. The format (one
// command per line, '#' starts a comment):
//
//	scenario <name>                 starts a scenario (# not before a digit starts a comment)
//	rule <text>                     the Flink rule it pins (required)
//	window tumbling size=S [offset=O] [proc]
//	window sliding size=S slide=L [offset=O] [proc]
//	window session gap=G [proc]
//	window count n=N [slide=M]
//	window global
//	lateness L | early E | trigger_count N
//	agg <name> <func> [arg [q]]     arg is the Values index; count without arg counts readings
//	watermark bounded <B>           readings drive per-input bounded generators
//	inputs <n> [idle=<ms>]          n inputs combined by watermark.Combiner
//	skew <ms>                       readings beyond now+skew are dead-lettered
//	e[@input] <key> <time> [v...] [-> accepted|late|unassigned|dead]
//	wm <t> | end                    advance the watermark (end = math.MaxInt64)
//	pt <t>                          set now: processing time and the device clock
//	tick                            re-evaluate input idleness at now
//	expect <kind> <key> <window> #<seq> [name=value|name~value ...]
//	stats [open=N] [timers=N] [late=N] [unassigned=N]
//
// The expect lines after a command list, in order, every firing it caused:
// a watermark's by window end, then key; a reading's in the order of its
// windows (sliding: latest start first). value "null" is NaN; name~value allows the
// sketch's 1% relative error. Windows print as [start,end) with min/max for
// the global window's bounds.
//
// Each scenario runs on one operator (firing order checked exactly) and on
// 2 and 3 parallel subtasks routed by state.Subtask(state.KeyGroup(key, 128),
// n, 128) with the watermark broadcast; their merged firings, ordered by
// window end then key, must equal the same expectations. A scenario whose
// sliding windows the operator evaluates in panes (pane.go) runs on the
// per-window operator too, which must fire alike (its open and timers
// counts differ: they are not checked).
func TestConformance(t *testing.T) {
	files, err := filepath.Glob("testdata/conformance/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	total := 0
	for _, file := range files {
		for _, sc := range parseScenarios(t, file) {
			total++
			t.Run(sc.name, func(t *testing.T) {
				for _, p := range []int{1, 2, 3} {
					runScenario(t, sc, p, memoryStores, false)
				}
				// The agent's store: bbolt behind a spilling byte cache,
				// with the default object cache and with tiny ones, always
				// full (keys evicted, admitted and refused all the time).
				runScenario(t, sc, 2, boltStores(0), false)
				runScenario(t, sc, 2, boltStores(1), false)
				runScenario(t, sc, 1, boltStores(600), false)
				if UsesPanes(sc.spec) {
					runScenario(t, sc, 1, memoryStores, true)
					runScenario(t, sc, 2, boltStores(1), true)
				}
			})
		}
	}
	if total < 30 {
		t.Fatalf("%d scenarios, want at least 30", total)
	}
}

type scenario struct {
	name, rule string
	file       string
	spec       Spec
	aggNames   []string
	bound      int64 // -1: no generators
	inputs     int
	idle       int64
	skew       int64
	steps      []step
}

type step struct {
	line    int
	cmd     string // e, wm, end, pt, tick, stats
	input   int
	elem    Element
	verdict string
	t       int64
	expect  []expectFiring
	stats   map[string]int64
}

type expectFiring struct {
	line   int
	kind   string
	key    string
	window Window
	seq    int
	values map[string]expectValue
}

type expectValue struct {
	v      float64
	approx bool
}

func parseScenarios(t *testing.T, file string) []*scenario {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*scenario
	var sc *scenario
	fail := func(line int, format string, args ...any) {
		t.Helper()
		t.Fatalf("%s:%d: %s", file, line, fmt.Sprintf(format, args...))
	}
	sn := bufio.NewScanner(f)
	for line := 1; sn.Scan(); line++ {
		text := sn.Text()
		text = stripComment(text)
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		cmd, args := fields[0], fields[1:]
		if cmd == "scenario" {
			sc = &scenario{name: strings.Join(args, " "), file: file, bound: -1, inputs: 1}
			out = append(out, sc)
			continue
		}
		if sc == nil {
			fail(line, "%q before any scenario", cmd)
		}
		num := func(s string) int64 {
			switch s {
			case "min":
				return math.MinInt64
			case "max":
				return math.MaxInt64
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				fail(line, "bad number %q", s)
			}
			return n
		}
		kv := func(args []string) map[string]string {
			m := map[string]string{}
			for _, a := range args {
				k, v, _ := strings.Cut(a, "=")
				m[k] = v
			}
			return m
		}
		lastStep := func() *step {
			if len(sc.steps) == 0 {
				fail(line, "%s before any command", cmd)
			}
			return &sc.steps[len(sc.steps)-1]
		}
		switch {
		case cmd == "rule":
			sc.rule = strings.Join(args, " ")
		case cmd == "window":
			m := kv(args[1:])
			_, proc := m["proc"]
			switch args[0] {
			case "tumbling":
				sc.spec.Assigner = Tumbling(num(m["size"]), num(cmp.Or(m["offset"], "0")), !proc)
			case "sliding":
				sc.spec.Assigner = Sliding(num(m["size"]), num(m["slide"]), num(cmp.Or(m["offset"], "0")), !proc)
			case "session":
				sc.spec.Assigner = Session(num(m["gap"]), !proc)
			case "count":
				sc.spec.Assigner = CountSliding(num(m["n"]), num(cmp.Or(m["slide"], m["n"])))
			case "global":
				sc.spec.Assigner = Global()
			default:
				fail(line, "unknown window %q", args[0])
			}
		case cmd == "lateness":
			sc.spec.AllowedLateness = num(args[0])
		case cmd == "early":
			sc.spec.EarlyEvery = num(args[0])
		case cmd == "trigger_count":
			sc.spec.TriggerCount = num(args[0])
		case cmd == "agg":
			fn, err := aggregate.ParseFunc(args[1])
			if err != nil {
				fail(line, "%v", err)
			}
			a := AggSpec{Func: fn, Arg: -1}
			if len(args) > 2 {
				a.Arg = int(num(args[2]))
			}
			if len(args) > 3 {
				a.Q, _ = strconv.ParseFloat(args[3], 64)
			}
			sc.spec.Aggs = append(sc.spec.Aggs, a)
			sc.aggNames = append(sc.aggNames, args[0])
		case cmd == "watermark":
			if args[0] != "bounded" {
				fail(line, "unknown watermark %q", args[0])
			}
			sc.bound = num(args[1])
		case cmd == "inputs":
			sc.inputs = int(num(args[0]))
			if len(args) > 1 {
				sc.idle = num(kv(args[1:])["idle"])
			}
		case cmd == "skew":
			sc.skew = num(args[0])
		case cmd == "e" || strings.HasPrefix(cmd, "e@"):
			st := step{line: line, cmd: "e", verdict: "accepted"}
			if in, ok := strings.CutPrefix(cmd, "e@"); ok {
				st.input = int(num(in))
			}
			if i := slices.Index(args, "->"); i >= 0 {
				st.verdict = args[i+1]
				args = args[:i]
			}
			st.elem = Element{Key: []byte(args[0]), Time: num(args[1])}
			st.elem.KeyGroup = state.KeyGroup(st.elem.Key, state.DefaultMaxKeyGroups)
			for _, v := range args[2:] {
				st.elem.Values = append(st.elem.Values, parseValue(t, file, line, v))
			}
			sc.steps = append(sc.steps, st)
		case cmd == "wm" || cmd == "pt":
			sc.steps = append(sc.steps, step{line: line, cmd: cmd, t: num(args[0])})
		case cmd == "end" || cmd == "tick":
			sc.steps = append(sc.steps, step{line: line, cmd: cmd})
		case cmd == "stats":
			st := step{line: line, cmd: "stats", stats: map[string]int64{}}
			for k, v := range kv(args) {
				st.stats[k] = num(v)
			}
			sc.steps = append(sc.steps, st)
		case cmd == "expect":
			s := lastStep()
			ef := expectFiring{line: line, kind: args[0], key: args[1], values: map[string]expectValue{}}
			ef.window = parseWindow(t, file, line, args[2])
			ef.seq = int(num(strings.TrimPrefix(args[3], "#")))
			for _, a := range args[4:] {
				k, v, ok := strings.Cut(a, "=")
				approx := false
				if !ok {
					k, v, ok = strings.Cut(a, "~")
					approx = true
				}
				if !ok {
					fail(line, "bad value %q", a)
				}
				ef.values[k] = expectValue{parseValue(t, file, line, v), approx}
			}
			s.expect = append(s.expect, ef)
		default:
			fail(line, "unknown command %q", cmd)
		}
	}
	for _, sc := range out {
		if sc.rule == "" {
			t.Fatalf("%s: scenario %q cites no rule", file, sc.name)
		}
	}
	return out
}

// stripComment cuts a comment: '#' not followed by a digit (#3 is a firing
// number).
func stripComment(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '#' && (i+1 == len(s) || s[i+1] < '0' || s[i+1] > '9') {
			return s[:i]
		}
	}
	return s
}

func parseValue(t *testing.T, file string, line int, s string) float64 {
	if s == "null" {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%s:%d: bad value %q", file, line, s)
	}
	return v
}

func parseWindow(t *testing.T, file string, line int, s string) Window {
	inner, ok := strings.CutPrefix(s, "[")
	inner, ok2 := strings.CutSuffix(inner, ")")
	a, b, ok3 := strings.Cut(inner, ",")
	if !ok || !ok2 || !ok3 {
		t.Fatalf("%s:%d: bad window %q", file, line, s)
	}
	bound := func(x string) int64 {
		switch x {
		case "min":
			return math.MinInt64
		case "max":
			return math.MaxInt64
		}
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			t.Fatalf("%s:%d: bad window %q", file, line, s)
		}
		return n
	}
	return Window{bound(a), bound(b)}
}

// run holds one execution of a scenario on p subtasks.
type run struct {
	ops  []*Operator
	outs []Output
	gens []*watermark.BoundedOutOfOrder
	comb *watermark.Combiner
	now  int64
}

// A storeFunc returns the Store of a new operator subtask and names it.
type storeFunc func(t *testing.T, funcs []aggregate.Func) (Store, string)

func memoryStores(*testing.T, []aggregate.Func) (Store, string) { return NewMemoryStore(), "memory" }

// boltStores returns StateStores over bbolt with a 2 KiB byte cache and an
// object cache of cacheBytes (0: the default).
func boltStores(cacheBytes int) storeFunc {
	return func(t *testing.T, funcs []aggregate.Func) (Store, string) {
		s, err := NewStateStoreWith(openTestBolt(t, 2<<10), "op", funcs, StateStoreOptions{CacheBytes: cacheBytes})
		if err != nil {
			t.Fatal(err)
		}
		return s, fmt.Sprintf("bbolt, object cache %d B", cacheBytes)
	}
}

// runScenario replays sc on p subtasks over stores of newStore; perWindow
// evaluates paned sliding windows one by one (their open and timers counts
// then differ from the scenario's, and are not checked).
func runScenario(t *testing.T, sc *scenario, p int, newStore storeFunc, perWindow bool) {
	t.Helper()
	r := &run{}
	var funcs []aggregate.Func
	for _, a := range sc.spec.Aggs {
		funcs = append(funcs, a.Func)
	}
	storeName := ""
	for range p {
		var store Store
		store, storeName = newStore(t, funcs)
		op, err := NewOperator(sc.spec, store)
		if err != nil {
			t.Fatalf("%s: NewOperator: %v", sc.file, err)
		}
		if perWindow {
			op.panes = 0
			storeName += ", per-window operator"
		}
		r.ops = append(r.ops, op)
	}
	r.outs = make([]Output, p)
	if sc.bound >= 0 {
		for range sc.inputs {
			g, err := watermark.NewBoundedOutOfOrder(sc.bound)
			if err != nil {
				t.Fatal(err)
			}
			r.gens = append(r.gens, g)
		}
		var err error
		if r.comb, err = watermark.NewCombiner(sc.inputs, sc.idle, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range sc.steps {
		where := fmt.Sprintf("%s:%d (parallelism %d, %s)", sc.file, st.line, p, storeName)
		for i := range r.outs {
			r.outs[i].Reset()
		}
		switch st.cmd {
		case "e":
			e := st.elem
			got := "dead"
			if !watermark.TooFarInFuture(e.Time, r.now, sc.skew) {
				op := r.ops[state.Subtask(e.KeyGroup, p, state.DefaultMaxKeyGroups)]
				i := state.Subtask(e.KeyGroup, p, state.DefaultMaxKeyGroups)
				got = op.Process(&e, &r.outs[i]).String()
				if r.comb != nil {
					r.gens[st.input].Observe(e.Time)
					r.broadcast(r.comb.Update(st.input, r.gens[st.input].Current(), r.now))
				}
			}
			if got != st.verdict {
				t.Errorf("%s: verdict %s, want %s", where, got, st.verdict)
			}
		case "wm":
			r.broadcast(st.t)
		case "end":
			r.broadcast(math.MaxInt64)
		case "pt":
			r.now = st.t
			for i, op := range r.ops {
				op.AdvanceProcessingTime(st.t, &r.outs[i])
			}
			if r.comb != nil {
				r.broadcast(r.comb.Tick(r.now))
			}
		case "tick":
			r.broadcast(r.comb.Tick(r.now))
		case "stats":
			var s Stats
			for _, op := range r.ops {
				o := op.Stats()
				s.OpenWindows += o.OpenWindows
				s.PendingTimers += o.PendingTimers
				s.Late += o.Late
				s.Unassigned += o.Unassigned
			}
			got := map[string]int64{"open": int64(s.OpenWindows), "timers": int64(s.PendingTimers), "late": s.Late, "unassigned": s.Unassigned}
			for k, want := range st.stats {
				if perWindow && (k == "open" || k == "timers") {
					continue
				}
				if got[k] != want {
					t.Errorf("%s: stats %s = %d, want %d", where, k, got[k], want)
				}
			}
		}
		checkFirings(t, where, sc, st.expect, r.merged())
	}
}

// broadcast sends watermark wm to every subtask.
func (r *run) broadcast(wm int64) {
	for i, op := range r.ops {
		op.AdvanceWatermark(wm, &r.outs[i])
	}
}

// merged returns the firings of all subtasks. Those of several subtasks (a
// watermark's) are ordered by (window end, key, window start, seq), the
// order of a single operator's timers; those of one subtask (always a
// reading's) keep its order.
func (r *run) merged() []Firing {
	var fs []Firing
	from := 0
	for i := range r.outs {
		if len(r.outs[i].Firings) > 0 {
			from++
		}
		fs = append(fs, r.outs[i].Firings...)
	}
	if from > 1 {
		slices.SortStableFunc(fs, func(a, b Firing) int {
			return cmp.Or(cmp.Compare(a.Window.End, b.Window.End), bytes.Compare(a.Key, b.Key),
				cmp.Compare(a.Window.Start, b.Window.Start), cmp.Compare(a.Seq, b.Seq))
		})
	}
	return fs
}

func checkFirings(t *testing.T, where string, sc *scenario, want []expectFiring, got []Firing) {
	t.Helper()
	format := func(f Firing) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %v #%d", f.Kind, f.Key, f.Window, f.Seq)
		for i, v := range f.Values {
			fmt.Fprintf(&b, " %s=%s", sc.aggNames[i], strconv.FormatFloat(v, 'g', -1, 64))
		}
		return b.String()
	}
	n := max(len(want), len(got))
	for i := range n {
		switch {
		case i >= len(got):
			t.Errorf("%s: missing firing (expected at line %d)", where, want[i].line)
		case i >= len(want):
			t.Errorf("%s: unexpected firing: %s", where, format(got[i]))
		default:
			w, g := want[i], got[i]
			ok := w.kind == g.Kind.String() && w.key == string(g.Key) && w.window == g.Window && w.seq == g.Seq
			for j, name := range sc.aggNames {
				ev, has := w.values[name]
				if !has {
					continue
				}
				v := g.Values[j]
				switch {
				case math.IsNaN(ev.v):
					ok = ok && math.IsNaN(v)
				case ev.approx:
					ok = ok && math.Abs(v-ev.v) <= aggregate.RelativeAccuracy*math.Abs(ev.v)
				default:
					ok = ok && math.Abs(v-ev.v) <= 1e-9*math.Max(1, math.Abs(ev.v))
				}
			}
			for name := range w.values {
				if !slices.Contains(sc.aggNames, name) {
					t.Errorf("%s:%d: unknown aggregate %q", sc.file, w.line, name)
				}
			}
			if !ok {
				t.Errorf("%s: firing %d = %s, want line %d", where, i, format(g), w.line)
			}
		}
	}
}
