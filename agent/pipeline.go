package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/sink"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window"
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
	// keys bounds the live keys (max_keys); nil without a limit.
	keys        *operators.KeyBudget
	keyLimitLog lockedRateLimiter

	// control is the state of the pipeline's control stream (controlIn),
	// read by its expressions; nil without one.
	control   *control.State
	controlIn chan *rawBatch

	ckpt  *checkpointer // nil: no checkpoints
	fatal func(error)   // fails the pipeline's region, which restarts
	done  chan struct{} // closed when run returns
	epoch uint64        // the prepare stage's epoch (dead letters)

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

// subtask is one parallel instance of a pipeline's keyed window.
type subtask struct {
	index    int
	task     *operators.WindowTask
	backend  state.Backend // nil for a pass-through pipeline
	store    *window.StateStore
	usage    *stateUsage  // where sampleState publishes the state's size (nil without a window)
	failed   bool         // the state store failed: input is drained, not processed
	held     state.Bucket // ordered pipelines: results by (end, key, start, firing)
	holdErr  error        // the first failure to hold a result (a full store): fails the subtask like a state error
	epoch    uint64       // results produced now belong to this epoch
	lastSnap uint64       // checkpoint id of the last snapshot taken
	heldKey  []byte

	// Key limit (max_keys): the operator's store, else nil, and
	// task.Refused when last counted (emitRefused).
	liveKeys    *window.LiveKeys
	refusedSeen int64

	// Unaligned checkpoints (checkpoint.AlignmentPolicy).
	inflight    state.Bucket        // records a barrier overtook, while in a snapshot or restored
	queue       []stream.Message    // read ahead of an overtaking barrier: processed before the edge
	announced   *stream.BarrierInfo // announced barrier not yet taken
	announcedAt int64
	lastBarrier uint64 // newest barrier taken, in-band or overtaking
	overtaken   uint64 // newest barrier taken ahead of the queue: its in-band copy is skipped
	seq         uint64
	replayWM    int64 // restored channel watermark, reached after the in-flight replay
	buf         []byte
	queued      atomic.Int64 // len(queue), for idleness
}

func (st *subtask) taskID(pipeline string) string {
	return "pipeline/" + pipeline + "/" + strconv.Itoa(st.index)
}

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

// guardPrepare runs the prepare stage and, if it panics, reports the
// failure (the agent stops and may restart from the last checkpoint) and
// keeps its input drained so the source and shutdown never block on it.
func (p *pipeline) guardPrepare() {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		p.fatal(fmt.Errorf("pipeline %q: panic in the prepare stage: %v\n%s", p.name, r, debug.Stack()))
		for rb := range p.in {
			rb.release()
		}
		p.closePrepareOutputs()
	}()
	p.runPrepare()
}

// closePrepareOutputs ends the prepare stage's outputs, once.
func (p *pipeline) closePrepareOutputs() {
	p.closeOnce.Do(func() {
		for _, e := range p.edges {
			e.Close()
		}
		if p.deadLetter != nil {
			p.deadLetter.producers.Done()
		}
	})
}

// tooLargeReject dead-letters a message its source refused as larger than
// max_message_size (its payload is cut).
var tooLargeReject = operators.Reject{Reason: operators.ReasonTooLarge,
	Detail: "message larger than the source's max_message_size; the dead letter holds its first bytes"}

// applyControl merges control messages into the pipeline's control state;
// a message that cannot be applied is dead-lettered.
func (p *pipeline) applyControl(rb *rawBatch, dead **operators.Delivery) {
	for i := range rb.msgs {
		m := &rb.msgs[i]
		if err := p.control.Apply(m.Payload); err != nil {
			reason := "control_malformed"
			if errors.Is(err, control.ErrLimit) {
				reason = "control_limit"
			}
			p.m.deadLettered(reason).Inc()
			p.log.Warn("control message dead-lettered", "pipeline", p.name, "reason", reason, "err", err, "topic", m.Topic)
			if p.deadLetter != nil {
				d := new(operators.Delivery)
				d.AddDeadLetter(p.name, reason, err.Error(), m.Topic, m.Offset, m.Payload)
				p.deadLetter.in <- sinkMsg{d: d, epoch: p.epoch}
			}
		}
	}
	p.m.controlKeys.Store(int64(p.control.Keys()))
}

