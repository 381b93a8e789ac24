package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state"
)

// region is a failover region (Flink's term): pipelines that share a
// source (read or control) or a sink, with those sources and sinks. A
// failure inside a region — a sink that keeps failing, a panic caught at a
// stage boundary, a state store error, a record that cannot even be
// dead-lettered — restarts only that region from the last completed
// checkpoint: its pipelines' state and watermarks, its sources rewound to
// their positions in it, its transactional sinks recovered to it. Pipelines
// that share a source must restart together, since the source has one
// position; sharing a sink ties them because the sink's epochs hold
// everyone's output.
type region struct {
	name     string
	pipes    []int    // indexes into Agent.pipelines
	sources  []string // source names
	sinks    []string // sink names
	strategy *restartStrategy
	restarts int
	gen      int                // incremented by each restart; failures of older ones are stale
	counters []*metrics.Counter // eddy_pipeline_restarts_total of each pipeline
}

// failover restarts a failed region while the others run on. It owns the
// regions and the channel their failures arrive on; the pipelines, sources
// and sinks it stops and rebuilds are the agent's (under a.mu where the
// admin endpoint reads them). Its methods run on the agent's run goroutine,
// except the failure callbacks route installs, which any goroutine calls.
type failover struct {
	a       *Agent
	regions []*region
	// failed receives failures inside regions, at most one queued per
	// restart (route).
	failed chan regionFailure
	// limits are the regions whose restart strategy gave up.
	limits restartLimits
}

// regionFailure is a failure reported inside region r.
type regionFailure struct {
	r   *region
	gen int
	err error
}

// inheritRestarts starts every region's restart strategy where the
// run-level one stands: a run that failed as a whole (a region failing as
// its input ended, too late to restart it alone) spends the same attempts
// as a region restart, so a persistent failure gives up after the
// configured attempts, whichever way it recurs.
func (fo *failover) inheritRestarts(s *restartStrategy, restarts int) {
	for _, r := range fo.regions {
		*r.strategy = s.clone()
		r.restarts = restarts
	}
}

// carryRestarts is inheritRestarts' other half, after a run: the run-level
// strategy takes the state of the region that restarted most, and the
// restart count goes on from it.
func (fo *failover) carryRestarts(s *restartStrategy, restarts int) int {
	for _, r := range fo.regions {
		if r.restarts > restarts {
			restarts = r.restarts
			*s = r.strategy.clone()
		}
	}
	return restarts
}

// newFailover groups a's pipelines into regions: the connected components
// of "shares a source or a sink".
func newFailover(a *Agent) *failover {
	fo := &failover{a: a, failed: make(chan regionFailure, 16)}
	n := len(a.pipelines)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	owner := map[string]int{} // "source/x" or "sink/y" → first pipeline using it
	link := func(i int, part string) {
		if j, ok := owner[part]; ok {
			parent[find(i)] = find(j)
			return
		}
		owner[part] = i
	}
	for i, p := range a.pipelines {
		for _, part := range pipelineParts(p) {
			link(i, part)
		}
	}
	byRoot := map[int]*region{}
	for i, p := range a.pipelines {
		root := find(i)
		r := byRoot[root]
		if r == nil {
			r = &region{strategy: &restartStrategy{cfg: a.cfg.Restart}}
			byRoot[root] = r
			fo.regions = append(fo.regions, r)
		}
		r.pipes = append(r.pipes, i)
		for _, part := range pipelineParts(p) {
			kind, name, _ := strings.Cut(part, "/")
			switch {
			case kind == "source" && !slices.Contains(r.sources, name):
				r.sources = append(r.sources, name)
			case kind == "sink" && !slices.Contains(r.sinks, name):
				r.sinks = append(r.sinks, name)
			}
		}
	}
	for _, r := range fo.regions {
		var names []string
		for _, i := range r.pipes {
			p := a.pipelines[i]
			names = append(names, p.name)
			r.counters = append(r.counters, a.metrics.GetOrCreateCounter(fmt.Sprintf(`eddy_pipeline_restarts_total{pipeline=%q}`, p.name)))
		}
		r.name = strings.Join(names, ",")
		fo.route(r)
	}
	return fo
}

// pipelineParts lists the sources and sinks pipeline p uses, as "source/name" and
// "sink/name".
func pipelineParts(p *pipeline) []string {
	pc := p.cfg
	out := []string{"source/" + pc.From.Source.Name}
	if pc.Control != nil {
		out = append(out, "source/"+pc.Control.Source.Name)
	}
	for _, ref := range pc.To {
		out = append(out, "sink/"+ref.Sink.Name)
	}
	for _, ref := range []*config.SinkRef{pc.LateOutput, pc.DeadLetter} {
		if ref != nil {
			out = append(out, "sink/"+ref.Sink.Name)
		}
	}
	return out
}

