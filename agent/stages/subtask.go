package stages

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window"
)

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

	// Reads from checkpoint files (cold.go): the files handed in by the
	// checkpoint driver, and the backend Snapshot whose file was attached
	// last.
	cold    *coldFiles
	coldSeq uint64
}

func (st *subtask) taskID(pipeline string) string {
	return "pipeline/" + pipeline + "/" + strconv.Itoa(st.index)
}

// guardSubtask runs a window subtask and, if it panics, reports the failure
// and drains its input until the prepare stage closes it.
func (p *Pipeline) guardSubtask(st *subtask) {
	defer func() {
		if st.cold != nil {
			st.cold.close() // what comes later has no backend to go under
		}
	}()
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		err := fmt.Errorf("pipeline %q subtask %d: panic: %v", p.name, st.index, r)
		p.logPanic(err)
		p.fatal(err)
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

func (p *Pipeline) runSubtask(st *subtask) {
	e := p.edges[st.index]
	keepLate := p.late != nil
	var seen subtaskCounts
	p.replayInFlight(st, keepLate)
	st.sampleState()
	for {
		m, ok := st.next(e)
		if !ok {
			return
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
				st.announced, st.announcedAt = &b, p.clk.MonoMs()
			}
		} else if m.Kind == stream.Barrier && m.Barrier.ID <= st.overtaken {
			continue // taken already, ahead of the queue
		}
		if m.Kind == stream.Barrier {
			// The previous snapshot's file first, so the snapshot this
			// barrier takes finds it attached (see state.Bolt's
			// nothingUnder: its deletions can then leave the cache).
			p.drainCold(st)
		}
		p.handle(st, m, keepLate)
		if st.announced != nil && len(st.queue) <= overtakeLimit && p.align.Overtake(st.announcedAt, p.clk.MonoMs()) {
			p.overtake(st)
		}
		p.emit(st)
		p.drainCold(st)
		if st.backend != nil {
			if err := st.stateErr(); err != nil {
				// State errors are sticky (a full store, an I/O error):
				// this subtask cannot go on; the agent stops and the next
				// start restores the last checkpoint.
				st.failed = true
				p.fatal(fmt.Errorf("pipeline %q subtask %d: %w", p.name, st.index, err))
			}
		}
		seen.report(p, st)
	}
}

// next returns the subtask's next message: one on the priority path
// first, then those read ahead by an overtaking barrier, then the edge's.
// ok is false once the edge is closed.
func (st *subtask) next(e *stream.Edge) (m stream.Message, ok bool) {
	select {
	case m = <-e.Priority():
		return m, true
	default:
	}
	if len(st.queue) > 0 {
		m = st.queue[0]
		st.queue[0] = stream.Message{}
		st.queue = st.queue[1:]
		st.queued.Store(int64(len(st.queue)))
		if len(st.queue) == 0 {
			e.Gate(false) // the overtaken records are processed: the edge takes more
		}
		return m, true
	}
	select {
	case m = <-e.Priority():
		return m, true
	case m, ok = <-e.C():
		return m, ok
	}
}

// handle applies one message to the subtask's window task.
func (p *Pipeline) handle(st *subtask, m stream.Message, keepLate bool) {
	t := st.task
	switch m.Kind {
	case stream.Records:
		p.debugRecords(m.Batch)
		t.Process(m.Batch, keepLate)
		m.Batch.Release()
	case stream.Watermark:
		t.AdvanceWatermark(m.Watermark)
	case stream.ProcessingTime:
		t.AdvanceProcessingTime(m.ProcessingTime)
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
			return
		}
		st.announced, st.lastBarrier = nil, m.Barrier.ID
		p.emit(st)
		p.barrier(st, m.Barrier, nil)
	}
}

// subtaskCounts is what a subtask's counters were when last reported to
// the pipeline's metrics, so each report adds only the difference.
type subtaskCounts struct {
	late, lateResumed, unassigned, overflowed int64
	keyed                                     keyedSeen
}

// overflows reports result values that overflowed since the last call.
func (c *subtaskCounts) overflows(p *Pipeline, t *operators.WindowTask) {
	if d := t.Overflowed - c.overflowed; d > 0 {
		p.noteOverflow(t.LastOverflow, d)
		c.overflowed = t.Overflowed
	}
}

// report adds to the pipeline's metrics what the subtask counted since the
// last call: late readings (those of a resumed session's burst apart),
// unassigned ones, overflowed values, the keyed operator's counts.
func (c *subtaskCounts) report(p *Pipeline, st *subtask) {
	t := st.task
	if d := t.Late - c.late; d > 0 {
		r := t.LateResumed - c.lateResumed
		p.m.late.Add(int(d - r))
		if r > 0 {
			p.m.lateResumed.Add(int(r))
			p.burst.add(r)
		}
		c.late, c.lateResumed = t.Late, t.LateResumed
	}
	if d := t.Unassigned - c.unassigned; d > 0 {
		p.m.unassigned.Add(int(d))
		c.unassigned = t.Unassigned
	}
	c.overflows(p, t)
	p.keyedCounts(st, &c.keyed)
}