// guardSubtask runs a window subtask and, if it panics, reports the failure
// and drains its input until the prepare stage closes it.
func (p *pipeline) guardSubtask(st *subtask) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		p.fatal(fmt.Errorf("pipeline %q subtask %d: panic: %v\n%s", p.name, st.index, r, debug.Stack()))
		p.edges[st.index].Gate(false)
		if p.ordered {
			p.arriveHeld(st, nil, false) // do not keep the other subtasks waiting at the end of input
		}
		for m := range p.edges[st.index].C() {
			if m.Kind == stream.Records {
				m.Batch.Release()
			}
		}
	}()
	p.runSubtask(st)
}

func (p *pipeline) runPrepare() {
	ctx := context.Background() // internal edges drain on shutdown; only sources are cancelled
	batches := make([]*stream.Batch, len(p.edges))
	lastWM := int64(math.MinInt64)
	broadcast := func() {
		if p.wm == nil {
			return
		}
		if wm := p.wm.Current(); wm > lastWM {
			lastWM = wm
			p.m.watermark.Store(wm)
			for _, e := range p.edges {
				_ = e.Send(ctx, stream.Message{Kind: stream.Watermark, Watermark: wm})
			}
		}
	}
	inputs, _ := p.wm.(*inputWatermarks)
	var idleTick <-chan time.Time
	if inputs != nil {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		idleTick = tk.C
	}
	var dead *operators.Delivery
	forward := func(tr *checkpoint.Trigger) {
		// Everything before the barrier is already on the edges; the
		// barrier follows it in-band.
		b := stream.BarrierInfo{ID: tr.ID, Full: tr.Kind != checkpoint.KindIncremental, Parent: tr.Parent}
		if p.control != nil {
			b.Control = p.control.Snapshot()
		}
		for _, e := range p.edges {
			_ = e.Send(ctx, stream.Message{Kind: stream.Barrier, Barrier: b})
		}
		if p.deadLetter != nil {
			p.deadLetter.in <- sinkMsg{barrier: b.ID}
		}
		p.epoch = b.ID + 1
	}
	// With a control stream the prepare stage has two inputs, aligned at
	// barriers (Chandy–Lamport): the first input to deliver barrier n is
	// held until the other delivers it too, so the control state in
	// checkpoint n is exactly what the readings before barrier n saw.
	var (
		heldMain *checkpoint.Trigger // main barrier waiting for the control one
		heldCtl  uint64              // control barrier waiting for the main one
		ctlIn    = p.controlIn
	)
	for {
		var (
			rb *rawBatch
			ok bool
		)
		mainIn := p.in
		if heldMain != nil {
			mainIn = nil
		}
		ctl := ctlIn
		if heldCtl != 0 {
			ctl = nil
		}
		select {
		case rb, ok = <-mainIn:
		case cb, cok := <-ctl:
			switch {
			case !cok:
				ctlIn = nil // the control source ended: nothing to align with
				if heldMain != nil {
					forward(heldMain)
					heldMain = nil
				}
			case cb.barrier != nil && heldMain != nil && heldMain.ID == cb.barrier.ID:
				forward(heldMain)
				heldMain = nil
			case cb.barrier != nil:
				heldCtl = cb.barrier.ID
			case cb.eoi:
			default:
				p.applyControl(cb, &dead)
				cb.release()
			}
			continue
		case <-idleTick:
			inputs.tick(p.clk.monoMs())
			broadcast()
			continue
		}
		if !ok {
			break
		}
		switch {
		case rb.barrier != nil:
			if ctlIn != nil && heldCtl != rb.barrier.ID {
				heldMain = rb.barrier
				continue
			}
			heldCtl = 0
			forward(rb.barrier)
			continue
		case rb.eoi:
			for _, e := range p.edges {
				_ = e.Send(ctx, stream.Message{Kind: stream.EndOfInput})
			}
			continue
		}
		now, wall, synced := p.clk.monoMs(), p.clk.wallMs(), p.clk.wallSynced()
		var filtered int64
		for i := range rb.msgs {
			m := &rb.msgs[i]
			outcome := operators.Rejected
			if m.TooLarge {
				p.prep.Reject = tooLargeReject
			} else {
				outcome = p.prep.Prepare(m.Payload, m.Topic, m.Offset, now, wall, synced)
			}
			switch outcome {
			case operators.Pass:
				if inputs != nil {
					inputs.route(m.Topic, now)
				}
				s := p.prep.Subtask
				if batches[s] == nil {
					batches[s] = stream.NewBatch(p.stride)
				}
				if p.wm != nil {
					batches[s].AppendWatermarked(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, m.Payload, m.Offset, p.wm.Current())
					p.wm.Observe(p.prep.Time)
				} else {
					batches[s].Append(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, m.Payload, m.Offset)
				}
			case operators.Punctuation:
				if pw, ok := p.wm.(*punctuatedWatermark); ok {
					pw.mark(p.prep.Watermark)
				}
			case operators.Filtered:
				filtered++
			case operators.Rejected:
				r := p.prep.Reject
				p.m.deadLettered(r.Reason).Inc()
				if p.dlLog.allow(wall) {
					p.log.Warn("reading dead-lettered", "pipeline", p.name, "reason", r.Reason, "detail", r.Detail, "topic", m.Topic, "offset", m.Offset)
				}
				if p.deadLetter != nil {
					if dead == nil {
						dead = new(operators.Delivery)
					}
					dead.AddDeadLetter(p.name, r.Reason, r.Detail, m.Topic, m.Offset, m.Payload)
				}
			}
		}
		p.m.in.Add(len(rb.msgs))
		p.m.filtered.Add(int(filtered))
		for s, b := range batches {
			if b != nil {
				_ = p.edges[s].Send(ctx, stream.Message{Kind: stream.Records, Batch: b})
				batches[s] = nil
			}
		}
		rb.release()
		if dead != nil {
			p.deadLetter.in <- sinkMsg{d: dead, epoch: p.epoch}
			dead = nil
		}
		broadcast()
	}
	p.closePrepareOutputs()
}

