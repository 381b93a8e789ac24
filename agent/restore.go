package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/eddy-edge/eddy/agent/checkpointing"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/state/vfs"
	"github.com/eddy-edge/eddy/window"
	"github.com/eddy-edge/eddy/window/watermark"
)

// setupCheckpoints creates the coordinator and its tasks, then restores the
// newest checkpoint that verifies (or the one --from names), before any
// goroutine runs; when no local one verifies, the newest uploaded one that
// does, or it refuses to start empty (selectRestore). A restore that finds
// the disk full waits for space until ctx ends (disk.Holds.Rebuild).
func (a *Agent) setupCheckpoints(ctx context.Context) error {
	cc := a.cfg.Checkpoint
	store, err := checkpoint.OpenStore(vfs.Default, filepath.Join(a.cfg.Agent.DataDir, "checkpoints"))
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	var tasks []string
	var sources []*sourceRunner
	for _, s := range a.flow.sources {
		tasks = append(tasks, s.taskID())
		sources = append(sources, s)
	}
	for _, p := range a.flow.pipelines {
		for _, st := range p.subtasks {
			tasks = append(tasks, st.taskID(p.name))
		}
	}
	var txSinks []*sinkRunner
	for _, s := range a.flow.sinks {
		if s.tx != nil {
			tasks = append(tasks, s.taskID())
			txSinks = append(txSinks, s)
		}
	}
	coord, err := checkpoint.NewCoordinator(coordinatorConfig(a.cfg, tasks))
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	ckc := checkpointing.Config{Store: store, Retain: cc.Retain, Interval: cc.Interval, Timeout: cc.Timeout,
		MaxSavepoints: cc.MaxSavepoints, Log: a.log, MonoMs: a.clk.monoMs, Metrics: a.metrics,
		Sources: checkpointSources(sources), TxSinks: checkpointTxSinks(txSinks), InFlight: inflightSummary}
	if cc.Unaligned || cc.AlignedTimeout > 0 {
		ckc.Announce = a.flow.announce
	}
	ck := checkpointing.New(coord, ckc)
	for _, s := range sources {
		s.acks = ck.Send
	}
	for _, p := range a.flow.pipelines {
		p.ckpt = ck
	}
	for _, s := range a.flow.sinks {
		s.ckpt = ck
	}
	a.ckpt = ck
	a.flow.retained = retainedPositions{}
	ck.OnCompleted(func(done checkpoint.Completed) { a.flow.truncateIngest(store, done) })

	sel, err := a.restorer.selectRestore(ctx, store, a.flow.sources)
	var restored uint64
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		// Empty start; selectRestore said so and why.
	case errors.Is(err, errNotRestored) || ctx.Err() != nil:
		return err
	case err != nil:
		return fmt.Errorf("agent: restore: %w", err)
	default:
		rebuild := func() error { return a.restorer.restore(sel, a.flow.pipelines, a.flow.sources) }
		err := a.diskHolds.Rebuild(ctx, a.log, filepath.Join(a.cfg.Agent.DataDir, "state"), sel.Manifest.ID, rebuild, a.endpoint.startOnce)
		if err != nil {
			return err
		}
		a.restoredID = sel.Manifest.ID
		restored = sel.Manifest.ID
	}
	if err := coord.Restore(sel.NewestID); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	ck.CollectGarbage()
	for _, s := range txSinks {
		if err := s.tx.Recover(restored); err != nil {
			return fmt.Errorf("agent: sink %q: recover: %w", s.name, err)
		}
	}
	return nil
}

// coordinatorConfig is the checkpoint coordinator's configuration for the
// given tasks.
func coordinatorConfig(cfg *config.Config, tasks []string) checkpoint.Config {
	cc := cfg.Checkpoint
	ccfg := checkpoint.DefaultConfig(tasks...)
	ccfg.Interval, ccfg.MinPause, ccfg.Timeout = cc.Interval, cc.MinPause, cc.Timeout
	ccfg.TolerableFailures, ccfg.MaxChainRatio, ccfg.FullEvery = cc.TolerableFailures, cc.MaxChainRatio, cc.FullEvery
	ccfg.MergeChains, ccfg.MinMergeBase = true, checkpoint.DefaultMinMergeBase
	if cc.DebugAlwaysMerge {
		ccfg.MinMergeBase = 0
	}
	ccfg.ConfigFingerprint = cfg.Fingerprint()
	if cc.Mode == "at_least_once" {
		ccfg.Mode = checkpoint.AtLeastOnce
	}
	return ccfg
}