// route makes failures inside region r report to r.
func (fo *failover) route(r *region) {
	a := fo.a
	gen := r.gen
	fail := func(err error) {
		select {
		case fo.failed <- regionFailure{r: r, gen: gen, err: err}:
		default: // failures are already queued; one restart serves them
		}
	}
	for _, i := range r.pipes {
		a.pipelines[i].fatal = fail
	}
	for _, name := range r.sinks {
		a.sinks[name].fatal = fail
	}
}

// errGaveUp marks the error of a region whose restart strategy gave up:
// the agent exits non-zero rather than restarting everything.
var errGaveUp = errors.New("restart strategy gives up")

// restart handles failure f: it stops the failed region, waits the
// strategy's delay, rebuilds it, restores its part of the newest completed
// checkpoint and starts it, while the other regions keep running. It
// returns an error wrapping errGaveUp when the strategy gives up (or the
// region cannot be rebuilt and the strategy then gives up).
func (fo *failover) restart(ctx context.Context, f regionFailure, srcCtx context.Context, srcWG, pipeWG *sync.WaitGroup) error {
	a := fo.a
	r := f.r
	if f.gen != r.gen {
		return nil // from a generation already restarted
	}
	// Free space is looked at before the region stops: stopping may
	// remove files (uncommitted parts) and blur what the failure saw.
	short, full := disk.ShortageOf(f.err, a.cfg.Agent.DataDir)
	fo.stop(r, f.err)
	for {
		if full {
			// A full file system is waited out, not counted by the
			// strategy; any other failure, ENOSPC from a device or a
			// quota included, goes to the strategy below.
			a.diskHolds.WaitRegion(ctx, a.log, r.name, short, f.err)
			if f.err = fo.start(r, srcCtx, srcWG, pipeWG); f.err == nil {
				fo.limits.setUp(r.name)
				a.log.Info("pipelines restarted", "pipelines", r.name, "restarts", r.restarts)
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%w: pipelines %s could not restart while stopping: %w", errGaveUp, r.name, f.err)
			}
			a.log.Error("restarting pipelines failed", "pipelines", r.name, "err", f.err)
			short, full = disk.ShortageOf(f.err, a.cfg.Agent.DataDir)
			continue
		}
		delay, giveUp := fo.nextRestart(r, a.clk.monoMs(), rand.Float64(), f.err)
		if giveUp {
			a.log.Error("restart strategy gives up: exiting", "pipelines", r.name, "strategy", a.cfg.Restart.Strategy, "err", f.err)
			return fmt.Errorf("%w: pipelines %s: %w", errGaveUp, r.name, f.err)
		}
		r.restarts++
		for _, c := range r.counters {
			c.Inc()
		}
		a.log.Warn("pipelines failed: restarting from the last checkpoint", "pipelines", r.name, "in", delay,
			"restarts", r.restarts, "strategy", a.cfg.Restart.Strategy, "err", f.err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			// Stopping: start the region at once, so that shutdown (and
			// its final checkpoint) finds every region running.
		}
		err := fo.start(r, srcCtx, srcWG, pipeWG)
		if err == nil {
			fo.limits.setUp(r.name)
			a.log.Info("pipelines restarted", "pipelines", r.name, "restarts", r.restarts)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: pipelines %s could not restart while stopping: %w", errGaveUp, r.name, err)
		}
		// Nothing of the region runs: try again as the strategy allows.
		f.err = err
		short, full = disk.ShortageOf(err, a.cfg.Agent.DataDir)
		a.log.Error("restarting pipelines failed", "pipelines", r.name, "err", err)
	}
}

// stop stops region r's readers, pipelines and sinks, without
// draining: what they held is replayed from the checkpoint. Checkpoints are
// suspended until start.
func (fo *failover) stop(r *region, reason error) {
	a := fo.a
	var srcs []*sourceRunner
	for _, name := range r.sources {
		srcs = append(srcs, a.sources[name])
	}
	var txs []*sinkRunner
	for _, name := range r.sinks {
		if s := a.sinks[name]; s.tx != nil {
			txs = append(txs, s)
		}
	}
	a.ckpt.changeRegions(regionChange{suspend: true, reason: fmt.Errorf("checkpoint: pipelines %s restarting: %w", r.name, reason),
		sources: srcs, txSinks: txs})
	for _, s := range srcs {
		s.stop()
	}
	for _, i := range r.pipes {
		<-a.pipelines[i].done
	}
	for _, name := range r.sinks {
		a.sinks[name].closeWhenProducersDone()
	}
	a.mu.Lock()
	for _, name := range r.sinks {
		delete(a.sinks, name) // closed: shutdown must not close it again
	}
	a.mu.Unlock()
	// Snapshot writes of the aborted checkpoint may still read the state.
	a.ckpt.writers.Wait()
	a.mu.Lock()
	for _, i := range r.pipes {
		for _, st := range a.pipelines[i].subtasks {
			if st.backend == nil {
				continue
			}
			_ = st.backend.Close()
			a.backends = slices.DeleteFunc(a.backends, func(b state.Backend) bool { return b == st.backend })
		}
	}
	a.mu.Unlock()
}