func (p *pipeline) runSubtask(st *subtask) {
	t, e := st.task, p.edges[st.index]
	var tick <-chan time.Time
	if !p.eventTime || p.tickEvery > 0 {
		tk := time.NewTicker(p.tickEvery)
		defer tk.Stop()
		tick = tk.C
	}
	keepLate := p.late != nil
	var lastLate, lastUnassigned int64
	var keyedSeen keyedSeen
	p.replayInFlight(st, keepLate)
	st.sampleState()
	for {
		var (
			m  stream.Message
			ok = true
		)
		select {
		case m = <-e.Priority():
		default:
			if len(st.queue) > 0 {
				// Read ahead by an overtaking barrier: these come first.
				m = st.queue[0]
				st.queue[0] = stream.Message{}
				st.queue = st.queue[1:]
				st.queued.Store(int64(len(st.queue)))
				if len(st.queue) == 0 {
					e.Gate(false) // the overtaken records are processed: the edge takes more
				}
				break
			}
			select {
			case m = <-e.Priority():
			case m, ok = <-e.C():
			case <-tick:
				t.AdvanceProcessingTime(p.clk.monoMs())
				p.emit(st)
				continue
			}
		}
		if !ok {
			break
		}
		if st.failed {
			if m.Kind == stream.Records {
				m.Batch.Release()
			}
			continue
		}
		if m.Kind == stream.Barrier && m.Barrier.Announcement {
			if st.backend != nil && m.Barrier.ID > st.lastBarrier {
				b := m.Barrier
				st.announced, st.announcedAt = &b, p.clk.monoMs()
			}
		} else if m.Kind == stream.Barrier && m.Barrier.ID <= st.overtaken {
			continue // taken already, ahead of the queue
		}
		switch m.Kind {
		case stream.Records:
			p.debugRecords(m.Batch)
			t.Process(m.Batch, keepLate)
			m.Batch.Release()
		case stream.Watermark:
			t.AdvanceWatermark(m.Watermark)
		case stream.EndOfInput:
			// A finished input flushes every window, event time and
			// processing time alike.
			t.AdvanceWatermark(math.MaxInt64)
			t.AdvanceProcessingTime(math.MaxInt64)
			p.emit(st)
			if p.ordered {
				p.releaseHeld(st)
			}
			st.sampleState()
		case stream.Barrier:
			if m.Barrier.Announcement {
				break
			}
			st.announced, st.lastBarrier = nil, m.Barrier.ID
			p.emit(st)
			p.barrier(st, m.Barrier, nil)
		}
		if st.announced != nil && len(st.queue) <= overtakeLimit && p.align.Overtake(st.announcedAt, p.clk.monoMs()) {
			p.overtake(st)
		}
		p.emit(st)
		if st.backend != nil {
			if err := st.stateErr(); err != nil {
				// State errors are sticky (a full store, an I/O error):
				// this subtask cannot go on; the agent stops and the next
				// start restores the last checkpoint.
				st.failed = true
				p.fatal(fmt.Errorf("pipeline %q subtask %d: %w", p.name, st.index, err))
			}
		}
		if d := t.Late - lastLate; d > 0 {
			p.m.late.Add(int(d))
			lastLate = t.Late
		}
		if d := t.Unassigned - lastUnassigned; d > 0 {
			p.m.unassigned.Add(int(d))
			lastUnassigned = t.Unassigned
		}
		p.keyedCounts(st, &keyedSeen)
	}
}

