package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/agent/failover"
	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state"
)

// newFailover groups a's pipelines into failover regions.
func newFailover(a *Agent) *failover.Failover {
	descs := make([]failover.Pipeline, len(a.flow.pipelines))
	for i, p := range a.flow.pipelines {
		descs[i] = describePipeline(p)
	}
	fo := failover.New(descs, failover.Options{Restart: a.cfg.Restart, Log: a.log, Metrics: a.metrics, NowMs: a.clk.MonoMs})
	fo.Route(regionHost{a: a})
	return fo
}

// describePipeline names the sources pipeline p reads (from, control) and
// the sinks it writes (to, late_output, dead_letter).
func describePipeline(p *stages.Pipeline) failover.Pipeline {
	pc := p.Config()
	d := failover.Pipeline{Name: p.Name(), Sources: []string{pc.From.Source.Name}}
	if pc.Control != nil {
		d.Sources = append(d.Sources, pc.Control.Source.Name)
	}
	for _, ref := range pc.To {
		d.Sinks = append(d.Sinks, ref.Sink.Name)
	}
	for _, ref := range []*config.SinkRef{pc.LateOutput, pc.DeadLetter} {
		if ref != nil {
			d.Sinks = append(d.Sinks, ref.Sink.Name)
		}
	}
	return d
}

// regionHost is the agent as failover.Failover acts on it: the region's
// pipelines, sources and sinks (under a.flow.mu where the admin endpoint reads
// them), the checkpointer and the restorer. st is the running stages the
// restarted parts join; nil before run, when it only routes.
type regionHost struct {
	a  *Agent
	st *started
}

// Route implements failover.Host.
func (h regionHost) Route(r failover.Region, fail func(error)) {
	a := h.a
	for _, i := range r.Pipes {
		a.flow.pipelines[i].SetFail(fail)
	}
	for _, name := range r.Sinks {
		a.flow.sinks[name].fatal = fail
	}
}

// Shortage implements failover.Host.
func (h regionHost) Shortage(err error) (disk.Shortage, bool) {
	return disk.ShortageOf(err, h.a.cfg.Agent.DataDir)
}

// WaitForSpace implements failover.Host.
func (h regionHost) WaitForSpace(ctx context.Context, r failover.Region, short disk.Shortage, cause error) {
	h.a.diskHolds.WaitRegion(ctx, h.a.log, r.Name, short, cause)
}

// StopRegion implements failover.Host: it stops region r's readers,
// pipelines and sinks, without draining: what they held is replayed from
// the checkpoint. Checkpoints are suspended until StartRegion.
func (h regionHost) StopRegion(r failover.Region, reason error) {
	a := h.a
	var srcs []*sourceRunner
	for _, name := range r.Sources {
		srcs = append(srcs, a.flow.sources[name])
	}
	var txs []*sinkRunner
	for _, name := range r.Sinks {
		if s := a.flow.sinks[name]; s.tx != nil {
			txs = append(txs, s)
		}
	}
	a.ckpt.SuspendRegion(fmt.Errorf("checkpoint: pipelines %s restarting: %w", r.Name, reason),
		checkpointSources(srcs), checkpointTxSinks(txs))
	for _, s := range srcs {
		s.stop()
	}
	for _, i := range r.Pipes {
		<-a.flow.pipelines[i].Done()
	}
	for _, name := range r.Sinks {
		a.flow.sinks[name].closeWhenProducersDone()
	}
	a.flow.mu.Lock()
	for _, name := range r.Sinks {
		delete(a.flow.sinks, name) // closed: shutdown must not close it again
	}
	a.flow.mu.Unlock()
	// Snapshot writes of the aborted checkpoint may still read the state.
	a.ckpt.WaitWriters()
	a.flow.mu.Lock()
	for _, i := range r.Pipes {
		for _, be := range a.flow.pipelines[i].Backends() {
			_ = be.Close()
			a.flow.backends = slices.DeleteFunc(a.flow.backends, func(b state.Backend) bool { return b == be })
		}
	}
	a.flow.mu.Unlock()
}

