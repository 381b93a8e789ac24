package keyed

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/state"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestScenarios replays the scenarios of testdata/*.txt, each on 1, 2 and
// 3 subtasks (keys routed by key group, watermarks broadcast), and checks
// the outputs of every command against hand-derived expectations. Grammar:
//
//	scenario <title>
//	rule "<the rule it pins>"
//	order event_time|arrival          # default event_time
//	ttl <ms>                          # state_ttl; default none
//	filter <expr>
//	map <name> <expr>                 # output fields, in order
//	e <key> <time> <json> [-> late]   # a reading of the key; its arrival watermark is the last wm
//	wm <ms>                           # the watermark moves; end = the input ended
//	expect <key> <time> name=value …  # an output of the command above (per key in order; keys in any order)
//	buffered <n>                      # readings waiting for the watermark, over the subtasks
//
// A command's outputs must be exactly its expect lines. Values: numbers,
// null, true, false, "strings".
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		for _, sc := range parseScenarios(t, f) {
			for _, n := range []int{1, 2, 3} {
				t.Run(fmt.Sprintf("%s/%s/p%d", filepath.Base(f), sc.title, n), func(t *testing.T) { sc.run(t, n) })
			}
		}
	}
}

type scenario struct {
	title, rule string
	line        int
	order       Order
	ttl         time.Duration
	filter      string
	maps        [][2]string
	cmds        []command
}

type command struct {
	line    int
	op      string // e, wm, end, buffered
	key     string
	time    int64
	payload string
	late    bool
	n       int
	expect  []string // "key time name=value …"
}

func parseScenarios(t *testing.T, path string) []*scenario {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*scenario
	var sc *scenario
	sn := bufio.NewScanner(f)
	for ln := 1; sn.Scan(); ln++ {
		line := sn.Text()
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		if word == "scenario" {
			sc = &scenario{title: rest, line: ln, order: EventTime}
			out = append(out, sc)
			continue
		}
		if sc == nil {
			t.Fatalf("%s:%d: %q before any scenario", path, ln, line)
		}
		bad := func() { t.Fatalf("%s:%d: bad line %q", path, ln, line) }
		switch word {
		case "rule":
			sc.rule = rest
		case "order":
			switch rest {
			case "event_time":
				sc.order = EventTime
			case "arrival":
				sc.order = Arrival
			default:
				bad()
			}
		case "ttl":
			ms, err := strconv.ParseInt(rest, 10, 64)
			if err != nil {
				bad()
			}
			sc.ttl = time.Duration(ms) * time.Millisecond
		case "filter":
			sc.filter = rest
		case "map":
			name, e, ok := strings.Cut(rest, " ")
			if !ok {
				bad()
			}
			sc.maps = append(sc.maps, [2]string{name, e})
		case "e":
			f := strings.SplitN(rest, " ", 3)
			if len(f) != 3 {
				bad()
			}
			c := command{line: ln, op: "e", key: f[0]}
			if c.time, err = strconv.ParseInt(f[1], 10, 64); err != nil {
				bad()
			}
			c.payload = f[2]
			if p, ok := strings.CutSuffix(c.payload, "-> late"); ok {
				c.payload, c.late = strings.TrimSpace(p), true
			}
			sc.cmds = append(sc.cmds, c)
		case "wm":
			c := command{line: ln, op: "wm"}
			if rest == "end" {
				c.time = math.MaxInt64
			} else if c.time, err = strconv.ParseInt(rest, 10, 64); err != nil {
				bad()
			}
			sc.cmds = append(sc.cmds, c)
		case "buffered":
			c := command{line: ln, op: "buffered"}
			if c.n, err = strconv.Atoi(rest); err != nil {
				bad()
			}
			sc.cmds = append(sc.cmds, c)
		case "expect":
			if len(sc.cmds) == 0 {
				bad()
			}
			last := &sc.cmds[len(sc.cmds)-1]
			last.expect = append(last.expect, rest)
		default:
			bad()
		}
	}
	if sn.Err() != nil {
		t.Fatal(sn.Err())
	}
	for _, sc := range out {
		if sc.rule == "" {
			t.Fatalf("%s:%d: scenario %q names no rule", path, sc.line, sc.title)
		}
	}
	return out
}