// debugRecords applies the test-only knobs to a batch about to be
// processed: one sleep for the whole batch (the delay per record times its
// length, not a timer per record), and the injected panic.
func (p *pipeline) debugRecords(b *stream.Batch) {
	if p.debugDelay > 0 {
		time.Sleep(p.debugDelay * time.Duration(b.Len()))
	}
	if p.panicAt != 0 && slices.Contains(b.Offsets, p.panicAt) && debugPanicked.CompareAndSwap(false, true) {
		panic(fmt.Sprintf("debug_panic_at_offset: the record at offset %d", p.panicAt))
	}
}

// barrier passes checkpoint barrier b at subtask st: its output so far
// belongs to epoch b.ID, so the sinks get the barrier after it; then the
// state is snapshotted (the view is taken now, written asynchronously).
func (p *pipeline) barrier(st *subtask, b stream.BarrierInfo, more map[string][]byte) {
	p.sinkBarrier(b.ID)
	st.epoch = b.ID + 1
	if p.ckpt == nil {
		return
	}
	task := st.taskID(p.name)
	extra := map[string][]byte{}
	if st.task.Operator() != nil || st.task.Keyed() != nil {
		extra[watermarkExtraKey(p.name, st.index)] = binary.BigEndian.AppendUint64(nil, uint64(st.task.Watermark()))
	}
	if st.index == 0 && b.Control != nil {
		extra[controlExtraKey(p.name)] = b.Control
	}
	if st.index == 0 && p.shape != nil {
		extra[shapeExtraKey(p.name)] = p.shape
	}
	for k, v := range more {
		extra[k] = v
	}
	if st.backend == nil {
		p.ckpt.send(checkpoint.Ack{CheckpointID: b.ID, Task: task, Extra: extra})
		return
	}
	full := b.Full || st.lastSnap == 0 || b.Parent != st.lastSnap
	// The window store keeps changed windows decoded in front of the
	// backend: write them in, so the snapshot holds the state as of b.
	err := flushKeyed(st) // readings waiting for the watermark, into the backend
	if err == nil && st.store != nil {
		err = st.store.Flush()
	}
	if err == nil {
		err = st.stateErr() // the state lacks a result: never checkpoint it
	}
	if err != nil {
		p.ckpt.send(checkpoint.Failure{CheckpointID: b.ID, Task: task, Err: err})
		return
	}
	snap, err := st.backend.Snapshot(full)
	if err != nil {
		p.ckpt.send(checkpoint.Failure{CheckpointID: b.ID, Task: task, Err: err})
		return
	}
	snap = keyedSnapshot(st, snap)
	st.lastSnap = b.ID
	p.ckpt.writeSnapshot(b.ID, task, p.name, snap, extra)
	st.sampleState()
}

// sampleState publishes what the subtask's state holds (the eddy_state_*
// gauges). It runs at checkpoint barriers, not per reading: Usage reads
// bbolt.
func (st *subtask) sampleState() {
	if st.usage == nil || st.backend == nil || st.failed {
		return
	}
	u := st.backend.Usage()
	r := &stateReport{Keys: int64(u.Keys), FileBytes: u.FileBytes, MemoryBytes: u.MemoryBytes}
	if st.store != nil {
		r.MemoryBytes += st.store.MemoryBytes() // the window store's caches in front of the backend
	}
	if k := st.task.Keyed(); k != nil {
		r.MemoryBytes += k.Operator().MemoryBytes() // readings waiting for the watermark
	}
	if op := st.task.Operator(); op != nil {
		s := op.Stats()
		r.Windows, r.Timers = int64(s.OpenWindows), int64(s.PendingTimers)
	}
	st.usage.last.Store(r) // one allocation per checkpoint
}

