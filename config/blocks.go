package config

import (
	"math"
	"slices"
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

// Alarm is a pipeline's alarm "NAME" block: per key, raise when Raise has
// held for MinDuration, clear when Clear holds
// (operators/keyed.Alarm).
type Alarm struct {
	// Name is the alarm's label, a valid identifier: the block name in
	// record ids.
	Name string
	// Raise and Clear are boolean expressions over event; Clear is nil
	// when not set (then the alarm clears when Raise is false).
	Raise, Clear hcl.Expression
	// MinDuration is how long Raise must hold before the alarm raises;
	// default 0 (at once).
	MinDuration time.Duration
	DeclRange   hcl.Range
}

var alarmAttrs = []string{"raise", "clear", "min_duration"}

// AlarmFields are the fields of an alarm record beside the map fields.
var AlarmFields = []string{"start", "start_ms", "end", "end_ms", "duration_ms"}

// decodeAlarm decodes an alarm block of p.
func (d *decoder) decodeAlarm(b *hcl.Block, p *Pipeline) *Alarm {
	a, _ := d.content(b, alarmAttrs)
	al := &Alarm{Name: b.Labels[0], DeclRange: b.DefRange}
	d.checkNameLabel(b, 0)
	a.require("raise")
	if at := a.m["raise"]; at != nil {
		al.Raise = at.Expr
	}
	if at := a.m["clear"]; at != nil {
		al.Clear = at.Expr
	}
	al.MinDuration = a.duration("min_duration", 0)
	switch {
	case p.Window != nil:
		d.errorf(b.DefRange, "alarm with a window",
			"An alarm follows readings one by one and a window aggregates them; use one per pipeline: remove the window, or raise the alarm in a second pipeline.")
	case p.ReportByException != nil:
		d.errorf(b.DefRange, "alarm with report_by_exception",
			"A pipeline has one per-key block for now; put the alarm in a second pipeline reading the same source.")
	}
	for _, m := range p.Map {
		if slices.Contains(AlarmFields, m.Name) {
			d.errorf(m.Range, "Map field named "+m.Name,
				"The records of an alarm carry %s; rename this map field.", quoteList(AlarmFields))
		}
	}
	return al
}

// Dedup is a pipeline's dedup block: per key, a reading whose ID repeats
// one that passed less than Within before is dropped
// (operators/keyed.Dedup).
type Dedup struct {
	// ID is an expression over event: the reading's id (a string or a
	// number; null: the reading is not deduplicated).
	ID hcl.Expression
	// Within is how long repeats are dropped after a reading passes; > 0.
	Within    time.Duration
	DeclRange hcl.Range
}

// decodeDedupBlock decodes a pipeline's dedup block.
func (d *decoder) decodeDedupBlock(b *hcl.Block) *Dedup {
	a, _ := d.content(b, []string{"id", "within"})
	dd := &Dedup{DeclRange: b.DefRange}
	a.require("id", "within")
	if at := a.m["id"]; at != nil {
		dd.ID = at.Expr
	}
	dd.Within = a.duration("within", -1) // -1: unset or invalid, already reported
	if dd.Within == 0 {
		d.errorf(a.rangeOf("within"), "Value out of range",
			"\"within\" is how long repeats of an id are dropped after it passed; it must be more than zero, e.g. \"1h\".")
	}
	return dd
}

// HasKeyedBlocks reports whether p has a per-key block
// (report_by_exception, alarm, dedup).
func (p *Pipeline) HasKeyedBlocks() bool {
	return p.ReportByException != nil || p.Alarm != nil || p.Dedup != nil
}

// Keyed reports whether p keeps per-key state in its keyed subtasks: it
// calls a per-key function or has a per-key block.
func (p *Pipeline) Keyed() bool { return p.HasKeyedBlocks() || p.UsesKeyedFunctions() }
