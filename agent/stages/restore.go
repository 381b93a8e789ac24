package stages

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window"
	"github.com/eddy-edge/eddy/window/watermark"
)

// Restore loads the pipeline's part of checkpoint sel, before Start: the
// state of the key groups each window subtask owns (so a checkpoint taken
// with another parallelism restores too), the in-flight records of an
// unaligned checkpoint, the control state, the resume state and the
// watermarks; the next snapshot of each subtask is full. State recorded
// under another state shape or window layout than the pipeline's is an
// error, unless allowNonRestored: then it is dropped, with a log line.
func (p *Pipeline) Restore(sel checkpoint.Selection, allowNonRestored bool) error {
	p.restoreFrom = p.stateIn(sel.Manifest)
	switch p.restoreFrom {
	case "":
	case noRestore: // a new definition: it starts empty
		p.epoch = sel.Manifest.ID + 1
		for _, st := range p.subtasks {
			st.lastSnap, st.epoch = 0, p.epoch
		}
		return nil
	default: // an old definition, whose state the checkpoint holds under the pipeline's name
		own := p.name
		p.name = p.restoreFrom
		defer func() { p.name = own }()
	}
	return p.restore(sel, allowNonRestored)
}

// stateIn is the name pipeline p's state has in checkpoint m: its own,
// or while a rollover starts (from a checkpoint taken before the change)
// the pipeline's for its old definition and none (noRestore) for its new
// one. Decided from m, so that a region restart restoring a checkpoint
// taken since decides anew.
func (p *Pipeline) stateIn(m *checkpoint.Manifest) string {
	rec, recorded := m.Extra[shapeExtraKey(p.name)]
	switch {
	case p.roll != nil && !recorded:
		return p.roll.Pipeline
	case p.roll == nil && (p.role.Fresh || p.role.Since != math.MinInt64 && p.role.Since != 0) && recorded && !bytes.Equal(rec, p.shape):
		return noRestore
	}
	return ""
}