// overtakeLimit bounds the messages a subtask holds read ahead: each
// overtaking barrier reads up to it what the stages upstream held, so
// checkpoints faster than the operator drains would pile them up. Past it,
// the barrier waits (still announced) until the subtask is back under it.
const overtakeLimit = 32

// overtake takes the announced barrier now, ahead of the records queued
// before it (an unaligned checkpoint): it reads the edge ahead up to the
// barrier itself, stores the records it passed in the subtask's state so
// the snapshot holds them, snapshots, and leaves them queued to be
// processed next. Their output belongs to the next epoch; a restore replays
// them from the checkpoint before any new input.
func (p *pipeline) overtake(st *subtask) {
	id := st.announced.ID
	st.announced = nil
	e := p.edges[st.index]
	var (
		captured []stream.Message
		inBand   *stream.BarrierInfo
		older    []uint64 // in-band barriers of aborted checkpoints passed on the way
	)
	take := func(m stream.Message) bool {
		if m.Kind == stream.Barrier && !m.Barrier.Announcement {
			switch {
			case m.Barrier.ID == id:
				b := m.Barrier
				inBand = &b
				return true
			case m.Barrier.ID > st.overtaken:
				older = append(older, m.Barrier.ID)
			}
			return false
		}
		captured = append(captured, m)
		return false
	}
	// Upstream must deliver up to the barrier: open the gate while reading.
	e.Gate(false)
	q := st.queue
	st.queue = nil
	for i, m := range q {
		if take(m) {
			captured = append(captured, q[i+1:]...)
			break
		}
	}
	for inBand == nil {
		m, ok := <-e.C()
		if !ok {
			// The input ended without the barrier (the region is stopping):
			// no snapshot; process what was read.
			st.queue = captured
			st.queued.Store(int64(len(st.queue)))
			return
		}
		take(m)
	}
	// The in-flight records go into the state under key group | sequence,
	// so the snapshot holds them and a restore hands each to its subtask.
	var (
		keys   [][]byte
		lastWM = int64(math.MinInt64)
		rec    checkpoint.InFlightRecord
	)
	for _, m := range captured {
		switch m.Kind {
		case stream.Watermark:
			lastWM = max(lastWM, m.Watermark)
		case stream.Records:
			b := m.Batch
			for i := 0; i < b.Len(); i++ {
				st.seq++
				rec = checkpoint.InFlightRecord{Seq: st.seq, KeyGroup: b.KeyGroups[i], Key: b.Key(i), Time: b.Times[i],
					Watermark: math.MinInt64, Offset: b.Offsets[i], Values: b.RecordValues(i), Payload: b.Payload(i)}
				if len(b.Watermarks) == b.Len() {
					rec.Watermark = b.Watermarks[i]
				}
				key := binary.BigEndian.AppendUint64([]byte{byte(rec.KeyGroup >> 8), byte(rec.KeyGroup)}, rec.Seq)
				st.buf = checkpoint.AppendInFlight(st.buf[:0], &rec)
				if err := st.backend.Put(st.inflight, key, st.buf); err != nil {
					p.fatal(fmt.Errorf("pipeline %q subtask %d: storing in-flight records: %w", p.name, st.index, err))
					st.failed = true
					st.queue = captured
					return
				}
				keys = append(keys, key)
			}
		}
	}
	for _, old := range older {
		p.sinkBarrier(old)
	}
	st.lastBarrier, st.overtaken = id, id
	p.emit(st)
	p.barrier(st, *inBand, map[string][]byte{inflightExtraKey(p.name, st.index): encodeInflightExtra(lastWM, uint64(len(keys)))})
	// The snapshot's view is taken: the records leave the working state
	// (the next incremental checkpoint records their deletion) and are
	// processed from the queue.
	for _, k := range keys {
		if err := st.backend.Delete(st.inflight, k); err != nil {
			p.fatal(fmt.Errorf("pipeline %q subtask %d: dropping in-flight records: %w", p.name, st.index, err))
			st.failed = true
			break
		}
	}
	p.log.Debug("barrier overtook", "pipeline", p.name, "subtask", st.index, "id", id, "queued_before", len(q), "messages", len(captured), "records", len(keys))
	st.queue = captured
	st.queued.Store(int64(len(st.queue)))
	// The overtaken records still count against the edge's capacity: hold
	// upstream back until they are processed, or every checkpoint would
	// let another edge's worth in.
	e.Gate(len(st.queue) > 0)
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

// sinkBarrier tells the subtask's sinks it passed barrier id.
func (p *pipeline) sinkBarrier(id uint64) {
	for _, s := range p.to {
		s.in <- sinkMsg{barrier: id}
	}
	if p.late != nil {
		p.late.in <- sinkMsg{barrier: id}
	}
	if p.resultDeadLetters {
		p.deadLetter.in <- sinkMsg{barrier: id}
	}
}

// replayInFlight processes the in-flight records a restored unaligned
// checkpoint holds for this subtask, before any new input, in the order
// they were first read, and then moves to the channel's watermark at the
// barrier.
func (p *pipeline) replayInFlight(st *subtask, keepLate bool) {
	if st.backend == nil {
		return
	}
	var (
		recs []checkpoint.InFlightRecord
		keys [][]byte
		bad  error
	)
	err := st.backend.Scan(st.inflight, nil, func(key, value []byte) bool {
		r, err := checkpoint.DecodeInFlight(value)
		if err != nil {
			bad = err
			return false
		}
		recs = append(recs, r)
		keys = append(keys, append([]byte(nil), key...))
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		panic(fmt.Sprintf("pipeline %q subtask %d: reading restored in-flight records: %v", p.name, st.index, err))
	}
	if len(recs) > 0 {
		checkpoint.SortInFlight(recs)
		t := st.task
		for len(recs) > 0 {
			n := min(len(recs), 512)
			b := stream.NewBatch(p.stride)
			for _, r := range recs[:n] {
				if r.Watermark != math.MinInt64 {
					b.AppendWatermarked(r.Key, r.KeyGroup, r.Time, r.Values, r.Payload, r.Offset, r.Watermark)
				} else {
					b.Append(r.Key, r.KeyGroup, r.Time, r.Values, r.Payload, r.Offset)
				}
			}
			recs = recs[n:]
			t.Process(b, keepLate)
			b.Release()
			p.emit(st)
		}
		p.log.Info("replayed in-flight records of an unaligned checkpoint", "pipeline", p.name, "subtask", st.index, "records", len(keys))
	}
	if st.replayWM != math.MinInt64 {
		st.task.AdvanceWatermark(st.replayWM)
		p.emit(st)
	}
	for _, k := range keys {
		if err := st.backend.Delete(st.inflight, k); err != nil {
			panic(fmt.Sprintf("pipeline %q subtask %d: dropping replayed in-flight records: %v", p.name, st.index, err))
		}
	}
}

// inflightSummary counts the subtasks of checkpoint m that took the barrier
// unaligned and the in-flight records they stored.
func inflightSummary(m *checkpoint.Manifest) (tasks int, records uint64) {
	for k, v := range m.Extra {
		if _, n, ok := decodeInflightExtra(v); ok && strings.HasPrefix(k, "inflight/") {
			tasks++
			records += n
		}
	}
	return tasks, records
}

// announce sends trigger tr ahead of the queues to the window subtasks of
// every pipeline with unaligned checkpoints (savepoints stay aligned, as in
// Flink). It never blocks: a subtask that misses one takes that barrier
// aligned.
func (a *Agent) announce(tr checkpoint.Trigger) {
	if tr.Kind == checkpoint.KindSavepoint {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b := stream.BarrierInfo{ID: tr.ID, Full: tr.Kind != checkpoint.KindIncremental, Parent: tr.Parent, Announcement: true}
	for _, p := range a.pipelines {
		if !p.align.Announces() {
			continue
		}
		for _, e := range p.edges {
			e.TrySendPriority(stream.Message{Kind: stream.Barrier, Barrier: b})
		}
	}
}

func inflightExtraKey(pipeline string, subtask int) string {
	return "inflight/" + pipeline + "/" + strconv.Itoa(subtask)
}

// encodeInflightExtra is a subtask's in-flight summary in the manifest:
// version 1, the channel's watermark at the barrier, the record count.
func encodeInflightExtra(wm int64, n uint64) []byte {
	b := []byte{1}
	b = binary.BigEndian.AppendUint64(b, uint64(wm))
	return binary.BigEndian.AppendUint64(b, n)
}

func decodeInflightExtra(b []byte) (wm int64, n uint64, ok bool) {
	if len(b) != 17 || b[0] != 1 {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(b[1:])), binary.BigEndian.Uint64(b[9:]), true
}

func controlExtraKey(pipeline string) string { return "control/" + pipeline }

func watermarkExtraKey(pipeline string, subtask int) string {
	return "watermark/" + pipeline + "/" + strconv.Itoa(subtask)
}

// emit hands the subtask's collected output to the sinks, or, for an
// ordered pipeline, keeps it in the subtask's state until the input ends.
func (p *pipeline) emit(st *subtask) {
	t := st.task
	if d := t.TakeResults(); d != nil {
		if p.ordered {
			p.hold(st, d)
		} else {
			p.m.out.Add(d.Len())
			p.sendResults(st.epoch, d)
		}
	}
	if d := t.TakeLate(); d != nil && p.late != nil {
		p.late.in <- sinkMsg{d: d, epoch: st.epoch}
	}
	if d := t.TakeDead(); d != nil && p.deadLetter != nil && p.resultDeadLetters {
		p.deadLetter.in <- sinkMsg{d: d, epoch: st.epoch}
	}
	if p.keys != nil {
		p.emitRefused(st)
	}
}

// hold stores results by (window end, key, window start, firing), the
// order they are released in. A window fires each number once, so keys
// never collide.
func (p *pipeline) hold(st *subtask, d *operators.Delivery) {
	for _, it := range d.Items() {
		r := it.Result
		if r == nil {
			continue
		}
		// Prefixed by the key group, so a restore with another parallelism
		// hands each result to the subtask that owns its key.
		kg := state.KeyGroup(r.Key, p.maxKeyGroups)
		st.heldKey = heldKey(append(st.heldKey[:0], byte(kg>>8), byte(kg)), r.End, r.Key, r.Start, r.Firing)
		if r.Kind == sink.KindReading {
			// Records of one key and time: in source order.
			st.heldKey = binary.BigEndian.AppendUint64(st.heldKey, r.Seq)
		}
		if err := st.backend.Put(st.held, st.heldKey, it.Payload); err != nil {
			// A result that cannot be held would be lost: the subtask
			// fails (stateErr) and its region restarts from the last
			// checkpoint.
			st.holdErr = fmt.Errorf("holding a result: %w", err)
			return
		}
	}
}

// stateErr returns the subtask's sticky state error: its window store's, or
// a failure to hold a result.
func (st *subtask) stateErr() error {
	if st.store != nil {
		if err := st.store.Err(); err != nil {
			return err
		}
	}
	if err := keyedErr(st); err != nil {
		return err
	}
	return st.holdErr
}

// heldKey encodes the release order so that byte order is (end, key,
// start, firing): times with the sign bit flipped, the key escaped (0x00 →
// 0x00 0xff) and terminated by 0x00 0x01 so a shorter key sorts first.
func heldKey(dst []byte, end int64, key []byte, start int64, firing int) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(end)^(1<<63))
	for _, c := range key {
		dst = append(dst, c)
		if c == 0 {
			dst = append(dst, 0xff)
		}
	}
	dst = append(dst, 0, 1)
	dst = binary.BigEndian.AppendUint64(dst, uint64(start)^(1<<63))
	return binary.BigEndian.AppendUint32(dst, uint32(firing))
}

type heldResult struct{ key, value []byte }

// heldMerge gathers the held results of every subtask of an ordered
// pipeline at the end of input and sends them, sorted, before any subtask
// goes on (so they belong to the epoch of the end of input).
type heldMerge struct {
	mu      sync.Mutex
	arrived int
	results []heldResult
	done    chan struct{}
}

// releaseHeld hands st's held results to the merge and waits until the last
// subtask has sent them all.
func (p *pipeline) releaseHeld(st *subtask) {
	var mine []heldResult
	err := st.backend.Scan(st.held, nil, func(key, value []byte) bool {
		mine = append(mine, heldResult{append([]byte(nil), key...), append([]byte(nil), value...)})
		return true
	})
	if err != nil && st.holdErr == nil {
		st.holdErr = fmt.Errorf("reading held results: %w", err)
	}
	if st.holdErr != nil {
		// Some results are missing: release none. The subtask fails
		// (stateErr) and its region restarts from the last checkpoint.
		p.arriveHeld(st, nil, false)
		return
	}
	p.arriveHeld(st, mine, true)
	// Released: the next checkpoint must not hold them, or a restart after
	// the end of input would release them a second time.
	for _, r := range mine {
		if err := st.backend.Delete(st.held, r.key); err != nil {
			st.holdErr = fmt.Errorf("dropping released results: %w", err)
			return
		}
	}
}

// arriveHeld adds a subtask's held results to the merge; the last subtask
// to arrive sends them all, sorted, and releases the others. A failed
// subtask does not wait (wait false): the input may never end, when its
// region restarts.
func (p *pipeline) arriveHeld(st *subtask, mine []heldResult, wait bool) {
	hm := &p.merge
	hm.mu.Lock()
	hm.results = append(hm.results, mine...)
	hm.arrived++
	last := hm.arrived == len(p.subtasks)
	hm.mu.Unlock()
	if !last {
		if wait {
			<-hm.done
		}
		return
	}
	// Sort on what follows the key-group prefix: (end, key, start, firing).
	slices.SortFunc(hm.results, func(a, b heldResult) int { return bytes.Compare(a.key[2:], b.key[2:]) })
	if len(hm.results) > 0 {
		d := new(operators.Delivery)
		for _, r := range hm.results {
			d.AddRaw(r.value)
		}
		p.m.out.Add(d.Len())
		p.sendResults(st.epoch, d)
	}
	hm.results = nil
	close(hm.done)
}

// sendResults hands a window subtask's results of epoch to every sink in
// to. A sink with max_payload gets only the results that fit: a larger one
// would be refused by its broker on every retry. The others are counted
// and dead-lettered with reason too_large, once per sink refusing them,
// holding the whole result.
func (p *pipeline) sendResults(epoch uint64, d *operators.Delivery) {
	var dead *operators.Delivery
	for _, s := range p.to {
		out := d
		if s.maxPayload > 0 {
			out = p.fitPayload(s, d, &dead)
		}
		if out.Len() > 0 {
			s.in <- sinkMsg{d: out, epoch: epoch}
		}
	}
	if dead != nil {
		p.deadLetter.in <- sinkMsg{d: dead, epoch: epoch}
	}
}

// fitPayload returns d, or, when some of its items are larger than s's
// max_payload, a copy without them; those are counted, logged and added to
// *dead (created on first use) when the pipeline has a dead_letter sink.
func (p *pipeline) fitPayload(s *sinkRunner, d *operators.Delivery, dead **operators.Delivery) *operators.Delivery {
	items := d.Items()
	if !slices.ContainsFunc(items, func(it sink.Item) bool { return len(it.Payload) > s.maxPayload }) {
		return d
	}
	fit := new(operators.Delivery)
	for _, it := range items {
		switch {
		case len(it.Payload) <= s.maxPayload && it.Result != nil:
			fit.AddEncoded(it.Payload, it.Result)
		case len(it.Payload) <= s.maxPayload:
			fit.AddRaw(it.Payload)
		default:
			p.m.deadLettered(operators.ReasonTooLarge).Inc()
			detail := fmt.Sprintf("result of %d bytes is larger than max_payload (%d bytes) of sink %q", len(it.Payload), s.maxPayload, s.name)
			if p.tooLargeLog.allow(p.clk.wallMs()) {
				p.log.Warn("result dead-lettered", "pipeline", p.name, "reason", operators.ReasonTooLarge, "detail", detail)
			}
			if p.deadLetter != nil {
				if *dead == nil {
					*dead = new(operators.Delivery)
				}
				(*dead).AddDeadLetter(p.name, operators.ReasonTooLarge, detail, "", 0, it.Payload)
			}
		}
	}
	return fit
}

// lockedRateLimiter is a rateLimiter shared by goroutines (the subtasks).
type lockedRateLimiter struct {
	mu sync.Mutex
	r  rateLimiter
}

func (l *lockedRateLimiter) allow(nowMs int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.allow(nowMs)
}

// rateLimiter lets a few log lines per minute through.
type rateLimiter struct {
	windowStart int64
	n           int
}

func (r *rateLimiter) allow(nowMs int64) bool {
	const perMinute = 5
	if nowMs-r.windowStart >= 60_000 {
		r.windowStart, r.n = nowMs, 0
	}
	r.n++
	return r.n <= perMinute
}
