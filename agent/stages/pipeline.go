package stages

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window/watermark"
)

// watermarkGenerator is what the prepare stage needs of a watermark
// strategy: observe accepted timestamps, report the current watermark.
type watermarkGenerator interface {
	Observe(ts int64) int64
	Current() int64
}

// punctuatedWatermark is the watermark of a source with punctuation:
// marker messages set it, readings do not move it.
type punctuatedWatermark struct{ wm int64 }

func (w *punctuatedWatermark) Observe(int64) int64 { return w.wm }
func (w *punctuatedWatermark) Current() int64      { return w.wm }
func (w *punctuatedWatermark) mark(wm int64) {
	if wm > w.wm {
		w.wm = wm
	}
}

// Pipeline is the running form of one `pipeline` block: a prepare stage
// (decode, timestamp, watermark, filter, map, key) feeding N window
// subtasks, which feed the sinks. New builds it from its plan; its owner
// connects it (Connect, Input, ControlInput), hands it the checkpoint
// driver (SetCheckpoints), restores it (Restore) and starts it (Start),
// in that order and from one goroutine. Once started, only Done, Idle,
// Announce and the accessors may be called, from any goroutine.
type Pipeline struct {
	name      string
	cfg       *config.Pipeline
	in        chan *SourceBatch
	prep      *operators.Preparer
	wm        watermarkGenerator // nil on processing time
	bound     int64              // out-of-orderness bound, to restore wm
	subtasks  []*subtask
	edges     []*stream.Edge
	stride    int
	eventTime bool
	// tickEvery is how often the prepare stage moves processing time on
	// to the wall clock while its input is live (0: the pipeline has no
	// processing-time timers).
	tickEvery time.Duration
	// holdProcTime: the input replays an ingest log first, and processing
	// time follows the replayed readings' arrivals until it has caught up
	// (HoldProcessingTime).
	holdProcTime bool
	// ordered: the input is a bounded file, so results are held (in the
	// subtasks' state, so checkpoints keep them) until it ends and written
	// sorted by (window end, key, firing): a replay gives byte-identical
	// output whatever the parallelism, batching or restarts.
	ordered      bool
	merge        heldMerge
	closeOnce    sync.Once
	maxKeyGroups int
	// windowState names the window operator's state in the subtasks'
	// backends: windowStateName of its layout ("" without a window).
	windowState string
	// shape is the JSON of the pipeline's stateShape, recorded in every
	// checkpoint and compared at restore (nil without a window: no state).
	shape []byte
	// block is the pipeline's block text, recorded in every checkpoint as
	// its definition so that a later change can run it as the old one
	// (rollover.go); nil without state, and for an old definition.
	block []byte
	// roll is the rollover whose old definition this instance runs; nil
	// for every other pipeline. since: a new definition's cut, before
	// which it takes no reading (math.MinInt64: none).
	roll *Rollover
	role RolloverRole // as SetRollover gave it, for a rebuild
	// src is the plan's own configuration text (an old or kept
	// definition's), nil when it is the agent's.
	src     []byte
	since   int64
	retired bool // the old definition's last window is past its lateness (logged)
	// restoreFrom is the name the pipeline's state has in the checkpoint
	// Restore reads (stateIn): "" its own, noRestore none (a new
	// definition).
	restoreFrom string
	// maxTime is the newest event time routed to the subtasks, recorded
	// in checkpoints: a later rollover's cut lies after it. Owned by the
	// prepare stage once started.
	maxTime int64
	// stateCache is each subtask's share of state { cache }
	// (Options.StateCache).
	stateCache int64

	to         []Sink
	late       *Sink // nil without a late_output
	deadLetter *Sink // nil without a dead_letter sink
	// resultDeadLetters: the window subtasks are producers of deadLetter
	// too (a sink in to has max_payload).
	resultDeadLetters bool
	tooLargeLog       lockedRateLimiter
	overflowLog       lockedRateLimiter
	// keys bounds the live keys (max_keys); nil without a limit.
	keys        *operators.KeyBudget
	keyLimitLog lockedRateLimiter

	// resume follows resumed sessions of the source in front of wm (the
	// hold_after_resume hold, the episodes that blame late readings on the
	// broker's backlog); nil on processing time.
	resume *watermark.Resume
	burst  *lateBurst

	// control is the state of the pipeline's control stream (controlIn),
	// read by its expressions; nil without one.
	control   *control.State
	controlIn chan *SourceBatch

	// sp reads a sparkplug_b source's messages into readings; nil for
	// other formats.
	sp *sparkplugIn

	ckpt  Checkpoints   // nil: no checkpoints
	fatal func(error)   // fails the pipeline's region, which restarts
	done  chan struct{} // closed when run returns
	epoch uint64        // the prepare stage's epoch (dead letters)

	m   *Metrics
	log *slog.Logger
	clk Clock

	dlLog rateLimiter

	align checkpoint.AlignmentPolicy

	// Test-only fault injection (config debug_*): a delay per record in the
	// window subtasks, and a panic on the record at source offset panicAt.
	debugDelay time.Duration
	panicAt    uint64
}

