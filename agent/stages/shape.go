package stages

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
)

// StateShape is the JSON of the state shape of the plan's pipeline,
// whose configuration text is src, as its checkpoints record it; nil when
// the pipeline keeps no state (no window, no per-key functions).
func (pl *Plan) StateShape(src []byte) []byte {
	if pl.window == nil && pl.keyed == nil {
		return nil
	}
	b, _ := json.Marshal(pipelineShape(src, pl.cfg)) // strings only: cannot fail
	return b
}

// CheckRestore is CheckRestore of checkpoint m for the plan's pipeline,
// whose configuration text is src.
func (pl *Plan) CheckRestore(src []byte, m *checkpoint.Manifest, allowNonRestored bool) RestoreVerdict {
	return CheckRestore(m, pl.cfg.Name, pl.StateShape(src), pl.parallelism, allowNonRestored)
}

// stateShape is what a pipeline's keyed state depends on: its window, key,
// aggregates and source. A checkpoint records it per pipeline (manifest
// extra "shape/<pipeline>"), so that a restart with a configuration that
// changed one of them does not read state it would misinterpret.
type stateShape struct {
	Window     string   `json:"window"`
	Key        string   `json:"key"`
	Source     string   `json:"source"`
	Aggregates []string `json:"aggregates"`
	// Keyed is the per-key function calls and the order (keyedShape);
	// omitted when empty, so checkpoints of pipelines without them compare
	// as before.
	Keyed string `json:"keyed,omitempty"`
	// Filter and Map are recorded only to name their change (validate,
	// the restore's log): the state holds aggregates of readings already
	// filtered and mapped, so it restores under new ones. Nil in
	// checkpoints of builds that did not record them: unknown, not empty.
	Filter *string   `json:"filter,omitempty"`
	Map    *[]string `json:"map,omitempty"`
}

// pipelineShape returns the state shape of p, whose configuration source is
// src.
func pipelineShape(src []byte, p *config.Pipeline) stateShape {
	sh := stateShape{Window: windowShape(p.Window), Key: exprText(src, p.Key), Source: p.From.Source.Name, Keyed: keyedShape(src, p)}
	for _, a := range p.Aggregates {
		sh.Aggregates = append(sh.Aggregates, fmt.Sprintf("%s = %s(%s) q=%v", a.Name, a.Func, exprText(src, a.Arg), a.Q))
	}
	filter := exprText(src, p.Filter)
	var fields []string
	for _, f := range p.Map {
		fields = append(fields, f.Name+" = "+exprText(src, f.Expr))
	}
	if fields == nil {
		fields = []string{}
	}
	sh.Filter, sh.Map = &filter, &fields
	return sh
}

// differs names the first part of sh that differs from o ("the window",
// "the key", "the source", "the aggregates"), or returns "".
func (sh stateShape) differs(o stateShape) string {
	switch {
	case sh.Window != o.Window:
		return "the window"
	case sh.Key != o.Key:
		return "the key"
	case sh.Source != o.Source:
		return "the source"
	case !slices.Equal(sh.Aggregates, o.Aggregates):
		return "the aggregates"
	case sh.Keyed != o.Keyed:
		return "the per-key functions"
	}
	return ""
}

func shapeExtraKey(pipeline string) string { return "shape/" + pipeline }

func windowShape(w *config.Window) string {
	if w == nil {
		return ""
	}
	return fmt.Sprintf("%s %s %v %v %v %v %d %d %v %v %d", w.Kind, w.Time, w.Size, w.Slide, w.Offset, w.Gap,
		w.Count, w.CountSlide, w.AllowedLateness, w.EarlyEvery, w.TriggerCount)
}

// exprText is the source text of e, with blanks trimmed.
func exprText(src []byte, e hcl.Expression) string {
	if e == nil {
		return ""
	}
	r := e.Range()
	if r.Start.Byte < 0 || r.End.Byte > len(src) || r.Start.Byte > r.End.Byte {
		return fmt.Sprintf("%T@%v", e, r)
	}
	return strings.TrimSpace(string(src[r.Start.Byte:r.End.Byte]))
}

