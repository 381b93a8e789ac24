package stages

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/agent/checkpointing"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/stream"
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

// pipeline is the running form of one `pipeline` block: a prepare stage
// (decode, timestamp, watermark, filter, map, key) feeding N window
// subtasks, which feed the sinks.
type pipeline struct {
	name      string
	cfg       *config.Pipeline
	in        chan *rawBatch
	prep      *operators.Preparer
	wm        watermarkGenerator // nil on processing time
	bound     int64              // out-of-orderness bound, to restore wm
	subtasks  []*subtask
	edges     []*stream.Edge
	stride    int
	eventTime bool
	tickEvery time.Duration
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

	to         []*sinkRunner
	late       *sinkRunner
	deadLetter *sinkRunner
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
	controlIn chan *rawBatch

	ckpt  *checkpointing.Driver // nil: no checkpoints
	fatal func(error)           // fails the pipeline's region, which restarts
	done  chan struct{}         // closed when run returns
	epoch uint64                // the prepare stage's epoch (dead letters)

	m   *pipelineMetrics
	log *slog.Logger
	clk clock

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

// start runs the pipeline in a goroutine counted by wg.
func (p *pipeline) start(wg *sync.WaitGroup) {
	wg.Add(1)
	go func() { defer wg.Done(); defer close(p.done); p.run() }()
}

// run starts the prepare stage and the window subtasks and returns when all
// input has been processed and handed to the sinks.
func (p *pipeline) run() {
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
			s.producers.Done()
		}
	}
	if p.late != nil {
		for range p.subtasks {
			p.late.producers.Done()
		}
	}
	if p.resultDeadLetters {
		for range p.subtasks {
			p.deadLetter.producers.Done()
		}
	}
}

// idle reports whether nothing waits to be processed in the pipeline's
// queues (a stage may still be busy with what it took).
func (p *pipeline) idle() bool {
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
