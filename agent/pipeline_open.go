package agent

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window"
	"github.com/eddy-edge/eddy/window/watermark"
)

// addPipeline creates the runtime of one plan and registers it with its
// source and sinks.
func (df *dataflow) addPipeline(pl *plan) error {
	p, err := df.newPipeline(pl)
	if err != nil {
		return err
	}
	df.pipelines = append(df.pipelines, p)
	return nil
}

// newPipeline creates the runtime of one plan, registered with its source
// and sinks (created on first use).
func (df *dataflow) newPipeline(pl *plan) (*pipeline, error) {
	name := pl.cfg.Name
	pm := df.pipeMetrics[name]
	if pm == nil {
		pm = newPipelineMetrics(df.metrics, name)
		df.pipeMetrics[name] = pm
	}
	p := &pipeline{
		cfg:        pl.cfg,
		fatal:      df.fail,
		epoch:      1, // dead letters before barrier 1
		ordered:    (pl.window != nil || pl.keyed != nil) && pl.cfg.From.Source.File != nil && pl.cfg.From.Source.File.Path != "-",
		bound:      pl.bound,
		name:       name,
		in:         make(chan *rawBatch, 4),
		prep:       operators.NewPreparer(pl.prep),
		stride:     len(pl.prep.AggArgs),
		eventTime:  pl.eventTime,
		tickEvery:  100 * time.Millisecond,
		m:          pm,
		log:        df.log,
		clk:        df.clk,
		done:       make(chan struct{}),
		debugDelay: pl.cfg.DebugDelayPerRecord,
		align: checkpoint.AlignmentPolicy{Unaligned: df.cfg.Checkpoint.Unaligned,
			AlignedTimeoutMs: df.cfg.Checkpoint.AlignedTimeout.Milliseconds()},
		panicAt: pl.cfg.DebugPanicAtOffset,
	}
	if pl.eventTime {
		if err := df.setWatermarks(p, pl); err != nil {
			return nil, fmt.Errorf("agent: pipeline %q: %w", name, err)
		}
	}
	if err := df.newSubtasks(p, pl); err != nil {
		return nil, err
	}
	if err := df.connectSinks(p, pl); err != nil {
		return nil, err
	}
	if p.subtasks[0].liveKeys != nil {
		p.limitKeys(pl.cfg.MaxKeys)
	}
	if err := df.connectSources(p, pl); err != nil {
		return nil, err
	}
	return p, nil
}

// setWatermarks gives an event-time pipeline its watermark generator
// (punctuated, one per topic filter, or one bounded out-of-orderness), its
// hold after a resumed session, and its processing-time tick.
func (df *dataflow) setWatermarks(p *pipeline, pl *plan) error {
	src := pl.cfg.From.Source
	if pl.prep.Punctuation != nil {
		p.wm = &punctuatedWatermark{wm: watermark.Min}
	} else if src.MQTT != nil && len(src.MQTT.Topics) > 1 {
		topics := make([]string, len(src.MQTT.Topics))
		for i, t := range src.MQTT.Topics {
			topics[i] = config.Expand(t, df.vars())
		}
		w, err := newInputWatermarks(topics, pl.bound, src.Watermark.IdleTimeout.Milliseconds(), df.clk.monoMs())
		if err != nil {
			return err
		}
		p.wm = w
	} else {
		g, err := watermark.NewBoundedOutOfOrder(pl.bound)
		if err != nil {
			return err
		}
		p.wm = g
	}
	p.resume = watermark.NewResume(src.Watermark.HoldAfterResume.Milliseconds())
	p.burst = &lateBurst{log: df.log, pipeline: p.name, source: src.Name, hold: src.Watermark.HoldAfterResume}
	p.tickEvery = 0
	if pl.window != nil && pl.window.EarlyEvery > 0 || pl.keyed != nil && pl.keyed.processing {
		p.tickEvery = 100 * time.Millisecond // processing-time timers
	}
	return nil
}

