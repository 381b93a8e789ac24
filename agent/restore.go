package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/eddy-edge/eddy/agent/checkpointing"
	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state/vfs"
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
	// The checkpoint is chosen first: the rollovers it starts or resumes
	// add the old definitions' instances, which are checkpoint tasks too.
	sel, selErr := a.restorer.selectRestore(ctx, store, a.flow.sources)
	var rolls rolloverPlan
	if selErr == nil {
		var configured []stages.RolloverVerdict
		now := a.clk.WallMs() // a rollover on processing time cuts after the restart
		for _, p := range a.flow.pipelines {
			configured = append(configured, p.CheckRollover(sel.Manifest, stages.BoundedSources(a.cfg), now))
		}
		rolls = planRollovers(sel.Manifest, configured, stages.BoundedSources(a.cfg), now, a.restorer.allowNonRestored)
		kept := rolls.keepPrevious(a.cfg, a.flow.src, sel.Manifest)
		if rolls.refusal != nil {
			return rolls.refusal
		}
		if err := a.flow.keep(kept, rolls); err != nil {
			return err
		}
		if added, aerr := a.flow.applyRollovers(rolls); aerr != nil {
			return aerr
		} else if added || len(kept) > 0 {
			// The old definitions are pipelines of their own regions.
			a.failover = newFailover(a)
			if a.inheritRestarts != nil {
				a.inheritRestarts(a.failover)
			}
		}
	}
	var tasks []string
	var sources []*sourceRunner
	for _, s := range a.flow.sources {
		tasks = append(tasks, s.taskID())
		sources = append(sources, s)
	}
	for _, p := range a.flow.pipelines {
		tasks = append(tasks, p.TaskIDs()...)
	}
	var txSinks []*sinkRunner
	for _, s := range a.flow.sinks {
		if s.isTask() {
			tasks = append(tasks, s.taskID())
		}
		if s.tx != nil {
			txSinks = append(txSinks, s)
		}
	}
	coord, err := checkpoint.NewCoordinator(coordinatorConfig(a.cfg, tasks))
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	ckc := checkpointing.Config{Store: store, Retain: cc.Retain, Interval: cc.Interval, Timeout: cc.Timeout,
		MaxSavepoints: cc.MaxSavepoints, Log: a.log, MonoMs: a.clk.MonoMs, Metrics: a.metrics,
		Sources: checkpointSources(sources), TxSinks: checkpointTxSinks(txSinks), InFlight: stages.InFlightSummary}
	if cc.Unaligned || cc.AlignedTimeout > 0 {
		ckc.Announce = a.flow.announce
	}
	ck := checkpointing.New(coord, ckc)
	for _, s := range sources {
		s.acks = ck.Send
	}
	for _, p := range a.flow.pipelines {
		p.SetCheckpoints(ck)
	}
	for _, s := range a.flow.sinks {
		s.ckpt = ck
	}
	a.ckpt = ck
	a.flow.retained = retainedPositions{}
	ck.OnCompleted(func(done checkpoint.Completed) { a.flow.truncateIngest(store, done) })

	var restored uint64
	switch err := selErr; {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		// Empty start; selectRestore said so and why.
	case errors.Is(err, errNotRestored) || ctx.Err() != nil:
		return err
	case err != nil:
		return fmt.Errorf("agent: restore: %w", err)
	default:
		rebuild := func() error { return a.restorer.restore(sel, a.flow.pipelines, a.flow.sources, rolls) }
		err := a.diskHolds.Rebuild(ctx, a.log, filepath.Join(a.cfg.Agent.DataDir, "state"), sel.Manifest.ID, rebuild, a.endpoint.startOnce)
		if err != nil {
			return err
		}
		a.restoredID = sel.Manifest.ID
		restored = sel.Manifest.ID
	}
	newest := sel.NewestID
	for _, s := range txSinks {
		if err := s.tx.Recover(restored); err != nil {
			return fmt.Errorf("agent: sink %q: recover: %w", s.name, err)
		}
		if v, ok := s.tx.(visibleAhead); ok && v.NewestCommitted() > newest {
			a.log.Warn("sink holds output committed after the restored checkpoint; the replay's copies of it are dropped",
				"sink", s.name, "restored", restored, "newest_committed", v.NewestCommitted())
			newest = v.NewestCommitted()
		}
	}
	if err := coord.Restore(newest); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	ck.CollectGarbage()
	return nil
}