// subtask is one parallel instance in a scenario run.
type subtaskRun struct {
	op   *Operator
	ev   *Evaluator
	outs *[]string
}

func (sc *scenario) run(t *testing.T, parallelism int) {
	const maxKG = 128
	schema := event.NewSchema()
	calls := &expr.KeyedCalls{}
	compile := func(src string) *expr.Program {
		e, diags := hclsyntax.ParseExpression([]byte(src), "scenario", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("line %d: %s", sc.line, diags)
		}
		p, diags := expr.CompileWith(e, schema, expr.Options{Keyed: calls})
		if diags.HasErrors() {
			t.Fatalf("line %d: %s", sc.line, diags)
		}
		return p
	}
	var spec EvalSpec
	spec.Schema = schema
	if sc.filter != "" {
		spec.Filter = compile(sc.filter)
	}
	for _, m := range sc.maps {
		spec.Maps = append(spec.Maps, MapField{Name: m[0], Slot: schema.Slot(event.Path{m[0]}), Prog: compile(m[1])})
	}
	spec.Decoder = decode.NewJSON(schema)
	var outs []string
	subs := make([]*subtaskRun, parallelism)
	for i := range subs {
		op, err := New(state.NewMemory(), Options{Order: sc.order, TTL: sc.ttl, Calls: calls.Calls})
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = &subtaskRun{op: op, ev: NewEvaluator(spec, op), outs: &outs}
	}
	handler := func(s *subtaskRun) Handler {
		return func(r *Reading) error {
			if s.ev.Eval(r) != Pass {
				return nil
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%s %d", r.Key, r.Time)
			for _, m := range spec.Maps {
				b.WriteString(" " + m.Name + "=")
				b.Write(formatValue(s.ev.Rec.Fields[m.Slot]))
			}
			*s.outs = append(*s.outs, b.String())
			return nil
		}
	}
	wm := int64(math.MinInt64)
	var seq uint64
	for _, c := range sc.cmds {
		outs = outs[:0]
		switch c.op {
		case "e":
			seq++
			kg := state.KeyGroup([]byte(c.key), maxKG)
			s := subs[state.Subtask(kg, parallelism, maxKG)]
			r := Reading{Key: []byte(c.key), KeyGroup: kg, Time: c.time, Seq: seq, Payload: []byte(c.payload)}
			got, err := s.op.Process(&r, wm, handler(s))
			if err != nil {
				t.Fatalf("line %d: %v", c.line, err)
			}
			if (got == Late) != c.late {
				t.Errorf("line %d: outcome %d, want late=%v", c.line, got, c.late)
			}
		case "wm":
			wm = max(wm, c.time)
			for _, s := range subs {
				if err := s.op.AdvanceWatermark(c.time, handler(s)); err != nil {
					t.Fatalf("line %d: %v", c.line, err)
				}
			}
		case "buffered":
			n := 0
			for _, s := range subs {
				b, err := s.op.Buffered()
				if err != nil {
					t.Fatal(err)
				}
				n += b
			}
			if n != c.n {
				t.Errorf("line %d: %d buffered, want %d", c.line, n, c.n)
			}
		}
		if !samePerKey(outs, c.expect) {
			t.Errorf("line %d (%s): outputs\n  %s\nwant\n  %s", c.line, sc.rule, strings.Join(outs, "\n  "), strings.Join(c.expect, "\n  "))
		}
	}
}

// samePerKey reports whether a and b hold the same lines, in the same
// order per key (the first word).
func samePerKey(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	group := func(ls []string) map[string][]string {
		m := map[string][]string{}
		for _, l := range ls {
			k, _, _ := strings.Cut(l, " ")
			m[k] = append(m[k], l)
		}
		return m
	}
	ga, gb := group(a), group(b)
	for k, la := range ga {
		if !slices.Equal(la, gb[k]) {
			return false
		}
	}
	return true
}

func formatValue(v event.Value) []byte {
	switch v.Kind {
	case event.Number:
		return strconv.AppendFloat(nil, v.Num, 'g', -1, 64)
	case event.String:
		return strconv.AppendQuote(nil, string(v.Str))
	case event.Bool:
		return strconv.AppendBool(nil, v.Num != 0)
	}
	return []byte("null")
}
