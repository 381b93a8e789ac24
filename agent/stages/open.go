package stages

import (
	"fmt"
	"log/slog"
	"math"
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

// Options is what New needs besides the plan.
type Options struct {
	// Source is the configuration's text: the state shape recorded in
	// checkpoints compares expressions by it.
	Source []byte
	// DeviceID goes into every result's id; Vars are the variables the
	// source's topic filters expand (${device_id}).
	DeviceID string
	Vars     map[string]string
	// MaxKeyGroups is agent { max_key_groups }, which maps key groups to
	// subtasks, in state and at a restore.
	MaxKeyGroups int
	// Align is the checkpoints' alignment (unaligned, aligned_timeout).
	Align checkpoint.AlignmentPolicy
	// StateCache is each stateful subtask's share of state { cache },
	// divided between its decoded per-key states and its backend's
	// write-back cache (stateShare); BoltState says the backends are bbolt
	// files, which have that cache.
	StateCache int64
	BoltState  bool
	// OpenBackend opens the working state of window subtask i, its
	// write-back cache within cacheBytes. Called only when the pipeline
	// keeps state; the caller owns and closes what it opens (Backends).
	OpenBackend func(subtask int, cacheBytes int64) (state.Backend, error)
	// Metrics are the pipeline's counters (NewMetrics), kept by the caller
	// across rebuilds so they never go back.
	Metrics *Metrics
	Log     *slog.Logger
	Clock   Clock
	// Fail reports a failure of the running pipeline (until SetFail).
	Fail func(error)
	// Rebirth, for a sparkplug_b source with request_rebirth, asks a
	// node for its births after a message of it could not be read.
	Rebirth RebirthFunc
}

// New builds the pipeline of plan pl: its prepare stage, and its window
// subtasks each with its state backend, window operator and keyed
// operator. It starts nothing and connects nothing: its owner connects
// the outputs (Connect) and the inputs (Input, ControlInput) next.
func New(pl *Plan, o Options) (*Pipeline, error) {
	name := pl.cfg.Name
	p := &Pipeline{
		cfg:          pl.cfg,
		fatal:        o.Fail,
		epoch:        1, // dead letters before barrier 1
		ordered:      (pl.window != nil || pl.keyed != nil) && pl.cfg.From.Source.File != nil && pl.cfg.From.Source.File.Path != "-",
		bound:        pl.bound,
		name:         name,
		in:           make(chan *SourceBatch, 4),
		prep:         operators.NewPreparer(pl.prep),
		stride:       len(pl.prep.AggArgs),
		eventTime:    pl.eventTime,
		tickEvery:    100 * time.Millisecond,
		maxKeyGroups: o.MaxKeyGroups,
		m:            o.Metrics,
		log:          o.Log,
		clk:          o.Clock,
		done:         make(chan struct{}),
		debugDelay:   pl.cfg.DebugDelayPerRecord,
		align:        o.Align,
		panicAt:      pl.cfg.DebugPanicAtOffset,
		sp:           newSparkplugIn(pl.cfg.From.Source.Format, o.Rebirth),
		since:        math.MinInt64,
		maxTime:      math.MinInt64,
		stateCache:   o.StateCache,
	}
	if pl.src != nil {
		o.Source = pl.src // an old definition, compiled from its own text
		p.src = pl.src
	}
	if pl.eventTime {
		if err := p.setWatermarks(pl, o); err != nil {
			return nil, fmt.Errorf("agent: pipeline %q: %w", name, err)
		}
	}
	if err := p.newSubtasks(pl, o); err != nil {
		return nil, err
	}
	if pl.cfg.Control != nil {
		p.control = pl.control
		p.controlIn = make(chan *SourceBatch, 4)
		pm := p.m
		pm.set.GetOrCreateGauge(fmt.Sprintf(`eddy_control_keys{pipeline=%q}`, name), func() float64 { return float64(pm.controlKeys.Load()) })
	}
	return p, nil
}

// setWatermarks gives an event-time pipeline its watermark generator
// (punctuated, one per topic filter, or one bounded out-of-orderness), its
// hold after a resumed session, and its processing-time tick.
func (p *Pipeline) setWatermarks(pl *Plan, o Options) error {
	src := pl.cfg.From.Source
	if pl.prep.Punctuation != nil {
		p.wm = &punctuatedWatermark{wm: watermark.Min}
	} else if src.MQTT != nil && len(src.MQTT.Topics) > 1 {
		topics := make([]string, len(src.MQTT.Topics))
		for i, t := range src.MQTT.Topics {
			topics[i] = config.Expand(t, o.Vars)
		}
		w, err := newInputWatermarks(topics, pl.bound, src.Watermark.IdleTimeout.Milliseconds(), o.Clock.MonoMs())
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
	p.burst = &lateBurst{log: o.Log, pipeline: p.name, source: src.Name, hold: src.Watermark.HoldAfterResume}
	p.tickEvery = 0
	if pl.window != nil && pl.window.EarlyEvery > 0 || pl.keyed != nil && pl.keyed.processing {
		p.tickEvery = 100 * time.Millisecond // processing-time timers
	}
	return nil
}

// newSubtasks opens the pipeline's parallel subtasks: each one's state
// backend (keyed pipelines), window operator and keyed operator.
func (p *Pipeline) newSubtasks(pl *Plan, o Options) error {
	name := p.name
	pm := p.m
	keyedState := pl.window != nil || pl.keyed != nil // the subtasks keep state
	if pl.window != nil {
		p.windowState = windowStateName(*pl.window)
	}
	p.shape = pl.StateShape(o.Source)
	if r := pl.cfg.BlockRange; p.shape != nil && r.Start.Byte < r.End.Byte && r.End.Byte <= len(o.Source) {
		p.block = o.Source[r.Start.Byte:r.End.Byte]
	}
	p.merge.done = make(chan struct{})
	var usage []stateUsage
	if keyedState {
		usage = make([]stateUsage, pl.parallelism)
		pm.state.Store(&usage)
	}
	objectCache, writeBackCache := stateShare(o.StateCache, pl.keyed != nil, pl.window != nil, o.BoltState)
	for i := 0; i < pl.parallelism; i++ {
		p.edges = append(p.edges, stream.NewEdge(16))
		st := &subtask{index: i, epoch: 1, replayWM: math.MinInt64} // epoch n: output before barrier n
		var op *window.Operator
		if keyedState {
			be, err := o.OpenBackend(i, writeBackCache)
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
		st.task = operators.NewWindowTask(name, o.DeviceID, pl.names, op)
		if op != nil {
			st.task.Label(name, DefinitionHash(p.shape))
		}
		if pl.keyed != nil {
			if err := attachKeyed(pl, st, objectCache); err != nil {
				return err
			}
		}
		p.subtasks = append(p.subtasks, st)
	}
	return nil
}

// Outputs are the sinks a pipeline writes: its block's to, late_output and
// dead_letter, the last two nil when the block has none.
type Outputs struct {
	To         []Sink
	Late       *Sink
	DeadLetter *Sink
}

// Connect makes the pipeline write o, and returns how many producers of
// o.DeadLetter it is: its prepare stage, and each window subtask too when
// those dead-letter results and readings (a sink in To has a size limit,
// max_keys, per-key functions). Of every sink in To and of Late it is
// Parallelism producers. The caller registers them with each sink before
// it starts the pipeline; each calls the sink's Done when it ends.
func (p *Pipeline) Connect(o Outputs) (deadLetterProducers int) {
	p.to = o.To
	if o.Late != nil {
		p.late = o.Late
		if p.burst != nil {
			p.burst.lateOut = true
		}
	}
	if o.DeadLetter != nil {
		// The prepare stage dead-letters readings; the window subtasks
		// too, results larger than a sink's max_payload or its MQTT 5
		// broker's Maximum Packet Size, and then they
		// pass barriers to it like to any sink they write.
		p.deadLetter = o.DeadLetter
		p.resultDeadLetters = slices.ContainsFunc(p.to, func(s Sink) bool { return s.MaxPayload > 0 || s.PacketLimit != nil }) ||
			p.subtasks[0].liveKeys != nil || // readings refused by max_keys
			p.subtasks[0].task.Keyed() != nil // readings the keyed subtasks reject
		deadLetterProducers = 1
		if p.resultDeadLetters {
			deadLetterProducers += len(p.subtasks)
		}
	}
	if p.subtasks[0].liveKeys != nil {
		p.limitKeys(p.cfg.MaxKeys)
	}
	return deadLetterProducers
}

// Input is where the source runner of the pipeline's source sends its
// batches, in order; closing it ends the pipeline's input.
func (p *Pipeline) Input() chan<- *SourceBatch { return p.in }

// HoldProcessingTime tells the pipeline that its input replays an ingest
// log before it follows the live tail, and says so with a CaughtUp batch:
// until then processing time moves only with the replayed readings'
// arrivals, so timers fire between the readings they fired between in
// the first run, not all at once on the replay's clock.
func (p *Pipeline) HoldProcessingTime() { p.holdProcTime = true }

// ControlInput is where the source runner of the pipeline's control stream
// sends its batches; nil without a control stream.
func (p *Pipeline) ControlInput() chan<- *SourceBatch { return p.controlIn }

// stateShare divides a subtask's share of state { cache } between the two
// caches that hold its state in memory, so that together they hold no more
// than the share (both count in eddy_state_memory_bytes): objects for the
// keyed stage's decoded per-key states (keyed: the subtask has per-key
// functions), writeBack for bbolt's write-back cache (bolt: the state is
// on bbolt; the memory backend has no cache).
//
// The decoded objects are the hot copy: a reading of a resident key costs
// no backend access, and a key that does not fit costs a Get, a decode, an
// encode and a Put per reading. bbolt's cache holds encoded copies: of keys
// read on a miss (for a resident key, a second copy nobody reads until the
// key leaves the object cache) and of the writes not yet in the file: the
// states written at each checkpoint and by evictions, spilled readings,
// timers; when it is full they are written back in batched transactions,
// once per checkpoint rather than per reading. So without a window the
// objects get seven eighths (100,000 keys of one changed() at the default
// 32 MiB) and bbolt an eighth, at least 1 MiB (at most half the share) so a
// checkpoint's writes are not written back a few entries at a time. With a
// window bbolt also takes the window store's evicted windows, checkpoint
// writes and timers (the window store's own decoded cache is apart, see
// docs/state.md), so the two get half each.
func stateShare(share int64, keyed, window, bolt bool) (objects, writeBack int64) {
	switch {
	case !bolt:
		return share, 0
	case !keyed:
		return 0, share
	case window:
		writeBack = share / 2
	default:
		writeBack = max(share/8, min(share/2, minWriteBackCache))
	}
	return share - writeBack, writeBack
}

// minWriteBackCache is the least of a keyed subtask's share that bbolt's
// write-back cache keeps (about 5,000 small per-key states).
const minWriteBackCache = 1 << 20