// start rebuilds region r from the configuration, restores its part
// of the newest completed checkpoint and starts it.
func (fo *failover) start(r *region, srcCtx context.Context, srcWG, pipeWG *sync.WaitGroup) (err error) {
	a := fo.a
	var fresh []*pipeline
	defer func() {
		if err != nil {
			fo.discard(r, fresh)
		}
	}()
	if err := fo.build(r, &fresh); err != nil {
		return err
	}
	r.gen++
	fo.route(r)
	ck := a.ckpt
	var txs []*sinkRunner
	for _, name := range r.sinks {
		s := a.sinks[name]
		s.ckpt = ck
		if s.tx != nil {
			txs = append(txs, s)
		}
	}
	var srcs []*sourceRunner
	for _, name := range r.sources {
		s := a.sources[name]
		s.acks = ck.send
		srcs = append(srcs, s)
	}
	for _, p := range fresh {
		p.ckpt = ck
	}

	var restored uint64
	sel, err := ck.store.SelectRestore("")
	for _, sk := range sel.Skipped {
		a.log.Warn("checkpoint skipped: it does not verify", "id", sk.ID, "reason", sk.Reason)
	}
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		a.log.Info("no checkpoint to restore: the pipelines start empty", "pipelines", r.name)
	case err != nil:
		return fmt.Errorf("agent: restore: %w", err)
	default:
		m := sel.Manifest
		for _, p := range fresh {
			if err := a.restorer.restorePipeline(sel, p); err != nil {
				return err
			}
		}
		mine := map[string]*sourceRunner{}
		for _, name := range r.sources {
			mine[name] = a.sources[name]
		}
		rewind(m, mine)
		restored = m.ID
		a.log.Info("restored checkpoint", "id", m.ID, "pipelines", r.name, "positions", m.SourcePositions)
	}
	for _, s := range txs {
		if err := s.tx.Recover(restored); err != nil {
			return fmt.Errorf("agent: sink %q: recover: %w", s.name, err)
		}
	}
	for _, name := range r.sinks {
		go a.sinks[name].run()
	}
	for _, p := range fresh {
		p.start(pipeWG)
	}
	for _, s := range srcs {
		s.start(srcCtx, a.log, srcWG)
	}
	ck.changeRegions(regionChange{sources: srcs, txSinks: txs})
	return nil
}

// build creates region r's sinks and pipelines afresh (fresh gets
// each pipeline as it is made) and resets its sources.
func (fo *failover) build(r *region, fresh *[]*pipeline) error {
	a := fo.a
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range r.sources {
		a.sources[name].reset()
	}
	for _, name := range r.sinks {
		delete(a.sinks, name) // created again by newPipeline
	}
	for _, i := range r.pipes {
		pl, diags := compile(a.cfg, a.pipelines[i].cfg)
		if diags.HasErrors() {
			return fmt.Errorf("agent: pipeline %q: %s", pl.cfg.Name, diags.Error())
		}
		p, err := a.newPipeline(pl)
		if p != nil {
			*fresh = append(*fresh, p)
		}
		if err != nil {
			return err
		}
	}
	for k, i := range r.pipes {
		a.pipelines[i] = (*fresh)[k]
	}
	return nil
}

// discard closes what a failed build or restore opened, so the
// next attempt starts clean. Nothing of it was started.
func (fo *failover) discard(r *region, fresh []*pipeline) {
	a := fo.a
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range r.sinks {
		s, ok := a.sinks[name]
		if !ok {
			continue
		}
		if s.tx != nil {
			_ = s.tx.Close()
		} else if s.plain != nil {
			_ = s.plain.Close()
		}
		delete(a.sinks, name) // shutdown must not wait for it
	}
	for _, name := range r.sources {
		close(a.sources[name].drained) // never started: nothing to forward
		a.sources[name].stopped = true
	}
	for _, p := range fresh {
		for _, st := range p.subtasks {
			if st.backend != nil {
				_ = st.backend.Close()
				a.backends = slices.DeleteFunc(a.backends, func(b state.Backend) bool { return b == st.backend })
			}
		}
	}
}
