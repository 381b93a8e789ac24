package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/sparkplug"
	"github.com/eddy-edge/eddy/state"
)

// addPipeline creates the runtime of one plan and registers it with its
// source and sinks.
func (df *dataflow) addPipeline(pl *stages.Plan) error {
	p, err := df.newPipeline(pl)
	if err != nil {
		return err
	}
	df.pipelines = append(df.pipelines, p)
	return nil
}

// newPipeline creates the runtime of one plan, registered with its source
// and sinks (created on first use).
func (df *dataflow) newPipeline(pl *stages.Plan) (*stages.Pipeline, error) {
	name := pl.Config().Name
	pm := df.pipeMetrics[name]
	if pm == nil {
		pm = stages.NewMetrics(df.metrics, name)
		df.pipeMetrics[name] = pm
	}
	p, err := stages.New(pl, stages.Options{
		Source:       df.src,
		DeviceID:     df.deviceID,
		Vars:         df.vars(),
		MaxKeyGroups: df.cfg.Agent.MaxKeyGroups,
		Align: checkpoint.AlignmentPolicy{Unaligned: df.cfg.Checkpoint.Unaligned,
			AlignedTimeoutMs: df.cfg.Checkpoint.AlignedTimeout.Milliseconds()},
		StateCache: df.stateCache / int64(df.stateSubtasks()),
		BoltState:  df.cfg.State.Backend != "memory",
		OpenBackend: func(subtask int, cacheBytes int64) (state.Backend, error) {
			return df.openBackend(name, subtask, cacheBytes)
		},
		Metrics: pm,
		Log:     df.log,
		Clock:   df.clk,
		Fail:    df.fail,
		Rebirth: df.rebirth(pl.Config().From.Source),
	})
	if err != nil {
		return nil, err
	}
	if err := df.connectSinks(p); err != nil {
		return nil, err
	}
	if err := df.connectSources(p); err != nil {
		return nil, err
	}
	return p, nil
}

// connectSinks makes the pipeline a producer of its sinks: its outputs, its
// late output and its dead letters.
func (df *dataflow) connectSinks(p *stages.Pipeline) error {
	pc := p.Config()
	var out stages.Outputs
	for _, ref := range pc.To {
		s, err := df.sink(ref.Sink)
		if err != nil {
			return err
		}
		s.addProducers(p.Parallelism())
		out.To = append(out.To, s.port())
	}
	if ref := pc.LateOutput; ref != nil {
		s, err := df.sink(ref.Sink)
		if err != nil {
			return err
		}
		s.addProducers(p.Parallelism())
		late := s.port()
		out.Late = &late
	}
	var dead *sinkRunner
	if ref := pc.DeadLetter; ref != nil {
		s, err := df.sink(ref.Sink)
		if err != nil {
			return err
		}
		dead = s
		port := s.port()
		out.DeadLetter = &port
	}
	n := p.Connect(out)
	if dead != nil {
		dead.addProducers(n)
		dead.deadLetters = true
		if df.deadProducers == nil {
			df.deadProducers = map[*stages.Pipeline]int{}
		}
		df.deadProducers[p] = n
	}
	return nil
}

// unplug undoes newPipeline for p, which never started: it leaves its
// sources and sinks and closes its state, so that another pipeline of
// the same name takes its place.
func (df *dataflow) unplug(p *stages.Pipeline) {
	pc := p.Config()
	in, ctl := p.Input(), p.ControlInput()
	for _, sr := range df.sources {
		sr.outs = slices.DeleteFunc(sr.outs, func(c chan<- *stages.SourceBatch) bool { return c == in || ctl != nil && c == ctl })
	}
	for _, ref := range pc.To {
		df.sinks[ref.Sink.Name].addProducers(-p.Parallelism())
	}
	if ref := pc.LateOutput; ref != nil {
		df.sinks[ref.Sink.Name].addProducers(-p.Parallelism())
	}
	if ref := pc.DeadLetter; ref != nil {
		df.sinks[ref.Sink.Name].addProducers(-df.deadProducers[p])
	}
	for _, be := range p.Backends() {
		_ = be.Close()
		df.backends = slices.DeleteFunc(df.backends, func(b state.Backend) bool { return b == be })
	}
}

// connectSources makes the pipeline a consumer of its source and of its
// control stream.
func (df *dataflow) connectSources(p *stages.Pipeline) error {
	pc := p.Config()
	sr, err := df.source(pc.From.Source)
	if err != nil {
		return err
	}
	sr.outs = append(sr.outs, p.Input())
	if sr.ilog != nil {
		p.HoldProcessingTime()
	}
	if ref := pc.Control; ref != nil {
		cr, err := df.source(ref.Source)
		if err != nil {
			return err
		}
		cr.outs = append(cr.outs, p.ControlInput())
	}
	return nil
}

