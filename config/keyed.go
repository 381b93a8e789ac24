package config

import (
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// KeyedFunctions are the per-key functions of expressions (package
// operators/expr compiles them): a pipeline calling one keeps state per
// key and evaluates its filter, map and aggregate arguments in its keyed
// subtasks.
var KeyedFunctions = []string{"changed", "count_key", "delta", "first_seen", "prev", "since"}

// KeyedCalls returns the calls of per-key functions in p's filter, map,
// aggregate arguments, report_by_exception value, alarm raise and clear
// (alarm by alarm, in declaration order) and dedup id, in that order
// (source order within each).
func (p *Pipeline) KeyedCalls() []*hclsyntax.FunctionCallExpr {
	var out []*hclsyntax.FunctionCallExpr
	visit := func(e hcl.Expression) {
		se, ok := e.(hclsyntax.Expression)
		if !ok {
			return
		}
		_ = hclsyntax.VisitAll(se, func(n hclsyntax.Node) hcl.Diagnostics {
			if c, ok := n.(*hclsyntax.FunctionCallExpr); ok && slices.Contains(KeyedFunctions, c.Name) {
				out = append(out, c)
			}
			return nil
		})
	}
	if p.Filter != nil {
		visit(p.Filter)
	}
	for _, m := range p.Map {
		visit(m.Expr)
	}
	for _, a := range p.Aggregates {
		if a.Arg != nil {
			visit(a.Arg)
		}
	}
	if r := p.ReportByException; r != nil && r.Value != nil {
		visit(r.Value)
	}
	for _, a := range p.Alarms {
		for _, e := range []hcl.Expression{a.Raise, a.Clear} {
			if e != nil {
				visit(e)
			}
		}
	}
	if dd := p.Dedup; dd != nil && dd.ID != nil {
		visit(dd.ID)
	}
	return out
}

// UsesKeyedFunctions reports whether p calls a per-key function.
func (p *Pipeline) UsesKeyedFunctions() bool { return len(p.KeyedCalls()) > 0 }

// checkKeyed reports the settings of per-key functions that p cannot
// honour: state_ttl or order without a per-key function, event-time order
// without event time, allowed lateness with event-time order, and a per-key
// function in the key.
func (d *decoder) checkKeyed(p *Pipeline) {
	if p.Key != nil {
		if se, ok := p.Key.(hclsyntax.Expression); ok {
			_ = hclsyntax.VisitAll(se, func(n hclsyntax.Node) hcl.Diagnostics {
				if c, ok := n.(*hclsyntax.FunctionCallExpr); ok && slices.Contains(KeyedFunctions, c.Name) {
					d.errorf(c.NameRange, "Per-key function in key",
						"%s() reads the state of the reading's key, which the key decides; use it in filter, map or an aggregate argument.", c.Name)
				}
				return nil
			})
		}
	}
	keyed := p.Keyed()
	if !keyed {
		if p.StateTTL > 0 {
			d.errorf(p.StateTTLRange, "state_ttl without per-key functions",
				"state_ttl bounds the state of per-key functions (%s) report_by_exception, alarm and dedup, and this pipeline has none; remove it.", quoteList(KeyedFunctions))
		}
		if p.Order != "" {
			d.errorf(p.OrderRange, "order without per-key functions",
				"order says in which order per-key functions (%s) report_by_exception, alarm and dedup see a key's readings, and this pipeline has none; remove it.", quoteList(KeyedFunctions))
		}
		return
	}
	if p.From.Source == nil {
		return
	}
	eventTime := p.From.Source.Timestamp != nil && (p.Window == nil || p.Window.Time == EventTime)
	if p.Order == OrderEventTime && !eventTime {
		d.errorf(p.OrderRange, "Event-time order without event time",
			`order = "event_time" needs event time: give the source a timestamp block (and keep the window on event time), or use order = "arrival".`)
	}
	if eventTime && p.Order != OrderArrival && p.Window != nil && p.Window.AllowedLateness > 0 {
		d.errorf(p.Window.DeclRange, "allowed_lateness with per-key functions in event-time order",
			`A reading behind the watermark cannot be put back in its key's order, so per-key functions set it aside as late: remove allowed_lateness, or set order = "arrival" on the pipeline.`)
	}
}
