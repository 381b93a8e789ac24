package config

import (
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Pipeline is a pipeline block: from a source, through filter, map and key,
// into an optional window with aggregates, out to sinks.
type Pipeline struct {
	// Name is unique among pipelines and a valid identifier.
	Name string
	From SourceRef
	// Control is a low-rate control stream (thresholds, calibration pushed
	// from the cloud) whose JSON messages are merged into the pipeline's
	// control state, read in expressions as control.*; nil when not set. It
	// never holds the watermark back.
	Control *SourceRef
	// Filter, Key and the Map values are expressions over event, compiled by
	// operators/expr; nil when not set.
	Filter hcl.Expression
	Map    []MapField
	Key    hcl.Expression
	// Parallelism is the number of keyed subtasks; default the agent's.
	Parallelism int
	// MaxKeys bounds the keys holding window state, over all subtasks
	// together: a reading of a new key beyond it is dead-lettered with
	// reason key_limit. 0 (default): unlimited. Needs a window.
	MaxKeys int
	// Window is nil for a pipeline without windows; then Aggregates is empty.
	Window     *Window
	Aggregates []Aggregate
	// To lists at least one sink.
	To []SinkRef
	// LateOutput and DeadLetter are nil when not set.
	LateOutput *SinkRef
	DeadLetter *SinkRef
	// StateTTL is the time to live of the per-key function state (prev,
	// changed, …) of a key after its last reading; 0: kept forever.
	StateTTL time.Duration
	// ReportByException is the pipeline's report_by_exception block; nil
	// when not set. A pipeline with one has no window.
	ReportByException *ReportByException
	// Alarms are the pipeline's alarm blocks (their names unique), in
	// declaration order; a pipeline with one has no window.
	Alarms []*Alarm
	// Absence is the pipeline's absence block; nil when not set. A
	// pipeline with one has no window.
	Absence *Absence
	// Dedup is the pipeline's dedup block; nil when not set. It drops
	// repeats after the filter, before the map and the other blocks
	// wherever it is declared, and may feed a window.
	Dedup *Dedup
	// Blocks are the per-key blocks above in declaration order: a reading
	// goes through them in this order (dedup first, wherever it is), and
	// the records the blocks emit for one reading come in this order.
	Blocks []KeyedBlock
	// Order is the order in which a pipeline with per-key functions
	// processes a key's readings: OrderEventTime or OrderArrival; "" when
	// not set (event time when the source has a timestamp).
	Order string
	// OrderRange and StateTTLRange locate the attributes (zero when unset).
	OrderRange, StateTTLRange hcl.Range
	// DebugDelayPerRecord and DebugPanicAtOffset are for tests only: a
	// window subtask sleeps this long per record (a deliberately slow
	// operator, to build backpressure), and panics once per process on the
	// record at this source offset (0: never), to inject an operator
	// failure. Defaults 0.
	DebugDelayPerRecord time.Duration
	DebugPanicAtOffset  uint64
	DeclRange           hcl.Range
	// BlockRange spans the whole block, header to closing brace: a
	// checkpoint records that text as the pipeline's definition, so that
	// after a change the old definition can still run.
	BlockRange hcl.Range
}

// MapField is one NAME = expr of a map block.
type MapField struct {
	Name  string
	Expr  hcl.Expression
	Range hcl.Range
}

// SourceRef is a resolved reference like source.mqtt.sensors.
type SourceRef struct {
	Source *Source
	Range  hcl.Range
}

// SinkRef is a resolved reference like sink.mqtt.cloud.
type SinkRef struct {
	Sink  *Sink
	Range hcl.Range
}

var pipelineAttrs = []string{"from", "control", "filter", "key", "parallelism", "max_keys", "to", "late_output", "dead_letter",
	"state_ttl", "order", "debug_delay_per_record", "debug_panic_at_offset"}

// The values of a pipeline's order.
const (
	OrderEventTime = "event_time"
	OrderArrival   = "arrival"
)

// decodePipelines decodes every pipeline block, resolving references against
// the declared sources and sinks.
func (d *decoder) decodePipelines(blocks hcl.Blocks, sources []*Source, sinks []*Sink, ag Agent) []*Pipeline {
	var out []*Pipeline
	seen := map[string]*Pipeline{}
	sparkplugFeeders := map[*Sink]*Pipeline{}
	for _, b := range blocks {
		name := b.Labels[0]
		if !d.checkNameLabel(b, 0) {
			continue
		}
		if prev := seen[name]; prev != nil {
			d.errorf(b.LabelRanges[0], "Duplicate pipeline name",
				"A pipeline named %q is already declared at %s; pipeline names must be unique.", name, prev.DeclRange)
			continue
		}
		a, c := d.content(b, pipelineAttrs,
			hcl.BlockHeaderSchema{Type: "map"},
			hcl.BlockHeaderSchema{Type: "window", LabelNames: []string{"kind"}},
			hcl.BlockHeaderSchema{Type: "aggregate"},
			hcl.BlockHeaderSchema{Type: "report_by_exception"},
			hcl.BlockHeaderSchema{Type: "alarm", LabelNames: []string{"name"}},
			hcl.BlockHeaderSchema{Type: "dedup"},
			hcl.BlockHeaderSchema{Type: "absence"})
		p := &Pipeline{Name: name, DeclRange: b.DefRange, BlockRange: b.DefRange}
		if body, ok := b.Body.(*hclsyntax.Body); ok {
			p.BlockRange = hcl.RangeBetween(b.DefRange, body.SrcRange)
		}
		seen[name] = p
		out = append(out, p)
		a.require("from", "to")
		if at := a.m["from"]; at != nil {
			p.From.Range = at.Expr.Range()
			p.From.Source = d.resolveSource(at.Expr, sources)
		}
		if at := a.m["control"]; at != nil {
			if src := d.resolveSource(at.Expr, sources); src != nil {
				p.Control = &SourceRef{Source: src, Range: at.Expr.Range()}
			}
		}
		if at := a.m["filter"]; at != nil {
			p.Filter = at.Expr
		}
		if at := a.m["key"]; at != nil {
			p.Key = at.Expr
		}
		p.Parallelism = int(a.integer("parallelism", int64(ag.Parallelism), 1, int64(ag.MaxKeyGroups)))
		p.StateTTL = a.duration("state_ttl", 0)
		if at := a.m["order"]; at != nil {
			p.Order = a.enum("order", []string{OrderEventTime, OrderArrival}, "")
			p.OrderRange = at.Expr.Range()
		}
		if at := a.m["state_ttl"]; at != nil {
			p.StateTTLRange = at.Expr.Range()
		}
		if n := a.integer("max_keys", 0, -1<<31, 1<<31-1); n >= 0 {
			p.MaxKeys = int(n)
		} else {
			d.errorf(a.rangeOf("max_keys"), "Value out of range", "\"max_keys\" must be a number of keys, or 0 for no limit; got %d.", n)
		}
		p.DebugDelayPerRecord = a.duration("debug_delay_per_record", 0)
		p.DebugPanicAtOffset = uint64(a.integer("debug_panic_at_offset", 0, 0, 1<<62))
		if at := a.m["to"]; at != nil {
			exprs, diags := hcl.ExprList(at.Expr)
			if diags.HasErrors() {
				d.errorf(at.Expr.Range(), "Invalid sink list", "\"to\" must be a list of sink references, e.g. to = [sink.mqtt.cloud].")
			} else if len(exprs) == 0 {
				d.errorf(at.Expr.Range(), "Empty sink list", "\"to\" needs at least one sink, e.g. to = [sink.stdout.console].")
			}
			for _, e := range exprs {
				if s := d.resolveSink(e, sinks, "to"); s != nil {
					p.To = append(p.To, SinkRef{Sink: s, Range: e.Range()})
				}
			}
		}
		for _, field := range []string{"late_output", "dead_letter"} {
			at := a.m[field]
			if at == nil {
				continue
			}
			if s := d.resolveSink(at.Expr, sinks, field); s != nil {
				ref := &SinkRef{Sink: s, Range: at.Expr.Range()}
				if field == "late_output" {
					p.LateOutput = ref
				} else {
					p.DeadLetter = ref
				}
			}
		}
		if mb := d.single(c.Blocks, "map"); mb != nil {
			p.Map = d.mapFields(mb)
		}
		if wb := d.single(c.Blocks, "window"); wb != nil {
			p.Window = d.decodeWindow(wb, p.From.Source)
		}
		if ab := d.single(c.Blocks, "aggregate"); ab != nil {
			p.Aggregates = d.decodeAggregates(ab)
			if p.Window == nil {
				d.errorf(ab.DefRange, "Aggregate without window", "Aggregates are computed per window; add a window block, e.g. window \"tumbling\" { size = \"1m\" }.")
			}
		} else if p.Window != nil {
			d.errorf(p.Window.DeclRange, "Window without aggregate", "A window emits its aggregates; add an aggregate block, e.g. aggregate { n = count() }.")
		}
		d.decodeKeyedBlocks(c.Blocks, p)
		if p.MaxKeys > 0 && p.Window == nil {
			d.errorf(a.rangeOf("max_keys"), "Key limit without window", "max_keys bounds the keys holding window state; this pipeline has no window, so it keeps no keys: remove max_keys.")
		}
		d.checkKeyed(p)
		d.checkSparkplugRefs(p, sparkplugFeeders)
		if p.LateOutput != nil && (p.Window == nil || p.Window.Time != EventTime) && !p.keyedEventTime() {
			d.errorf(p.LateOutput.Range, "Late output without event time", "Only event-time windows, and per-key functions in event-time order, have late readings; remove late_output or use an event-time window.")
		}
	}
	return out
}

// keyedEventTime reports whether p orders its readings by event time for
// per-key functions, which set late readings aside like windows.
func (p *Pipeline) keyedEventTime() bool {
	return p.Keyed() && p.Order != OrderArrival && !p.ArrivalOnly() && p.From.Source != nil && p.From.Source.Timestamp != nil &&
		(p.Window == nil || p.Window.Time == EventTime)
}

// ArrivalOnly reports whether p's per-key block takes readings as they
// arrive whatever the source (absence on processing time), so its order
// is arrival.
func (p *Pipeline) ArrivalOnly() bool {
	return p.Absence != nil && p.Absence.Time == ProcessingTime
}

// mapFields returns the attributes of a map block in source order.
func (d *decoder) mapFields(b *hcl.Block) []MapField {
	attrs, diags := b.Body.JustAttributes()
	d.extend(diags)
	var out []MapField
	for name, at := range attrs {
		out = append(out, MapField{Name: name, Expr: at.Expr, Range: at.Range})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Range.Start.Byte < out[j].Range.Start.Byte })
	return out
}