// openBackend opens the working state of one subtask. A bbolt file left by
// an earlier run is discarded, never trusted: state comes from the last
// checkpoint (docs/architecture.md "State"). cacheBytes is bbolt's part of
// the subtask's share of state { cache } (stages.Options.StateCache).
func (df *dataflow) openBackend(pipeline string, subtask int, cacheBytes int64) (state.Backend, error) {
	st := df.cfg.State
	if st.Backend == "memory" {
		return state.NewMemory(), nil
	}
	dir := filepath.Join(df.cfg.Agent.DataDir, "state")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent: create %s: %w", dir, err)
	}
	n := df.stateSubtasks()
	be, err := state.OpenBolt(filepath.Join(dir, fmt.Sprintf("%s-%d.db", pipeline, subtask)), state.BoltOptions{
		MaxSize:    int(st.MaxSizeBytes / int64(n)),
		CacheBytes: int(cacheBytes),
		ColdReads:  st.ReadCheckpoints,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: pipeline %q subtask %d: %w", pipeline, subtask, err)
	}
	df.backends = append(df.backends, be)
	return be, nil
}

// totalSubtasks counts the subtasks with state (a window, per-key
// functions) of cfg, which
// share the state budget (cache and max_size).
func totalSubtasks(cfg *config.Config) int {
	n := 0
	for _, p := range cfg.Pipelines {
		n += statefulSubtasks(cfg, p)
	}
	return max(n, 1)
}

// statefulSubtasks is the number of subtasks with state of pipeline p of
// cfg: 0 when it keeps none.
func statefulSubtasks(cfg *config.Config, p *config.Pipeline) int {
	switch {
	case p.Window == nil && !p.Keyed():
		return 0
	case p.Parallelism > 0:
		return p.Parallelism
	}
	return cfg.Agent.Parallelism
}

// stateSubtasks is the number of subtasks that share the state budget:
// the configuration's, and those of the old definitions running beside
// their new ones.
func (df *dataflow) stateSubtasks() int { return totalSubtasks(df.cfg) + df.oldSubtasks }

// shareState makes the old definitions of plans, about to be opened,
// take their share of the state budget from the pipelines already open:
// it reopens those with state on the smaller share. Only before anything
// starts or restores.
func (df *dataflow) shareState(olds []*stages.Plan) error {
	n := 0
	for _, pl := range olds {
		n += statefulSubtasks(df.cfg, pl.Config())
	}
	if n == df.oldSubtasks {
		return nil
	}
	df.oldSubtasks = n
	for i, p := range df.pipelines {
		if !p.Stateful() {
			continue
		}
		pl, err := p.Recompile(df.cfg)
		if err != nil {
			return err
		}
		if err := df.reopen(i, pl); err != nil {
			return err
		}
	}
	return nil
}

// reopen replaces pipeline i, not started yet, with one opened on pl.
func (df *dataflow) reopen(i int, pl *stages.Plan) error {
	df.unplug(df.pipelines[i])
	np, err := df.newPipeline(pl)
	if err != nil {
		return err
	}
	df.mu.Lock()
	df.pipelines[i] = np
	df.mu.Unlock()
	return nil
}

// rebirth is the NCMD rebirth request of a sparkplug_b source with
// request_rebirth, nil otherwise. One Rebirther per source serves every
// pipeline reading it, so a node is asked once, and lives as long as the
// agent (a region restart keeps it).
func (df *dataflow) rebirth(src *config.Source) stages.RebirthFunc {
	if src.MQTT == nil || src.Format != config.FormatSparkplugB || !src.MQTT.RequestRebirth {
		return nil
	}
	r := df.rebirthers[src.Name]
	if r == nil {
		m := src.MQTT
		// The endpoint is resolved at the first request: it may be the
		// embedded broker, which exists by then.
		r = &lazyRebirther{open: func() (*sparkplug.Rebirther, error) {
			ep, tc, err := df.clientEndpoint(m.Broker, m.Username, m.Password, m.TLS)
			if err != nil {
				return nil, err
			}
			return sparkplug.NewRebirther(sparkplug.RebirthOptions{Broker: ep.URL, ClientID: config.Expand(m.ClientID, df.vars()) + "-rebirth",
				Username: ep.Username, Password: ep.Password, TLS: tc, Log: df.log.With("source", src.Name)}), nil
		}}
		df.rebirthers[src.Name] = r
		r.register(df.metrics, src.Name)
	}
	return r.request
}