// restorer chooses the checkpoint a start restores (selectRestore,
// restoreselect.go), loads a checkpoint into pipelines that were just built
// and not started, and rewinds their sources to the checkpoint's positions:
// at start for every pipeline (restore), after a region restart for the
// region's (restorePipeline, rewind). It keeps nothing between restores;
// the pipelines and sources it is given are its caller's, and must not run
// while it restores them.
type restorer struct {
	log *slog.Logger
	cfg *config.Config // its upload block, to fetch an uploaded checkpoint
	// from is --from: the checkpoint to restore ("" for the newest).
	from string
	// allowNonRestored: see Options.AllowNonRestoredState.
	allowNonRestored bool
	// maxKeyGroups is agent { max_key_groups }, which maps key groups to
	// subtasks.
	maxKeyGroups int
}

// restore loads checkpoint sel into pipelines' state, watermarks and the
// positions of sources. State is mapped by pipeline name and key group, so
// a changed parallelism restores too.
func (r *restorer) restore(sel checkpoint.Selection, pipelines []*pipeline, sources map[string]*sourceRunner) error {
	m := sel.Manifest
	known := map[string]bool{}
	for _, p := range pipelines {
		known[p.name] = true
		if err := r.restorePipeline(sel, p); err != nil {
			return err
		}
	}
	for _, name := range m.Pipelines() {
		if !known[name] && !r.allowNonRestored {
			return fmt.Errorf("agent: checkpoint %d holds state of pipeline %q, which the configuration no longer has; "+
				"rename the pipeline back, or start with --allow-non-restored-state to drop that state", m.ID, name)
		}
	}
	rewind(m, sources)
	r.log.Info("restored checkpoint", "id", m.ID, "kind", m.Kind, "time", m.Time, "bytes", m.FullSize(),
		"pipelines", len(m.Pipelines()), "positions", m.SourcePositions)
	return nil
}

// rewind sets each of sources that checkpoint m has a position of to
// resume there. Only a replayable source (a file, or an ingest log) can
// resume at a position; the others start where they are.
func rewind(m *checkpoint.Manifest, sources map[string]*sourceRunner) {
	for name, s := range sources {
		if pos, ok := m.SourcePositions[name]; ok && (s.replayable || s.ilog != nil) {
			s.skipTo = pos
			s.pos.Store(pos)
		}
	}
}

