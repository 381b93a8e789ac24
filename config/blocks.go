package config

import (
	"math"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// ReportByException is a pipeline's report_by_exception block: per key,
// report a reading when Value moved at least Deadband from the last
// reported value, or when Heartbeat passed since the last report
// (operators/keyed.ReportByException).
type ReportByException struct {
	// Value is an expression over event (a number; null is a value of its
	// own), compiled by operators/expr.
	Value hcl.Expression
	// Deadband is the least change worth reporting, ≥ 0; default 0 (every
	// change).
	Deadband float64
	// Heartbeat is the longest time between reports while readings keep
	// coming; 0 (default): none.
	Heartbeat time.Duration
	DeclRange hcl.Range
}

var reportByExceptionAttrs = []string{"value", "deadband", "heartbeat"}

// decodeReportByException decodes a report_by_exception block of p.
func (d *decoder) decodeReportByException(b *hcl.Block, p *Pipeline) *ReportByException {
	a, _ := d.content(b, reportByExceptionAttrs)
	r := &ReportByException{DeclRange: b.DefRange}
	a.require("value")
	if at := a.m["value"]; at != nil {
		r.Value = at.Expr
	}
	if f, ok := a.number("deadband", "0.5"); ok {
		r.Deadband, _ = f.Float64()
		if r.Deadband < 0 || math.IsInf(r.Deadband, 0) {
			d.errorf(a.rangeOf("deadband"), "Value out of range",
				"\"deadband\" must be a number ≥ 0 (the least change worth reporting, in the value's unit; 0 reports every change); got %g.", r.Deadband)
			r.Deadband = 0
		}
	}
	r.Heartbeat = a.duration("heartbeat", 0)
	if p.Window != nil {
		d.errorf(b.DefRange, "report_by_exception with a window",
			"report_by_exception reports readings one by one and a window aggregates them; use one per pipeline: remove the window, or report in a second pipeline.")
	}
	for _, m := range p.Map {
		if m.Name == SignalValueField {
			d.errorf(m.Range, "Map field named value",
				"The records of report_by_exception carry the reported value as %q; rename this map field.", SignalValueField)
		}
	}
	return r
}

// SignalValueField is the field of a report record holding its value.
const SignalValueField = "value"

// HasKeyedBlocks reports whether p has a per-key block
// (report_by_exception).
func (p *Pipeline) HasKeyedBlocks() bool { return p.ReportByException != nil }

// Keyed reports whether p keeps per-key state in its keyed subtasks: it
// calls a per-key function or has a per-key block.
func (p *Pipeline) Keyed() bool { return p.HasKeyedBlocks() || p.UsesKeyedFunctions() }
