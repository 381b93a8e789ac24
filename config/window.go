package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Window kinds, the label of a window block.
const (
	Tumbling = "tumbling"
	Sliding  = "sliding"
	Session  = "session"
	Count    = "count"
	Global   = "global"
)

// Time domains of a time window.
const (
	EventTime      = "event"
	ProcessingTime = "processing"
)

var windowKinds = []string{Tumbling, Sliding, Session, Count, Global}

// windowParams lists the arguments each kind accepts; the rest are errors.
var windowParams = map[string][]string{
	Tumbling: {"time", "size", "offset", "allowed_lateness", "early_every", "trigger_count"},
	Sliding:  {"time", "size", "slide", "offset", "allowed_lateness", "early_every", "trigger_count"},
	Session:  {"time", "gap", "allowed_lateness", "early_every", "trigger_count"},
	Count:    {"count", "count_slide"},
	Global:   {"early_every", "trigger_count"},
}

var windowAttrs = []string{"time", "size", "slide", "offset", "gap", "count", "count_slide", "allowed_lateness", "early_every", "trigger_count"}

// Window is a window block. Fields a kind does not use are zero.
type Window struct {
	// Kind is Tumbling, Sliding, Session, Count or Global.
	Kind string
	// Time is EventTime or ProcessingTime for tumbling, sliding and session
	// windows (default: event time when the source has a timestamp), "" for
	// count and global windows.
	Time string
	// Size (tumbling, sliding) and Slide (sliding) are positive; Offset is in
	// (−Size, Size) for tumbling and (−Slide, Slide) for sliding windows, as
	// Flink requires (abs(offset) < size, or slide). Offsets o and o + Size
	// (o + Slide) give the same windows.
	Size, Slide, Offset time.Duration
	// Gap is the session gap, positive.
	Gap time.Duration
	// Count and CountSlide (0 = tumbling) are in readings.
	Count, CountSlide int64
	// AllowedLateness keeps event-time windows open for late readings.
	AllowedLateness time.Duration
	// EarlyEvery fires early every so much processing time; 0 is never.
	EarlyEvery time.Duration
	// TriggerCount fires every so many readings; 0 is never.
	TriggerCount int64
	DeclRange    hcl.Range
}

// decodeWindow decodes a window block of a pipeline reading from src (nil
// when from did not resolve).
func (d *decoder) decodeWindow(b *hcl.Block, src *Source) *Window {
	a, _ := d.content(b, windowAttrs)
	kind := b.Labels[0]
	w := &Window{Kind: kind, DeclRange: b.DefRange}
	allowed, ok := windowParams[kind]
	if !ok {
		d.errorf(b.LabelRanges[0], "Unknown window kind", "There is no %q window; use one of %s.%s", kind, quoteList(windowKinds), didYouMean(kind, windowKinds))
		return nil
	}
	for _, at := range sortedAttrs(a.m) {
		if !contains(allowed, at.Name) {
			d.errorf(at.NameRange, "Argument does not apply", "A %s window does not use %q; it takes %s.", kind, at.Name, quoteList(allowed))
		}
	}
	positive := func(name string) time.Duration {
		v := a.duration(name, 0)
		if a.has(name) && v == 0 {
			d.errorf(a.rangeOf(name), "Value out of range", "%q must be positive; %s.", name, durationHint)
		}
		return v
	}
	switch kind {
	case Tumbling:
		a.require("size")
		w.Size, w.Offset = positive("size"), a.signedDuration("offset", 0)
		d.offsetInRange(a, w.Offset, w.Size, "size")
	case Sliding:
		a.require("size", "slide")
		w.Size, w.Slide, w.Offset = positive("size"), positive("slide"), a.signedDuration("offset", 0)
		d.offsetInRange(a, w.Offset, w.Slide, "slide")
	case Session:
		a.require("gap")
		w.Gap = positive("gap")
	case Count:
		a.require("count")
		w.Count = a.integer("count", 1, 1, 1<<62)
		w.CountSlide = a.integer("count_slide", 0, 1, 1<<62)
	case Global:
		if !a.has("trigger_count") && !a.has("early_every") {
			d.errorf(b.DefRange, "Global window never fires", "A global window needs trigger_count or early_every to emit results.")
		}
	}
	if kind == Tumbling || kind == Sliding || kind == Session {
		def := ProcessingTime
		if src != nil && src.Timestamp != nil {
			def = EventTime
		}
		w.Time = a.enum("time", []string{EventTime, ProcessingTime}, def)
		if w.Time == EventTime && src != nil && src.Timestamp == nil {
			d.errorf(a.rangeOf("time"), "Event time without timestamp",
				"Source %q has no timestamp block, so its readings carry no event time; add timestamp { field = \"ts\" } to the source or use time = \"processing\".", src.Name)
		}
		w.AllowedLateness = a.duration("allowed_lateness", 0)
		if w.Time == ProcessingTime && w.AllowedLateness > 0 {
			d.errorf(a.rangeOf("allowed_lateness"), "Lateness without event time", "Processing-time windows have no late readings; remove allowed_lateness or use time = \"event\".")
		}
	}
	w.EarlyEvery = a.duration("early_every", 0)
	w.TriggerCount = a.integer("trigger_count", 0, 1, 1<<62)
	return w
}

// offsetInRange reports an offset outside (−period, period), period being
// the window's size or slide (named by what), with the offset in range that
// gives the same windows.
func (d *decoder) offsetInRange(a attrs, offset, period time.Duration, what string) {
	if period <= 0 || (offset < period && offset > -period) {
		return
	}
	same := offset % period
	if same < 0 {
		same += period
	}
	d.errorf(a.rangeOf("offset"), "Value out of range", "\"offset\" must be more than -%[1]s and less than %[1]s (%[2]s); offset = %[3]q gives the same windows.",
		what, period, same.String())
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// String describes the window for logs, e.g. "tumbling(1m0s, event)".
func (w *Window) String() string {
	var parts []string
	switch w.Kind {
	case Tumbling:
		parts = append(parts, w.Size.String())
	case Sliding:
		parts = append(parts, w.Size.String(), w.Slide.String())
	case Session:
		parts = append(parts, "gap "+w.Gap.String())
	case Count:
		parts = append(parts, fmt.Sprint(w.Count))
	}
	if w.Time != "" {
		parts = append(parts, w.Time)
	}
	return w.Kind + "(" + strings.Join(parts, ", ") + ")"
}