func (p *Pipeline) restore(sel checkpoint.Selection, allowNonRestored bool) error {
	m := sel.Manifest
	if b, ok := m.Extra[maxTimeExtraKey(p.name)]; ok && len(b) == 8 {
		p.maxTime = int64(binary.BigEndian.Uint64(b))
	}
	files := m.PipelineFiles(p.name)
	var foreign string // a window state layout other than p's, found in the checkpoint
	entries := func(fn func(bucket, key, value []byte, deleted bool) error) error {
		for _, f := range files {
			err := sel.Store.ReadSnapshot(f, func(bucket, key, value []byte, deleted bool) error {
				if name, ok := otherWindowState(bucket, p.windowState); ok {
					if foreign == "" {
						foreign = name
					}
					if !allowNonRestored {
						return errWindowStateLayout
					}
					return nil // dropped
				}
				return fn(bucket, key, value, deleted)
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	drop, err := p.shapeChanged(m, allowNonRestored)
	if err != nil {
		return err
	}
	inPlace := false // the backends read the files where they are
	if !drop {
		if inPlace, err = p.restoreCold(sel.Store, files); err != nil {
			return fmt.Errorf("%w (checkpoint %d)", err, m.ID)
		}
	}
	for _, st := range p.subtasks {
		if st.backend == nil {
			continue
		}
		kgs, ok := state.SubtaskKeyGroups(st.index, len(p.subtasks), p.maxKeyGroups)
		if !ok {
			return fmt.Errorf("agent: pipeline %q: more subtasks than key groups", p.name)
		}
		var err error
		if !drop && !inPlace { // dropped keyed state: the subtask starts empty
			err = st.backend.Restore(entries, state.RestoreOptions{KeyGroups: &kgs})
		}
		if errors.Is(err, errWindowStateLayout) {
			return fmt.Errorf("agent: checkpoint %d holds pipeline %q's windows %s, and this build with this configuration keeps them %s: "+
				"restore it with the build and window configuration that wrote it, or start with --allow-non-restored-state to drop that state",
				m.ID, p.name, windowLayouts[foreign], windowLayouts[p.windowState])
		}
		if err != nil {
			return fmt.Errorf("agent: restore pipeline %q subtask %d from checkpoint %d: %w", p.name, st.index, m.ID, err)
		}
		st.lastSnap = 0 // the next snapshot is full
		st.epoch = m.ID + 1
	}
	p.epoch = m.ID + 1
	if foreign != "" {
		p.log.Warn("dropped window state of another layout (--allow-non-restored-state)", "pipeline", p.name,
			"checkpoint", m.ID, "layout", windowLayouts[foreign])
	}
	if b, ok := m.Extra[controlExtraKey(p.name)]; ok && p.control != nil {
		if err := p.control.Restore(b); err != nil {
			return fmt.Errorf("agent: restore pipeline %q control state: %w", p.name, err)
		}
		p.m.controlKeys.Store(int64(p.control.Keys()))
	}
	if err := p.restoreResume(m); err != nil {
		return err
	}
	if err := p.restoreSparkplug(m); err != nil {
		return err
	}
	if unaligned, err := p.restoreUnalignedWatermarks(m); unaligned || err != nil {
		return err
	}
	if wm, ok := restoredWatermark(m, p.name); ok {
		p.restoreWatermark(wm)
	}
	return nil
}

// RestoreVerdict is what restoring a checkpoint does to one pipeline,
// decided from the checkpoint's manifest alone (the state shape,
// watermarks and in-flight records it recorded for the pipeline) before
// any state is read. eddy run acts on it and eddy validate prints it, so
// the two cannot tell different stories.
type RestoreVerdict struct {
	Pipeline string
	// Stateful: the pipeline keeps state now (a window, per-key functions).
	Stateful bool
	// InCheckpoint: the checkpoint holds the pipeline (its state files or
	// its recorded shape); otherwise it is new and starts empty.
	InCheckpoint bool
	// Changes lists what differs from the shape the checkpoint recorded,
	// those the state depends on first (ShapeChange.Kept false).
	Changes []ShapeChange
	// Drop: the state depends on a change, and --allow-non-restored-state
	// drops it; the pipeline starts empty from the restored positions.
	Drop bool
	// Refusal is run's error refusing the restore; nil when it restores
	// (or drops).
	Refusal error
}

// CheckRestore decides what restoring checkpoint m does to pipeline name,
// whose state shape is shape (Plan.StateShape; nil when it keeps no
// state) and which runs parallelism subtasks.
func CheckRestore(m *checkpoint.Manifest, name string, shape []byte, parallelism int, allowNonRestored bool) RestoreVerdict {
	b := m.Extra[shapeExtraKey(name)]
	v := RestoreVerdict{Pipeline: name, Stateful: shape != nil, InCheckpoint: len(b) > 0 || len(m.PipelineFiles(name)) > 0}
	if len(b) > 0 && shape != nil {
		var was, now stateShape
		if err := json.Unmarshal(shape, &now); err != nil {
			v.Refusal = fmt.Errorf("agent: pipeline %q: %w", name, err)
			return v
		}
		if json.Unmarshal(b, &was) == nil {
			v.Changes = was.changes(now)
		} else {
			v.Changes = []ShapeChange{{Part: "configuration"}}
		}
		if parts, detail := dependedOn(v.Changes); parts != "" {
			if allowNonRestored {
				v.Drop = true
			} else {
				v.Refusal = fmt.Errorf("agent: checkpoint %d holds pipeline %q's state, and %s changed since%s, which that state depends on: "+
					"restore it with the configuration that wrote it, or start with --allow-non-restored-state to drop that state",
					m.ID, name, parts, detail)
				return v
			}
		}
	}
	v.Refusal = unalignedParallelism(m, name, parallelism)
	return v
}

// dependedOn names the changes the state depends on for run's refusal:
// "the window and the key", with their details " (window: size 10s →
// 1m0s; key: event.a → event.b)", or " (max_temp added)" for one; "" when
// the state carries over.
func dependedOn(changes []ShapeChange) (parts, detail string) {
	var names, details []string
	for _, c := range changes {
		if c.Kept {
			continue
		}
		names = append(names, "the "+c.Part)
		if c.Detail != "" {
			details = append(details, c.Part+": "+c.Detail)
		}
	}
	switch len(names) {
	case 0:
		return "", ""
	case 1:
		parts = names[0]
		if len(details) == 1 {
			detail = " (" + strings.TrimPrefix(details[0], strings.TrimPrefix(names[0], "the ")+": ") + ")"
		}
		return parts, detail
	}
	parts = strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	if len(details) > 0 {
		detail = " (" + strings.Join(details, "; ") + ")"
	}
	return parts, detail
}

// CheckRestore is CheckRestore of checkpoint m for p.
func (p *Pipeline) CheckRestore(m *checkpoint.Manifest, allowNonRestored bool) RestoreVerdict {
	return CheckRestore(m, p.name, p.shape, len(p.subtasks), allowNonRestored)
}

// shapeChanged reports whether p's keyed state is to be dropped because
// the state shape changed since checkpoint m (CheckRestore), and run's
// refusal otherwise.
func (p *Pipeline) shapeChanged(m *checkpoint.Manifest, allowNonRestored bool) (bool, error) {
	v := p.CheckRestore(m, allowNonRestored)
	if v.Drop {
		parts, detail := dependedOn(v.Changes)
		p.log.Warn("dropped the state of a pipeline whose configuration changed (--allow-non-restored-state)",
			"pipeline", p.name, "checkpoint", m.ID, "changed", parts+detail)
	}
	if v.Refusal != nil {
		return false, v.Refusal
	}
	return v.Drop, nil
}

// unalignedParallelism refuses a checkpoint in which some subtask of
// pipeline name took the barrier unaligned, taken with another
// parallelism: its in-flight records belong to the subtasks that stored
// them.
func unalignedParallelism(m *checkpoint.Manifest, name string, parallelism int) error {
	unaligned, taken := false, 0
	for k := range m.Extra {
		if strings.HasPrefix(k, "inflight/"+name+"/") {
			unaligned = true
		}
		if strings.HasPrefix(k, "watermark/"+name+"/") {
			taken++
		}
	}
	if !unaligned || taken == parallelism {
		return nil
	}
	return fmt.Errorf("agent: checkpoint %d of pipeline %q is unaligned (it holds in-flight records of %d subtasks); "+
		"restore it with parallelism %d, then take a savepoint (always aligned) to change it", m.ID, name, taken, taken)
}

// restoreUnalignedWatermarks restores the watermarks of a checkpoint in
// which some subtask of p took the barrier unaligned: subtasks were then
// at different watermarks, so each operator restarts at its own, replays
// its in-flight records and moves to its channel's watermark at the
// barrier; the prepare stage resumes at the newest of them, where it was
// at the barrier. This needs the parallelism the checkpoint was taken with.
func (p *Pipeline) restoreUnalignedWatermarks(m *checkpoint.Manifest) (bool, error) {
	channel := map[int]int64{}
	for k, v := range m.Extra {
		rest, ok := strings.CutPrefix(k, "inflight/"+p.name+"/")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(rest)
		wm, _, ok := decodeInflightExtra(v)
		if err != nil || !ok {
			return true, fmt.Errorf("agent: checkpoint %d: bad in-flight entry %q", m.ID, k)
		}
		channel[i] = wm
	}
	if len(channel) == 0 {
		return false, nil
	}
	if err := unalignedParallelism(m, p.name, len(p.subtasks)); err != nil {
		return true, err
	}
	top := int64(math.MinInt64)
	for _, st := range p.subtasks {
		b, ok := m.Extra[watermarkExtraKey(p.name, st.index)]
		if !ok || len(b) != 8 {
			continue
		}
		own := int64(binary.BigEndian.Uint64(b))
		top = max(top, own)
		if own != math.MinInt64 {
			st.task.AdvanceWatermark(own)
			st.task.TakeResults() // fired before the checkpoint
		}
		if cw, ok := channel[st.index]; ok {
			st.replayWM = cw
			top = max(top, cw)
		}
	}
	if top != math.MinInt64 {
		p.restoreGenerator(top)
	}
	return true, nil
}

// restoredWatermark is the pipeline's watermark at the checkpoint: every
// subtask had received the same broadcast before the barrier, so any
// subtask's value will do; take the largest.
func restoredWatermark(m *checkpoint.Manifest, pipeline string) (int64, bool) {
	prefix := "watermark/" + pipeline + "/"
	wm, ok := int64(math.MinInt64), false
	for k, v := range m.Extra {
		if strings.HasPrefix(k, prefix) && len(v) == 8 {
			if w := int64(binary.BigEndian.Uint64(v)); w > wm {
				wm, ok = w, true
			}
		}
	}
	return wm, ok && wm != math.MinInt64
}

// restoreWatermark puts the restored watermark back into the prepare
// stage's generator and every subtask's operator.
func (p *Pipeline) restoreWatermark(wm int64) {
	p.restoreGenerator(wm)
	for _, st := range p.subtasks {
		st.task.AdvanceWatermark(wm)
		st.task.TakeResults() // nothing is due: those timers fired before the checkpoint
	}
}

// restoreGenerator puts the prepare stage's watermark generator at wm.
func (p *Pipeline) restoreGenerator(wm int64) {
	switch g := p.wm.(type) {
	case *watermark.BoundedOutOfOrder:
		g.Observe(wm + p.bound + 1)
	case *punctuatedWatermark:
		g.mark(wm)
	case *inputWatermarks:
		for _, gen := range g.gens {
			gen.Observe(wm + p.bound + 1)
		}
	}
}

// Window state names: the window operator's state lives in the backend
// buckets "<name>/…", one name per layout, so that a checkpoint of one
// layout is never read as the other.
const (
	windowStatePerWindow = "window" // one state per (key, window)
	windowStatePanes     = "panes"  // one state per (key, pane): window.UsesPanes
)

// windowLayouts describes each layout for the error of a mismatch.
var windowLayouts = map[string]string{
	windowStatePerWindow: "as one state per window",
	windowStatePanes:     "in panes (a sliding window whose slide divides its size, without trigger_count or early_every)",
}

// errWindowStateLayout stops a restore that meets the other layout.
var errWindowStateLayout = errors.New("window state of another layout")

// windowStateName returns the state name of a window operator with spec.
func windowStateName(spec window.Spec) string {
	if window.UsesPanes(spec) {
		return windowStatePanes
	}
	return windowStatePerWindow
}

// otherWindowState reports whether bucket holds window state of a layout
// other than mine ("" for a pipeline without a window), and its name.
func otherWindowState(bucket []byte, mine string) (string, bool) {
	for _, name := range []string{windowStatePerWindow, windowStatePanes} {
		if name != mine && len(bucket) > len(name) && bucket[len(name)] == '/' && string(bucket[:len(name)]) == name {
			return name, true
		}
	}
	return "", false
}
