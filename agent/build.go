package agent

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/window"
	"github.com/eddy-edge/eddy/window/aggregate"
)

// plan is a pipeline compiled from its configuration: every expression
// compiled, the decoder built, the window specified. Building a plan does no
// I/O, so `eddy validate` builds plans to report expression errors too.
type plan struct {
	cfg         *config.Pipeline
	prep        operators.PrepareSpec
	eventTime   bool
	bound       int64 // watermark out-of-orderness bound, ms
	window      *window.Spec
	names       []string
	parallelism int
	control     *control.State // nil without a control stream
	keyed       *keyedPlan     // nil without per-key functions
}

// compile builds the plan of pipeline p.
func compile(cfg *config.Config, p *config.Pipeline) (*plan, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	src := p.From.Source
	schema := event.NewSchema()
	pl := &plan{cfg: p, parallelism: p.Parallelism}
	if pl.parallelism <= 0 {
		pl.parallelism = cfg.Agent.Parallelism
	}
	spec := &pl.prep
	spec.Schema = schema
	spec.MaxKeyGroups = cfg.Agent.MaxKeyGroups
	spec.Parallelism = pl.parallelism

	var copts expr.Options
	if p.Control != nil {
		pl.control = control.New()
		copts.Control = pl.control
	}
	keyOpts := copts
	keyOpts.Where = "key"
	if pl.keyed = newKeyedPlan(p); pl.keyed != nil {
		copts.Keyed = &pl.keyed.calls
		if copts.Control != nil {
			// The keyed subtasks read the values captured at arrival.
			copts.Control, copts.ControlCapture = nil, &pl.keyed.control
		}
	}
	prog := func(e hcl.Expression) *expr.Program {
		if e == nil {
			return nil
		}
		pr, d := expr.CompileWith(e, schema, copts)
		diags = append(diags, d...)
		return pr
	}
	spec.Filter = prog(p.Filter)
	for _, m := range p.Map {
		pr := prog(m.Expr)
		spec.Maps = append(spec.Maps, operators.MapField{Slot: schema.Slot(event.Path{m.Name}), Prog: pr})
	}
	if p.Key != nil {
		pr, d := expr.CompileWith(p.Key, schema, keyOpts)
		diags = append(diags, d...)
		spec.Key = pr
	}
	var aggs []window.AggSpec
	args := map[string]*expr.Program{} // plain traversals already compiled
	for i, a := range p.Aggregates {
		f, err := aggregate.ParseFunc(a.Func)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown aggregate function",
				Detail: err.Error(), Subject: a.Range.Ptr()})
			continue
		}
		arg := -1
		if a.Arg != nil {
			arg = i
		}
		// Aggregates of the same field share its program, which the
		// preparer then evaluates once per reading.
		k := traversalKey(a.Arg)
		pr, ok := args[k]
		if !ok || k == "" {
			pr = prog(a.Arg)
			if k != "" {
				args[k] = pr
			}
		}
		spec.AggArgs = append(spec.AggArgs, pr)
		aggs = append(aggs, window.AggSpec{Func: f, Arg: arg, Q: a.Q})
		pl.names = append(pl.names, a.Name)
	}

	if src.Timestamp != nil {
		slot := schema.Slot(event.Path(strings.Split(src.Timestamp.Field, ".")))
		ts, err := decode.NewTimestamp(slot, src.Timestamp.Unit, src.Timestamp.Layout)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid timestamp",
				Detail: err.Error(), Subject: src.DeclRange.Ptr()})
		}
		spec.Timestamp = ts
		spec.MaxFutureSkewMs = src.Watermark.MaxFutureSkew.Milliseconds()
		pl.bound = src.Watermark.MaxOutOfOrderness.Milliseconds()
		if f := src.Watermark.Punctuation; f != "" {
			slot := schema.Slot(event.Path(strings.Split(f, ".")))
			pts, err := decode.NewTimestamp(slot, src.Timestamp.Unit, src.Timestamp.Layout)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid punctuation field",
					Detail: err.Error(), Subject: src.DeclRange.Ptr()})
			}
			spec.Punctuation = pts
		}
	}

	if w := p.Window; w != nil {
		ws, eventTime, err := windowSpec(w, aggs)
		if err == nil && !diags.HasErrors() { // aggregates compiled: the spec is whole
			err = ws.Check() // what the window operator refuses at start
		}
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid window",
				Detail: err.Error(), Subject: w.DeclRange.Ptr()})
		}
		pl.window = ws
		pl.eventTime = eventTime
		if !eventTime {
			// Processing-time and count windows need no event time: don't
			// reject readings for a missing timestamp.
			spec.Timestamp = nil
			spec.Punctuation = nil
			spec.MaxFutureSkewMs = 0
		}
	}

	if pl.keyed != nil {
		diags = append(diags, pl.keyed.compileBlocks(p, schema, copts)...)
	}
	// The decoder comes last: it reads only the paths registered above.
	d, err := newDecoder(src, schema)
	if err != nil {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid csv settings",
			Detail: err.Error(), Subject: src.DeclRange.Ptr()})
	}
	spec.Decoder = d
	if pl.keyed != nil {
		diags = append(diags, pl.keyed.finish(pl, src)...)
	}
	return pl, diags
}