// newSubtasks opens the pipeline's parallel subtasks: each one's state
// backend (keyed pipelines), window operator and keyed operator.
func (df *dataflow) newSubtasks(p *pipeline, pl *plan) error {
	name := p.name
	pm := p.m
	p.maxKeyGroups = df.cfg.Agent.MaxKeyGroups
	keyedState := pl.window != nil || pl.keyed != nil // the subtasks keep state
	if pl.window != nil {
		p.windowState = windowStateName(*pl.window)
	}
	if keyedState {
		p.shape, _ = json.Marshal(pipelineShape(df.src, pl.cfg)) // strings only: cannot fail
	}
	p.merge.done = make(chan struct{})
	var usage []stateUsage
	if keyedState {
		usage = make([]stateUsage, pl.parallelism)
		pm.state.Store(&usage)
	}
	objectCache, writeBackCache := stateShare(df.stateCache/int64(totalSubtasks(df.cfg)),
		pl.keyed != nil, pl.window != nil, df.cfg.State.Backend != "memory")
	for i := 0; i < pl.parallelism; i++ {
		p.edges = append(p.edges, stream.NewEdge(16))
		st := &subtask{index: i, epoch: 1, replayWM: math.MinInt64} // epoch n: output before barrier n
		var op *window.Operator
		if keyedState {
			be, err := df.openBackend(name, i, writeBackCache)
			if err != nil {
				return err
			}
			st.backend, st.usage = be, &usage[i]
			if st.inflight, err = be.Bucket("inflight", state.KeyGroupPrefix); err != nil {
				return fmt.Errorf("agent: pipeline %q: %w", name, err)
			}
			if p.ordered {
				if st.held, err = be.Bucket("held", state.KeyGroupPrefix); err != nil {
					return fmt.Errorf("agent: pipeline %q: %w", name, err)
				}
			}
		}
		if pl.window != nil {
			store, err := window.NewStateStore(st.backend, p.windowState, aggFuncs(pl.window.Aggs))
			if err != nil {
				return fmt.Errorf("agent: pipeline %q: %w", name, err)
			}
			st.store = store
			var opStore window.Store = store
			if pl.cfg.MaxKeys > 0 {
				st.liveKeys = window.NewLiveKeys(store)
				opStore = st.liveKeys
			}
			op, err = window.NewOperator(*pl.window, opStore)
			if err != nil {
				return fmt.Errorf("agent: pipeline %q: %w", name, err)
			}
		}
		st.task = operators.NewWindowTask(name, df.deviceID, pl.names, op)
		if pl.keyed != nil {
			if err := attachKeyed(pl, st, objectCache, df.clk); err != nil {
				return err
			}
		}
		p.subtasks = append(p.subtasks, st)
	}
	return nil
}

// connectSinks makes the pipeline a producer of its sinks: its outputs, its
// late output and its dead letters.
func (df *dataflow) connectSinks(p *pipeline, pl *plan) error {
	for _, ref := range pl.cfg.To {
		s, err := df.sink(ref.Sink)
		if err != nil {
			return err
		}
		s.addProducers(pl.parallelism)
		p.to = append(p.to, s)
	}
	if ref := pl.cfg.LateOutput; ref != nil {
		s, err := df.sink(ref.Sink)
		if err != nil {
			return err
		}
		s.addProducers(pl.parallelism)
		p.late = s
		if p.burst != nil {
			p.burst.lateOut = true
		}
	}
	if ref := pl.cfg.DeadLetter; ref != nil {
		s, err := df.sink(ref.Sink)
		if err != nil {
			return err
		}
		// The prepare stage dead-letters readings; the window subtasks
		// too, results larger than a sink's max_payload or its MQTT 5
		// broker's Maximum Packet Size, and then they
		// pass barriers to it like to any sink they write.
		p.deadLetter = s
		p.resultDeadLetters = slices.ContainsFunc(p.to, func(r *sinkRunner) bool { return r.maxPayload > 0 || r.packetLimit != nil }) ||
			p.subtasks[0].liveKeys != nil || // readings refused by max_keys
			pl.keyed != nil // readings the keyed subtasks reject
		n := 1
		if p.resultDeadLetters {
			n += pl.parallelism
		}
		s.addProducers(n)
		s.deadLetters = true
	}
	return nil
}

// connectSources makes the pipeline a consumer of its source and of its
// control stream.
func (df *dataflow) connectSources(p *pipeline, pl *plan) error {
	name := p.name
	pm := p.m
	sr, err := df.source(pl.cfg.From.Source)
	if err != nil {
		return err
	}
	sr.outs = append(sr.outs, p.in)
	if ref := pl.cfg.Control; ref != nil {
		cr, err := df.source(ref.Source)
		if err != nil {
			return err
		}
		p.control = pl.control
		p.controlIn = make(chan *rawBatch, 4)
		cr.outs = append(cr.outs, p.controlIn)
		df.metrics.GetOrCreateGauge(fmt.Sprintf(`eddy_control_keys{pipeline=%q}`, name), func() float64 { return float64(pm.controlKeys.Load()) })
	}
	return nil
}

// openBackend opens the working state of one subtask. A bbolt file left by
// an earlier run is discarded, never trusted: state comes from the last
// checkpoint (docs/architecture.md "State"). cacheBytes is bbolt's part of
// the subtask's share of state { cache } (stateShare).
func (df *dataflow) openBackend(pipeline string, subtask int, cacheBytes int64) (state.Backend, error) {
	st := df.cfg.State
	if st.Backend == "memory" {
		return state.NewMemory(), nil
	}
	dir := filepath.Join(df.cfg.Agent.DataDir, "state")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent: create %s: %w", dir, err)
	}
	n := totalSubtasks(df.cfg)
	be, err := state.OpenBolt(filepath.Join(dir, fmt.Sprintf("%s-%d.db", pipeline, subtask)), state.BoltOptions{
		MaxSize:    int(st.MaxSizeBytes / int64(n)),
		CacheBytes: int(cacheBytes),
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
		if p.Window == nil && !p.Keyed() {
			continue
		}
		if p.Parallelism > 0 {
			n += p.Parallelism
		} else {
			n += cfg.Agent.Parallelism
		}
	}
	return max(n, 1)
}
