package stages

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/eddy-edge/eddy/config"
)

// StateShapeChange names what changed between pipeline old, whose
// configuration text is oldSrc, and next, whose text is nextSrc, that the
// pipeline's state depends on ("the window", "the key", "the source",
// "the aggregates", "the per-key functions"), or returns "" when its state
// carries over. Expressions compare by their text.
func StateShapeChange(oldSrc []byte, old *config.Pipeline, nextSrc []byte, next *config.Pipeline) string {
	return pipelineShape(oldSrc, old).differs(pipelineShape(nextSrc, next))
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
}

// pipelineShape returns the state shape of p, whose configuration source is
// src.
func pipelineShape(src []byte, p *config.Pipeline) stateShape {
	sh := stateShape{Window: windowShape(p.Window), Key: exprText(src, p.Key), Source: p.From.Source.Name, Keyed: keyedShape(src, p)}
	for _, a := range p.Aggregates {
		sh.Aggregates = append(sh.Aggregates, fmt.Sprintf("%s = %s(%s) q=%v", a.Name, a.Func, exprText(src, a.Arg), a.Q))
	}
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