// restorePipeline loads pipeline p's part of checkpoint sel: the state of
// its key groups, its control state and its watermark.
func (r *restorer) restorePipeline(sel checkpoint.Selection, p *pipeline) error {
	m := sel.Manifest
	files := m.PipelineFiles(p.name)
	var foreign string // a window state layout other than p's, found in the checkpoint
	entries := func(fn func(bucket, key, value []byte, deleted bool) error) error {
		for _, f := range files {
			err := sel.Store.ReadSnapshot(f, func(bucket, key, value []byte, deleted bool) error {
				if name, ok := otherWindowState(bucket, p.windowState); ok {
					if foreign == "" {
						foreign = name
					}
					if !r.allowNonRestored {
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
	drop, err := r.shapeChanged(m, p)
	if err != nil {
		return err
	}
	for _, st := range p.subtasks {
		if st.backend == nil {
			continue
		}
		kgs, ok := state.SubtaskKeyGroups(st.index, len(p.subtasks), r.maxKeyGroups)
		if !ok {
			return fmt.Errorf("agent: pipeline %q: more subtasks than key groups", p.name)
		}
		var err error
		if !drop { // dropped keyed state: the subtask starts empty
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
		r.log.Warn("dropped window state of another layout (--allow-non-restored-state)", "pipeline", p.name,
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
	if unaligned, err := p.restoreUnalignedWatermarks(m); unaligned || err != nil {
		return err
	}
	if wm, ok := restoredWatermark(m, p.name); ok {
		p.restoreWatermark(wm)
	}
	return nil
}

// shapeChanged compares the state shape checkpoint m recorded for p (if
// it recorded one: earlier builds did not) with p's. If they differ, the
// state would be misread: that refuses the restore, or, with
// --allow-non-restored-state, reports that p's keyed state is to be dropped.
func (r *restorer) shapeChanged(m *checkpoint.Manifest, p *pipeline) (bool, error) {
	b := m.Extra[shapeExtraKey(p.name)]
	if len(b) == 0 || p.shape == nil {
		return false, nil
	}
	var was, now stateShape
	if err := json.Unmarshal(p.shape, &now); err != nil {
		return false, fmt.Errorf("agent: pipeline %q: %w", p.name, err)
	}
	what := "its configuration"
	if json.Unmarshal(b, &was) == nil {
		if what = was.differs(now); what == "" {
			return false, nil
		}
	}
	if !r.allowNonRestored {
		return false, fmt.Errorf("agent: checkpoint %d holds pipeline %q's state, and %s changed since, which that state depends on: "+
			"restore it with the configuration that wrote it, rename the pipeline to start it afresh, "+
			"or start with --allow-non-restored-state to drop that state", m.ID, p.name, what)
	}
	r.log.Warn("dropped the state of a pipeline whose configuration changed (--allow-non-restored-state)",
		"pipeline", p.name, "checkpoint", m.ID, "changed", what)
	return true, nil
}

// restoreUnalignedWatermarks restores the watermarks of a checkpoint in
// which some subtask of p took the barrier unaligned: subtasks were then
// at different watermarks, so each operator restarts at its own, replays
// its in-flight records and moves to its channel's watermark at the
// barrier; the prepare stage resumes at the newest of them, where it was
// at the barrier. This needs the parallelism the checkpoint was taken with.
func (p *pipeline) restoreUnalignedWatermarks(m *checkpoint.Manifest) (bool, error) {
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
	taken := 0
	for k := range m.Extra {
		if strings.HasPrefix(k, "watermark/"+p.name+"/") {
			taken++
		}
	}
	if taken != len(p.subtasks) {
		return true, fmt.Errorf("agent: checkpoint %d of pipeline %q is unaligned (it holds in-flight records of %d subtasks); "+
			"restore it with parallelism %d, then take a savepoint (always aligned) to change it", m.ID, p.name, taken, taken)
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
func (p *pipeline) restoreWatermark(wm int64) {
	p.restoreGenerator(wm)
	for _, st := range p.subtasks {
		st.task.AdvanceWatermark(wm)
		st.task.TakeResults() // nothing is due: those timers fired before the checkpoint
	}
}

// restoreGenerator puts the prepare stage's watermark generator at wm.
func (p *pipeline) restoreGenerator(wm int64) {
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

// truncateIngest drops ingest-log segments that no retained checkpoint
// needs: everything at or below the oldest retained position of each
// source. Savepoints do not hold the log back; restoring an old one
// resumes from the oldest reading kept, and says so.
//
// A full log (ingest.Log.Full: its intake holds messages unacked) is
// truncated below the newest checkpoint's position instead. Keeping it for
// the older retained checkpoints would deadlock: the log frees space only
// when the oldest retained position moves, that takes retain more
// checkpoints past it, and with the intake held the pipelines run dry at
// the log's end, so those checkpoints would all hold the same position (or
// be skipped as idle). The newest checkpoint is the one a restart
// restores; an older one, restored only when the newer ones fail to
// verify, then resumes from the oldest reading kept, and says so.
func (df *dataflow) truncateIngest(store *checkpoint.Store, done checkpoint.Completed) {
	ids, err := store.ManifestIDs()
	if err != nil {
		df.log.Warn("ingest truncation skipped", "err", err)
		return
	}
	df.retained.note(done)
	oldest := df.retained.oldest(store, ids)
	for name, pos := range oldest {
		s, ok := df.sources[name]
		if !ok || s.ilog == nil {
			continue
		}
		below := pos + 1
		newest, id, ok := df.retained.newest(name)
		full := ok && newest > pos && s.ilog.Full()
		if full {
			below = newest + 1
		}
		first := s.ilog.FirstOffset()
		if err := s.ilog.Truncate(below); err != nil {
			df.log.Warn("ingest truncation failed", "source", name, "err", err)
			continue
		}
		if kept := s.ilog.FirstOffset(); full && kept > pos+1 && kept > first {
			df.log.Info("ingest log full: shrunk to what the newest checkpoint has not processed; older checkpoints would resume from the oldest reading kept",
				"source", name, "checkpoint", id, "position", newest, "first_kept", kept, "bytes", s.ilog.SizeBytes())
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