// sortedAttrs returns attrs in source order.
func sortedAttrs(attrs hcl.Attributes) []*hcl.Attribute {
	out := make([]*hcl.Attribute, 0, len(attrs))
	for _, at := range attrs {
		out = append(out, at)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Range.Start.Byte < out[j].Range.Start.Byte })
	return out
}

// checkSparkplugRefs checks p's references to Sparkplug sinks: such a sink
// publishes window results (its devices' metrics are the aggregates), so
// it takes no dead letters, late readings or windowless records; and one
// pipeline feeds it, as a device's metrics are one pipeline's aggregates.
func (d *decoder) checkSparkplugRefs(p *Pipeline, feeders map[*Sink]*Pipeline) {
	for _, ref := range []*SinkRef{p.LateOutput, p.DeadLetter} {
		if ref != nil && ref.Sink.Sparkplug != nil {
			d.errorf(ref.Range, "Sparkplug sink takes window results only",
				"A Sparkplug sink publishes each key's aggregates as a device's metrics; late readings and dead letters are not metrics. Send them to a file or mqtt sink, e.g. sink.file.dead.")
		}
	}
	for i := range p.To {
		ref := &p.To[i]
		if ref.Sink.Sparkplug == nil {
			continue
		}
		if p.Window == nil {
			d.errorf(ref.Range, "Sparkplug sink takes window results only",
				"A Sparkplug sink publishes each key's aggregates as a device's metrics, and pipeline %q has no window. Add a window and an aggregate block, or send its records to an mqtt sink.", p.Name)
			continue
		}
		if prev := feeders[ref.Sink]; prev != nil && prev != p {
			d.errorf(ref.Range, "Sparkplug sink fed by two pipelines",
				"Pipeline %q already sends to sink.sparkplug.%s (%s): a Sparkplug device's metrics are one pipeline's aggregates, so each pipeline needs its own Sparkplug sink (with its own group_id or edge_node_id).", prev.Name, ref.Sink.Name, prev.DeclRange)
			continue
		}
		feeders[ref.Sink] = p
	}
}
