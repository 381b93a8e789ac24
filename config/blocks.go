package config

import (
	"math"
	"slices"
	"strconv"
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
	// Time is the heartbeat's clock: EventTime (default; readings carry
	// the heartbeat) or ProcessingTime (the agent's clock; a timer repeats
	// the last value when nothing was sent for Heartbeat).
	Time      string
	DeclRange hcl.Range
}

var reportByExceptionAttrs = []string{"value", "deadband", "heartbeat", "time"}

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
	r.Time = a.enum("time", []string{EventTime, ProcessingTime}, EventTime)
	if r.Time == ProcessingTime && r.Heartbeat <= 0 {
		d.errorf(a.rangeOf("time"), "Processing time without heartbeat",
			"time says on which clock the heartbeat counts, and this block has no heartbeat; add one, e.g. heartbeat = \"10m\", or remove time.")
	}
	d.notBesideWindow(b, p, "report_by_exception")
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
	d.notBesideWindow(b, p, "alarm")
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

// Absence is a pipeline's absence block: per key, a silent record when a
// key sent nothing for Timeout, a resumed one when it sends again
// (operators/keyed.Absence).
type Absence struct {
	// Timeout is how long a key may stay quiet; > 0.
	Timeout time.Duration
	// Time is ProcessingTime (default: a silent sensor does not move event
	// time): the deadline is counted on the agent's clock from each
	// reading's arrival; or EventTime: on the readings' times, firing on
	// the watermark.
	Time      string
	DeclRange hcl.Range
}

// decodeAbsence decodes an absence block of p.
func (d *decoder) decodeAbsence(b *hcl.Block, p *Pipeline) *Absence {
	a, _ := d.content(b, []string{"timeout", "time"})
	ab := &Absence{DeclRange: b.DefRange}
	a.require("timeout")
	ab.Timeout = a.duration("timeout", -1) // -1: unset or invalid, already reported
	if ab.Timeout == 0 {
		d.errorf(a.rangeOf("timeout"), "Value out of range",
			"\"timeout\" is how long a key may stay quiet before it is reported silent; it must be more than zero, e.g. \"5m\".")
	}
	ab.Time = a.enum("time", []string{EventTime, ProcessingTime}, ProcessingTime)
	switch {
	case ab.Time == ProcessingTime && p.Order == OrderEventTime:
		d.errorf(p.OrderRange, "Event-time order with processing-time absence",
			"absence on processing time counts a key's silence from each reading's arrival, so it takes readings as they arrive: remove order, or set order = \"arrival\" (or time = \"event\" on absence).")
	case ab.Time == EventTime && p.From.Source != nil && p.From.Source.Timestamp == nil:
		d.errorf(a.rangeOf("time"), "Event-time absence without event time",
			"absence on event time counts on the readings' timestamps; give the source a timestamp block, or remove time (absence then runs on processing time).")
	case p.StateTTL > 0 && ab.Timeout > 0 && p.StateTTL <= ab.Timeout:
		d.errorf(p.StateTTLRange, "state_ttl not above the absence timeout",
			"A key's state expires state_ttl after its last reading, before its silence of %s could be noticed; make state_ttl longer than timeout.", ab.Timeout)
	}
	d.notBesideWindow(b, p, "absence")
	return ab
}

// notBesideWindow reports a per-key signal block (report_by_exception,
// alarm, absence) in a pipeline with a window: the block emits records
// of its own at readings, the window its results when the watermark passes
// its end, and neither would see what the other means to send.
func (d *decoder) notBesideWindow(b *hcl.Block, p *Pipeline, name string) {
	if p.Window != nil {
		d.errorf(b.DefRange, name+" with a window",
			"%s follows readings one by one and emits records of its own, and a window aggregates them; a pipeline has one or the other (only dedup may come before a window): remove the window, or put %s in a second pipeline reading the same source.", name, name)
	}
}

// KeyedBlock is one per-key block of a pipeline: exactly one field is
// set.
type KeyedBlock struct {
	ReportByException *ReportByException
	Alarm             *Alarm
	Absence           *Absence
	Dedup             *Dedup
}