// noteOverflow counts n result values that overflowed float64 (written as
// null) and logs the latest, o, a few times a minute at most.
func (p *Pipeline) noteOverflow(o operators.Overflow, n int64) {
	p.m.overflow.Add(int(n))
	if p.overflowLog.allow(p.clk.WallMs()) {
		p.log.Warn("result overflowed float64 and is written as null", "pipeline", p.name, "reason", "overflow",
			"aggregates", strings.Join(o.Aggregates, ","), "key", o.Key, "window_start", time.UnixMilli(o.Start).UTC(), "window_end", time.UnixMilli(o.End).UTC(), "values", n)
	}
}

// debugRecords applies the test-only knobs to a batch about to be
// processed: one sleep for the whole batch (the delay per record times its
// length, not a timer per record), and the injected panic.
func (p *Pipeline) debugRecords(b *stream.Batch) {
	if p.debugDelay > 0 {
		time.Sleep(p.debugDelay * time.Duration(b.Len()))
	}
	if p.panicAt != 0 && slices.ContainsFunc(b.Offsets, func(o uint64) bool { return stream.MessageOffset(o) == p.panicAt }) && debugPanicked.CompareAndSwap(false, true) {
		panic(fmt.Sprintf("debug_panic_at_offset: the record at offset %d", p.panicAt))
	}
}

// sampleState publishes what the subtask's state holds (the eddy_state_*
// gauges). It runs at checkpoint barriers, not per reading: Usage reads
// bbolt.
func (st *subtask) sampleState() {
	if st.usage == nil || st.backend == nil || st.failed {
		return
	}
	u := st.backend.Usage()
	r := &admin.StateReport{Keys: int64(u.Keys), FileBytes: u.FileBytes, FileWrittenBytes: u.WrittenBytes, CheckpointReads: u.CheckpointReads, MemoryBytes: u.MemoryBytes}
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

// emit hands the subtask's collected output to the sinks, or, for an
// ordered pipeline, keeps it in the subtask's state until the input ends.
func (p *Pipeline) emit(st *subtask) {
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
		p.late.In <- SinkMsg{Delivery: d, Epoch: st.epoch}
	}
	if d := t.TakeDead(); d != nil && p.deadLetter != nil && p.resultDeadLetters {
		p.deadLetter.In <- SinkMsg{Delivery: d, Epoch: st.epoch}
	}
	if p.keys != nil {
		p.emitRefused(st)
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

// sendResults hands a window subtask's results of epoch to every sink in
// to. A sink with max_payload, or whose MQTT 5 broker announced a Maximum
// Packet Size, gets only the results that fit: a larger one would be
// refused by its broker on every retry. The others are counted and
// dead-lettered with reason too_large, once per sink refusing them,
// holding the whole result.
func (p *Pipeline) sendResults(epoch uint64, d *operators.Delivery) {
	var dead *operators.Delivery
	for _, s := range p.to {
		out := d
		if s.MaxPayload > 0 || s.PacketLimit != nil {
			out = p.fitPayload(s, d, &dead)
		}
		if out.Len() > 0 {
			s.In <- SinkMsg{Delivery: out, Epoch: epoch}
		}
	}
	if dead != nil {
		p.deadLetter.In <- SinkMsg{Delivery: dead, Epoch: epoch}
	}
}

// fitPayload returns d, or, when some of its items are larger than s's
// max_payload or its broker's Maximum Packet Size, a copy without them;
// those are counted, logged and added to *dead (created on first use) when
// the pipeline has a dead_letter sink.
func (p *Pipeline) fitPayload(s Sink, d *operators.Delivery, dead **operators.Delivery) *operators.Delivery {
	items := d.Items()
	tooLarge := func(it record.Item) string {
		if s.MaxPayload > 0 && len(it.Payload) > s.MaxPayload {
			return fmt.Sprintf("result of %d bytes is larger than max_payload (%d bytes) of sink %q", len(it.Payload), s.MaxPayload, s.Name)
		}
		if s.PacketLimit != nil {
			if size, limit, over := s.PacketLimit(it); over {
				return fmt.Sprintf("result's MQTT 5 PUBLISH of %d bytes is larger than the Maximum Packet Size (%d bytes) the broker of sink %q announces", size, limit, s.Name)
			}
		}
		return ""
	}
	first := slices.IndexFunc(items, func(it record.Item) bool { return tooLarge(it) != "" })
	if first < 0 {
		return d
	}
	fit := new(operators.Delivery)
	for i, it := range items {
		detail := ""
		if i >= first {
			detail = tooLarge(it)
		}
		switch {
		case detail == "" && it.Result != nil:
			fit.AddEncoded(it.Payload, it.Result)
		case detail == "":
			fit.AddRaw(it.Payload)
		default:
			p.m.deadLettered(operators.ReasonTooLarge).Inc()
			if p.tooLargeLog.allow(p.clk.WallMs()) {
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