// visibleAhead is a transactional sink that can hold output made visible
// under checkpoints after the one a start restored (the newer ones did not
// verify, or were lost with the device): checkpoint ids continue after its
// newest, so that no new epoch takes the name of output already visible.
type visibleAhead interface{ NewestCommitted() uint64 }

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
}

// restore loads checkpoint sel into pipelines' state, watermarks and the
// positions of sources. State is mapped by pipeline name and key group, so
// a changed parallelism restores too. What it does to each pipeline, and
// whether it refuses, is planRestore's decision, which eddy validate
// prints.
func (r *restorer) restore(sel checkpoint.Selection, pipelines []*stages.Pipeline, sources map[string]*sourceRunner, rolls rolloverPlan) error {
	m := sel.Manifest
	var verdicts []stages.RestoreVerdict
	for _, p := range pipelines {
		if rolls.handles(p.Name()) {
			verdicts = append(verdicts, stages.RestoreVerdict{Pipeline: p.Name(), Stateful: p.Stateful(), InCheckpoint: true})
			continue
		}
		verdicts = append(verdicts, p.CheckRestore(m, r.allowNonRestored))
	}
	for _, name := range rolls.known {
		verdicts = append(verdicts, stages.RestoreVerdict{Pipeline: name})
	}
	if plan := planRestore(m, verdicts, r.allowNonRestored); plan.refusal != nil {
		return plan.refusal
	}
	for _, p := range pipelines {
		if err := r.restorePipeline(sel, p); err != nil {
			return err
		}
	}
	rewind(m, sources)
	r.log.Info("restored checkpoint", "id", m.ID, "kind", m.Kind, "time", m.Time, "bytes", m.FullSize(),
		"pipelines", len(m.Pipelines()), "positions", m.SourcePositions)
	return nil
}

// restorePlan is what restoring a checkpoint does to every pipeline.
type restorePlan struct {
	// verdicts are the configuration's pipelines', in its order.
	verdicts []stages.RestoreVerdict
	// removed are the pipelines the checkpoint holds state of that the
	// configuration no longer has, sorted: their state is dropped with
	// --allow-non-restored-state, and refused without.
	removed []string
	// refusal is run's error refusing to start: the first pipeline's that
	// refuses, else the first removed one's; nil when run starts.
	refusal error
}

// planRestore decides what restoring checkpoint m does to the pipelines
// whose verdicts are given (stages.CheckRestore) and to those m holds that
// none of them is.
func planRestore(m *checkpoint.Manifest, verdicts []stages.RestoreVerdict, allowNonRestored bool) restorePlan {
	plan := restorePlan{verdicts: verdicts}
	known := map[string]bool{}
	for _, v := range verdicts {
		known[v.Pipeline] = true
		if plan.refusal == nil {
			plan.refusal = v.Refusal
		}
	}
	for _, name := range m.Pipelines() {
		if known[name] {
			continue
		}
		plan.removed = append(plan.removed, name)
		if plan.refusal == nil && !allowNonRestored {
			plan.refusal = fmt.Errorf("agent: checkpoint %d holds state of pipeline %q, which the configuration no longer has; "+
				"rename the pipeline back, or start with --allow-non-restored-state to drop that state", m.ID, name)
		}
	}
	return plan
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

// restorePipeline loads pipeline p's part of checkpoint sel
// (stages.Pipeline.Restore).
func (r *restorer) restorePipeline(sel checkpoint.Selection, p *stages.Pipeline) error {
	return p.Restore(sel, r.allowNonRestored)
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