// Name is the block as it is written: report_by_exception, alarm "NAME",
// absence or dedup.
func (b KeyedBlock) Name() string {
	switch {
	case b.ReportByException != nil:
		return "report_by_exception"
	case b.Alarm != nil:
		return "alarm " + strconv.Quote(b.Alarm.Name)
	case b.Absence != nil:
		return "absence"
	}
	return "dedup"
}

// decodeKeyedBlocks decodes p's per-key blocks in declaration order into
// p.Blocks (and the fields of each kind). A pipeline has at most one
// report_by_exception, absence and dedup, and alarms of distinct names;
// dedup runs before the others, which it feeds (declared after one, it is
// warned about).
func (d *decoder) decodeKeyedBlocks(blocks hcl.Blocks, p *Pipeline) {
	first := map[string]*hcl.Block{}
	for _, typ := range []string{"report_by_exception", "absence", "dedup"} {
		first[typ] = d.single(blocks, typ) // reports the second one
	}
	alarms := map[string]*Alarm{}
	signal := "" // the first block emitting records, as written
	for _, b := range blocks {
		if f, ok := first[b.Type]; ok && f != b {
			continue
		}
		var kb KeyedBlock
		switch b.Type {
		case "report_by_exception":
			p.ReportByException = d.decodeReportByException(b, p)
			kb.ReportByException = p.ReportByException
		case "alarm":
			a := d.decodeAlarm(b, p)
			if prev := alarms[a.Name]; prev != nil {
				d.errorf(b.LabelRanges[0], "Duplicate alarm name",
					"An alarm named %q is already declared at %s; each alarm of a pipeline needs a name of its own (it is in its records' ids).", a.Name, prev.DeclRange)
				continue
			}
			alarms[a.Name] = a
			p.Alarms = append(p.Alarms, a)
			kb.Alarm = a
		case "absence":
			p.Absence = d.decodeAbsence(b, p)
			kb.Absence = p.Absence
		case "dedup":
			p.Dedup = d.decodeDedupBlock(b)
			kb.Dedup = p.Dedup
			if signal != "" {
				// Before blocks were chained, dedup ran first wherever it
				// was declared, and it still does: a warning, so that
				// those configurations keep loading.
				d.warnf(b.DefRange, "dedup after "+signal,
					"dedup drops repeated readings before the map and before every other per-key block, whatever the order they are declared in: move this dedup block above %s to say so.", signal)
			}
		default:
			continue
		}
		p.Blocks = append(p.Blocks, kb)
		if signal == "" && kb.Dedup == nil {
			signal = kb.Name()
		}
	}
	for _, a := range p.Alarms {
		if (a.Name == reportBlockName && p.ReportByException != nil) || (a.Name == absenceBlockName && p.Absence != nil) {
			d.errorf(a.DeclRange, "Alarm named "+a.Name,
				"The records of the %s block of this pipeline have %q in their ids, as this alarm's would; give the alarm another name.", a.Name, a.Name)
		}
	}
	if len(p.Alarms) == 0 {
		return
	}
	for _, m := range p.Map {
		if slices.Contains(AlarmFields, m.Name) {
			d.errorf(m.Range, "Map field named "+m.Name,
				"The records of an alarm carry %s; rename this map field.", quoteList(AlarmFields))
		}
	}
}

// The block names in the ids of report_by_exception's and absence's
// records.
const (
	reportBlockName  = "report_by_exception"
	absenceBlockName = "absence"
)

// HasKeyedBlocks reports whether p has a per-key block
// (report_by_exception, alarm, absence, dedup).
func (p *Pipeline) HasKeyedBlocks() bool { return len(p.Blocks) > 0 }

// Keyed reports whether p keeps per-key state in its keyed subtasks: it
// calls a per-key function or has a per-key block.
func (p *Pipeline) Keyed() bool { return p.HasKeyedBlocks() || p.UsesKeyedFunctions() }