// StartRegion implements failover.Host: it rebuilds region r from the
// configuration, restores its part of the newest completed checkpoint and
// starts it.
func (h regionHost) StartRegion(r failover.Region, fail func(error)) (err error) {
	a := h.a
	var fresh []*stages.Pipeline
	defer func() {
		if err != nil {
			h.discard(r, fresh)
		}
	}()
	if err := h.build(r, &fresh); err != nil {
		return err
	}
	h.Route(r, fail)
	ck := a.ckpt
	var txs []*sinkRunner
	for _, name := range r.Sinks {
		s := a.flow.sinks[name]
		s.ckpt = ck
		if s.tx != nil {
			txs = append(txs, s)
		}
	}
	var srcs []*sourceRunner
	for _, name := range r.Sources {
		s := a.flow.sources[name]
		s.acks = ck.Send
		srcs = append(srcs, s)
	}
	for _, p := range fresh {
		p.SetCheckpoints(ck)
	}

	var restored uint64
	sel, err := ck.Store().SelectRestore("")
	for _, sk := range sel.Skipped {
		a.log.Warn("checkpoint skipped: it does not verify", "id", sk.ID, "reason", sk.Reason)
	}
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		a.log.Info("no checkpoint to restore: the pipelines start empty", "pipelines", r.Name)
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
		for _, name := range r.Sources {
			mine[name] = a.flow.sources[name]
		}
		rewind(m, mine)
		restored = m.ID
		a.log.Info("restored checkpoint", "id", m.ID, "pipelines", r.Name, "positions", m.SourcePositions)
	}
	for _, s := range txs {
		if err := s.tx.Recover(restored); err != nil {
			return fmt.Errorf("agent: sink %q: recover: %w", s.name, err)
		}
	}
	for _, name := range r.Sinks {
		go a.flow.sinks[name].run()
	}
	for _, p := range fresh {
		p.Start(&h.st.pipeWG)
	}
	for _, s := range srcs {
		s.start(h.st.srcCtx, a.log, &h.st.srcWG)
	}
	ck.ResumeRegion(checkpointSources(srcs), checkpointTxSinks(txs))
	return nil
}

// build creates region r's sinks and pipelines afresh (fresh gets
// each pipeline as it is made) and resets its sources.
func (h regionHost) build(r failover.Region, fresh *[]*stages.Pipeline) error {
	a := h.a
	a.flow.mu.Lock()
	defer a.flow.mu.Unlock()
	for _, name := range r.Sources {
		a.flow.sources[name].reset()
	}
	for _, name := range r.Sinks {
		delete(a.flow.sinks, name) // created again by newPipeline
	}
	for _, i := range r.Pipes {
		role := a.flow.pipelines[i].Rollover()
		pl, err := a.flow.pipelines[i].Recompile(a.cfg)
		if err != nil {
			return err
		}
		p, err := a.flow.newPipeline(pl)
		if p != nil {
			*fresh = append(*fresh, p)
		}
		if err != nil {
			return err
		}
		if role.Roll != nil || role.Fresh || role.Since != 0 {
			p.SetRollover(role)
		}
	}
	for k, i := range r.Pipes {
		a.flow.pipelines[i] = (*fresh)[k]
	}
	return nil
}

// discard closes what a failed build or restore opened, so the
// next attempt starts clean. Nothing of it was started.
func (h regionHost) discard(r failover.Region, fresh []*stages.Pipeline) {
	a := h.a
	a.flow.mu.Lock()
	defer a.flow.mu.Unlock()
	for _, name := range r.Sinks {
		s, ok := a.flow.sinks[name]
		if !ok {
			continue
		}
		if s.tx != nil {
			_ = s.tx.Close()
		} else if s.plain != nil {
			_ = s.plain.Close()
		}
		delete(a.flow.sinks, name) // shutdown must not wait for it
	}
	for _, name := range r.Sources {
		close(a.flow.sources[name].drained) // never started: nothing to forward
		a.flow.sources[name].stopped = true
	}
	for _, p := range fresh {
		for _, be := range p.Backends() {
			_ = be.Close()
			a.flow.backends = slices.DeleteFunc(a.flow.backends, func(b state.Backend) bool { return b == be })
		}
	}
}