// debugPanicked makes debug_panic_at_offset fire once per process, so the
// restarted region replays the record without failing again.
var debugPanicked atomic.Bool

// RearmDebugPanic lets debug_panic_at_offset fire once more in this
// process: a test running several agents in one process calls it before
// each that should fail.
func RearmDebugPanic() { debugPanicked.Store(false) }

// Start runs the pipeline in a goroutine counted by wg: the prepare stage
// and one goroutine per window subtask. It ends when the input has ended
// (the source runners closed Input and ControlInput) and everything was
// handed to the sinks; then each producer the pipeline registered with a
// sink has called its Done, and Done is closed.
func (p *Pipeline) Start(wg *sync.WaitGroup) {
	wg.Add(1)
	go func() { defer wg.Done(); defer close(p.done); p.run() }()
}

// Done is closed when the pipeline started by Start has ended.
func (p *Pipeline) Done() <-chan struct{} { return p.done }

// run starts the prepare stage and the window subtasks and returns when all
// input has been processed and handed to the sinks.
func (p *Pipeline) run() {
	p.countKeys()
	var wg sync.WaitGroup
	for _, st := range p.subtasks {
		wg.Add(1)
		go func() { defer wg.Done(); p.guardSubtask(st) }()
	}
	p.guardPrepare()
	wg.Wait()
	for _, s := range p.to {
		for range p.subtasks {
			s.Done()
		}
	}
	if p.late != nil {
		for range p.subtasks {
			p.late.Done()
		}
	}
	if p.resultDeadLetters {
		for range p.subtasks {
			p.deadLetter.Done()
		}
	}
}

// Idle reports whether nothing waits to be processed in the pipeline's
// queues (a stage may still be busy with what it took).
func (p *Pipeline) Idle() bool {
	if len(p.in) > 0 {
		return false
	}
	for i, e := range p.edges {
		if e.Len() > 0 || p.subtasks[i].queued.Load() > 0 {
			return false
		}
	}
	return true
}

// Name is the pipeline block's name.
func (p *Pipeline) Name() string { return p.name }

// Config is the pipeline block the pipeline runs.
func (p *Pipeline) Config() *config.Pipeline { return p.cfg }

// EventTime reports whether the pipeline runs on event time (a watermark
// moves its windows and timers).
func (p *Pipeline) EventTime() bool { return p.eventTime }

// Stateful reports whether the window subtasks keep state (a window, or
// per-key functions): then each has a backend, and checkpoints record the
// pipeline's state shape.
func (p *Pipeline) Stateful() bool { return p.shape != nil }

// StateCache is each window subtask's share of state { cache }, as
// opened (Options.StateCache).
func (p *Pipeline) StateCache() int64 { return p.stateCache }

// Parallelism is the number of window subtasks.
func (p *Pipeline) Parallelism() int { return len(p.subtasks) }

// TaskIDs names the window subtasks as checkpoint tasks, each of which
// acknowledges every barrier.
func (p *Pipeline) TaskIDs() []string {
	ids := make([]string, len(p.subtasks))
	for i, st := range p.subtasks {
		ids[i] = st.taskID(p.name)
	}
	return ids
}

// SetCheckpoints makes the window subtasks acknowledge barriers and write
// snapshots to c. Without it the pipeline passes barriers on to its sinks
// and reports nothing.
func (p *Pipeline) SetCheckpoints(c Checkpoints) { p.ckpt = c }

// SetFail routes the pipeline's failures (a panic, a state error, a
// result that cannot be held) to fail, which stops its failover region;
// before, they go to the fail of Options.
func (p *Pipeline) SetFail(fail func(error)) { p.fatal = fail }

// Backends are the window subtasks' state backends, opened by
// Options.OpenBackend (none for a pipeline without state). The pipeline
// never closes them: its owner does, once it has ended and no snapshot
// reads them.
func (p *Pipeline) Backends() []state.Backend {
	var out []state.Backend
	for _, st := range p.subtasks {
		if st.backend != nil {
			out = append(out, st.backend)
		}
	}
	return out
}
