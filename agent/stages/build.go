package stages

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

// Plan is a pipeline compiled from its configuration: every expression
// compiled, the decoder built, the window specified. Compiling does no
// I/O, so `eddy validate` compiles plans to report expression errors too.
// New builds a pipeline from a plan; a plan is used by one pipeline only
// (its control state is the pipeline's).
type Plan struct {
	cfg         *config.Pipeline
	prep        operators.PrepareSpec
	eventTime   bool
	bound       int64 // watermark out-of-orderness bound, ms
	window      *window.Spec
	names       []string
	parallelism int
	control     *control.State // nil without a control stream
	keyed       *keyedPlan     // nil without per-key functions
	// src is the configuration text the plan was compiled from when it is
	// not the agent's: an old definition's (CompileOld).
	src []byte
}

// Compile builds the plan of pipeline p of cfg. Its diagnostics report
// every mistake of the pipeline at once, each with its position.
func Compile(cfg *config.Config, p *config.Pipeline) (*Plan, hcl.Diagnostics) {
	pl := &Plan{cfg: p, parallelism: p.Parallelism}
	if pl.parallelism <= 0 {
		pl.parallelism = cfg.Agent.Parallelism
	}
	c := &compiler{p: p, pl: pl, spec: &pl.prep, schema: event.NewSchema()}
	c.spec.Schema = c.schema
	c.spec.MaxKeyGroups = cfg.Agent.MaxKeyGroups
	c.spec.Parallelism = pl.parallelism

	c.expressions()
	aggs := c.aggregates()
	c.timestamp()
	if p.Window != nil {
		c.window(aggs)
	}
	if pl.keyed != nil {
		c.diags = append(c.diags, pl.keyed.compileBlocks(p, c.schema, c.opts)...)
	}
	// The decoder comes last: it reads only the paths registered above.
	src := p.From.Source
	d, err := newDecoder(src, c.schema)
	if err != nil {
		c.diags = append(c.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid csv settings",
			Detail: err.Error(), Subject: src.DeclRange.Ptr()})
	}
	c.spec.Decoder = d
	if pl.keyed != nil {
		c.diags = append(c.diags, pl.keyed.finish(pl, src)...)
	}
	return pl, c.diags
}

// Config is the pipeline block the plan was compiled from.
func (pl *Plan) Config() *config.Pipeline { return pl.cfg }

// compiler is one compile: the plan it fills and the diagnostics it
// collects, so that every mistake of the pipeline is reported at once.
type compiler struct {
	p      *config.Pipeline
	pl     *Plan
	spec   *operators.PrepareSpec
	schema *event.Schema
	opts   expr.Options // for filter, map and aggregate arguments
	diags  hcl.Diagnostics
}

// program compiles e with the compiler's options (nil for no expression).
func (c *compiler) program(e hcl.Expression) *expr.Program {
	if e == nil {
		return nil
	}
	pr, d := expr.CompileWith(e, c.schema, c.opts)
	c.diags = append(c.diags, d...)
	return pr
}

// expressions compiles filter, map and key; a pipeline with per-key
// functions has them read the keyed subtasks' state and the control values
// captured at arrival.
func (c *compiler) expressions() {
	p, pl := c.p, c.pl
	if p.Control != nil {
		pl.control = control.New()
		c.opts.Control = pl.control
	}
	keyOpts := c.opts
	keyOpts.Where = "key"
	if pl.keyed = newKeyedPlan(p); pl.keyed != nil {
		c.opts.Keyed = &pl.keyed.calls
		if c.opts.Control != nil {
			// The keyed subtasks read the values captured at arrival.
			c.opts.Control, c.opts.ControlCapture = nil, &pl.keyed.control
		}
	}
	c.spec.Filter = c.program(p.Filter)
	for _, m := range p.Map {
		pr := c.program(m.Expr)
		c.spec.Maps = append(c.spec.Maps, operators.MapField{Slot: c.schema.Slot(event.Path{m.Name}), Prog: pr})
	}
	if p.Key != nil {
		pr, d := expr.CompileWith(p.Key, c.schema, keyOpts)
		c.diags = append(c.diags, d...)
		c.spec.Key = pr
	}
}

// aggregates compiles the aggregate calls and their arguments.
func (c *compiler) aggregates() []window.AggSpec {
	var aggs []window.AggSpec
	args := map[string]*expr.Program{} // plain traversals already compiled
	for i, a := range c.p.Aggregates {
		f, err := aggregate.ParseFunc(a.Func)
		if err != nil {
			c.diags = append(c.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown aggregate function",
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
			pr = c.program(a.Arg)
			if k != "" {
				args[k] = pr
			}
		}
		c.spec.AggArgs = append(c.spec.AggArgs, pr)
		aggs = append(aggs, window.AggSpec{Func: f, Arg: arg, Q: a.Q})
		c.pl.names = append(c.pl.names, a.Name)
	}
	return aggs
}

// timestamp sets up the source's event time: the timestamp field, the
// future-skew bound, the watermark's bound and punctuation.
func (c *compiler) timestamp() {
	src := c.p.From.Source
	if src.Timestamp == nil {
		return
	}
	slot := c.schema.Slot(event.Path(strings.Split(src.Timestamp.Field, ".")))
	ts, err := decode.NewTimestamp(slot, src.Timestamp.Unit, src.Timestamp.Layout)
	if err != nil {
		c.diags = append(c.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid timestamp",
			Detail: err.Error(), Subject: src.DeclRange.Ptr()})
	}
	c.spec.Timestamp = ts
	c.spec.MaxFutureSkewMs = src.Watermark.MaxFutureSkew.Milliseconds()
	c.pl.bound = src.Watermark.MaxOutOfOrderness.Milliseconds()
	if f := src.Watermark.Punctuation; f != "" {
		slot := c.schema.Slot(event.Path(strings.Split(f, ".")))
		pts, err := decode.NewTimestamp(slot, src.Timestamp.Unit, src.Timestamp.Layout)
		if err != nil {
			c.diags = append(c.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid punctuation field",
				Detail: err.Error(), Subject: src.DeclRange.Ptr()})
		}
		c.spec.Punctuation = pts
	}
}

// window builds the window spec over aggs and checks it as the window
// operator will at start.
func (c *compiler) window(aggs []window.AggSpec) {
	w := c.p.Window
	ws, eventTime, err := windowSpec(w, aggs)
	if err == nil && !c.diags.HasErrors() { // aggregates compiled: the spec is whole
		err = ws.Check() // what the window operator refuses at start
	}
	if err != nil {
		c.diags = append(c.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid window",
			Detail: err.Error(), Subject: w.DeclRange.Ptr()})
	}
	c.pl.window = ws
	c.pl.eventTime = eventTime
	if !eventTime {
		// Processing-time and count windows need no event time: don't
		// reject readings for a missing timestamp.
		c.spec.Timestamp = nil
		c.spec.Punctuation = nil
		c.spec.MaxFutureSkewMs = 0
	}
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
	// sparkplug_b too: the prepare stage hands each of a message's
	// readings to the pipeline as a JSON object (sparkplugIn).
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