// newDecoder returns a decoder of src's format filling schema's slots.
func newDecoder(src *config.Source, schema *event.Schema) (decode.Decoder, error) {
	switch src.Format {
	case "csv":
		opts := decode.CSVOptions{Header: src.CSV.Header, Columns: src.CSV.Columns, Delimiter: byte(src.CSV.Delimiter)}
		return decode.NewCSV(schema, opts)
	case "raw":
		return decode.NewRaw(schema), nil
	}
	return decode.NewJSON(schema), nil
}

func windowSpec(w *config.Window, aggs []window.AggSpec) (*window.Spec, bool, error) {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	eventTime := w.Time == config.EventTime
	var a window.Assigner
	switch w.Kind {
	case config.Tumbling:
		a = window.Tumbling(ms(w.Size), ms(w.Offset), eventTime)
	case config.Sliding:
		a = window.Sliding(ms(w.Size), ms(w.Slide), ms(w.Offset), eventTime)
	case config.Session:
		a = window.Session(ms(w.Gap), eventTime)
	case config.Count:
		eventTime = false
		if w.CountSlide > 0 {
			a = window.CountSliding(w.Count, w.CountSlide)
		} else {
			a = window.CountTumbling(w.Count)
		}
	case config.Global:
		eventTime = false
		a = window.Global()
	default:
		return nil, false, fmt.Errorf("unknown window kind %q", w.Kind)
	}
	return &window.Spec{
		Assigner:        a,
		AllowedLateness: ms(w.AllowedLateness),
		EarlyEvery:      ms(w.EarlyEvery),
		TriggerCount:    w.TriggerCount,
		Aggs:            aggs,
	}, eventTime, nil
}

// Validate loads the configuration at path and makes every check that Run
// makes before it touches the network or data_dir (checkConfig), without
// starting anything. It returns the diagnostics as
// "file:line:col: ..." lines and whether the configuration has no errors.
func Validate(path string) (report string, ok bool) {
	cfg, diags := config.Load(path)
	if !diags.HasErrors() {
		diags = append(diags, checkConfig(cfg)...)
		diags = append(diags, unsupported(cfg)...)
	}
	return config.FormatDiagnostics(diags), !diags.HasErrors()
}

// unsupported reports settings the configuration language accepts but this
// build cannot honour, as warnings for validate and errors for run. None
// today.
func unsupported(cfg *config.Config) hcl.Diagnostics { return nil }

func aggFuncs(specs []window.AggSpec) []aggregate.Func {
	fs := make([]aggregate.Func, len(specs))
	for i, a := range specs {
		fs[i] = a.Func
	}
	return fs
}

// traversalKey names an expression that is a plain attribute traversal
// (event.a.b), or returns "" for anything else.
func traversalKey(e hcl.Expression) string {
	if e == nil {
		return ""
	}
	t, diags := hcl.AbsTraversalForExpr(e)
	if diags.HasErrors() {
		return ""
	}
	var b strings.Builder
	b.WriteString(t.RootName())
	for _, step := range t[1:] {
		a, ok := step.(hcl.TraverseAttr)
		if !ok {
			return ""
		}
		b.WriteString(".")
		b.WriteString(a.Name)
	}
	return b.String()
}