// ShapeChange is one part of a pipeline's configuration that differs
// between the state shape a checkpoint recorded and the pipeline's now.
type ShapeChange struct {
	// Part is "window", "key", "source", "aggregates", "per-key
	// functions", "filter" or "map".
	Part string
	// Detail says what changed in it, e.g. "max_temp added" or
	// "size 10s → 1m0s"; "" when the record does not tell.
	Detail string
	// Kept: the state does not depend on the part (filter, map), so it
	// restores.
	Kept bool
}

// String is e.g. `aggregates changed (max_temp added)`.
func (c ShapeChange) String() string {
	if c.Detail == "" {
		return c.Part + " changed"
	}
	return c.Part + " changed (" + c.Detail + ")"
}

// changes lists every part that differs between sh, recorded by a
// checkpoint, and now: those the state depends on first, in differs'
// order, then filter and map.
func (sh stateShape) changes(now stateShape) []ShapeChange {
	var out []ShapeChange
	add := func(part, detail string, kept bool) {
		out = append(out, ShapeChange{Part: part, Detail: detail, Kept: kept})
	}
	if sh.Window != now.Window {
		add("window", windowChange(sh.Window, now.Window), false)
	}
	if sh.Key != now.Key {
		add("key", arrow(sh.Key, now.Key), false)
	}
	if sh.Source != now.Source {
		add("source", arrow(sh.Source, now.Source), false)
	}
	if !slices.Equal(sh.Aggregates, now.Aggregates) {
		add("aggregates", namedChange(sh.Aggregates, now.Aggregates), false)
	}
	if sh.Keyed != now.Keyed {
		add("per-key functions", "", false)
	}
	if sh.Filter != nil && now.Filter != nil && *sh.Filter != *now.Filter {
		add("filter", arrow(*sh.Filter, *now.Filter), true)
	}
	if sh.Map != nil && now.Map != nil && !slices.Equal(*sh.Map, *now.Map) {
		add("map", namedChange(*sh.Map, *now.Map), true)
	}
	return out
}

// arrow is "old → new", an empty side "none".
func arrow(old, now string) string {
	if old == "" {
		old = "none"
	}
	if now == "" {
		now = "none"
	}
	return old + " → " + now
}

// windowFields name the fields of windowShape's string, in its order.
var windowFields = []string{"kind", "time", "size", "slide", "offset", "gap", "count", "count_slide",
	"allowed_lateness", "early_every", "trigger_count"}

// windowChange names the fields that differ between two windowShape
// strings, e.g. "size 10s → 1m0s".
func windowChange(old, now string) string {
	switch {
	case old == "":
		return "added"
	case now == "":
		return "removed"
	}
	of, nf := strings.Fields(old), strings.Fields(now)
	if len(of) != len(windowFields) || len(nf) != len(windowFields) {
		return ""
	}
	var diffs []string
	for i, name := range windowFields {
		if of[i] != nf[i] {
			diffs = append(diffs, name+" "+of[i]+" → "+nf[i])
		}
	}
	return strings.Join(diffs, ", ")
}

// namedChange compares two lists of "name = definition" (aggregates, map
// fields) by name: "max_temp added", "n removed", "avg_temp: avg(event.t)
// → max(event.t)", or "reordered".
func namedChange(old, now []string) string {
	split := func(list []string) ([]string, map[string]string) {
		var names []string
		defs := map[string]string{}
		for _, e := range list {
			name, def, _ := strings.Cut(e, " = ")
			names = append(names, name)
			defs[name] = strings.TrimSuffix(def, " q=0")
		}
		return names, defs
	}
	oldNames, oldDefs := split(old)
	nowNames, nowDefs := split(now)
	var diffs []string
	for _, n := range nowNames {
		if d, ok := oldDefs[n]; !ok {
			diffs = append(diffs, n+" added")
		} else if d != nowDefs[n] {
			diffs = append(diffs, n+": "+d+" → "+nowDefs[n])
		}
	}
	for _, n := range oldNames {
		if _, ok := nowDefs[n]; !ok {
			diffs = append(diffs, n+" removed")
		}
	}
	if diffs == nil {
		return "reordered"
	}
	return strings.Join(diffs, ", ")
}
