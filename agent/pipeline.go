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
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/control"
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

	to         []*sinkRunner
	late       *sinkRunner
	deadLetter *sinkRunner

	// control is the state of the pipeline's control stream (controlIn),
	// read by its expressions; nil without one.
	control     *control.State
	controlIn   chan *rawBatch
	controlKeys atomic.Int64

	ckpt  *checkpointer // nil: no checkpoints
	fatal func(error)   // stops the agent
	epoch uint64        // the prepare stage's epoch (dead letters)

	m   *pipelineMetrics
	log *slog.Logger
	clk clock

	dlLog rateLimiter
}

// subtask is one parallel instance of a pipeline's keyed window.
type subtask struct {
	index    int
	task     *operators.WindowTask
	backend  state.Backend // nil for a pass-through pipeline
	store    *window.StateStore
	failed   bool         // the state store failed: input is drained, not processed
	held     state.Bucket // ordered pipelines: results by (end, key, start, firing)
	epoch    uint64       // results produced now belong to this epoch
	lastSnap uint64       // checkpoint id of the last snapshot taken
	heldKey  []byte
}

func (st *subtask) taskID(pipeline string) string {
	return "pipeline/" + pipeline + "/" + strconv.Itoa(st.index)
}

// run starts the prepare stage and the window subtasks and returns when all
// input has been processed and handed to the sinks.
func (p *pipeline) run() {
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
	p.controlKeys.Store(int64(p.control.Keys()))
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
		if p.ordered {
			p.arriveHeld(st, nil) // do not keep the other subtasks waiting at the end of input
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
		now, wall := p.clk.monoMs(), p.clk.wallMs()
		var filtered int64
		for i := range rb.msgs {
			m := &rb.msgs[i]
			switch p.prep.Prepare(m.Payload, m.Topic, m.Offset, now, wall) {
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
	for {
		var (
			m  stream.Message
			ok = true
		)
		select {
		case m = <-e.Priority():
		default:
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
		switch m.Kind {
		case stream.Records:
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
		case stream.Barrier:
			p.emit(st)
			p.barrier(st, m.Barrier)
		}
		p.emit(st)
		if st.store != nil {
			if err := st.store.Err(); err != nil {
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
	}
}

// barrier passes checkpoint barrier b at subtask st: its output so far
// belongs to epoch b.ID, so the sinks get the barrier after it; then the
// state is snapshotted (the view is taken now, written asynchronously).
func (p *pipeline) barrier(st *subtask, b stream.BarrierInfo) {
	for _, s := range p.to {
		s.in <- sinkMsg{barrier: b.ID}
	}
	if p.late != nil {
		p.late.in <- sinkMsg{barrier: b.ID}
	}
	st.epoch = b.ID + 1
	if p.ckpt == nil {
		return
	}
	task := st.taskID(p.name)
	extra := map[string][]byte{}
	if op := st.task.Operator(); op != nil {
		extra[watermarkExtraKey(p.name, st.index)] = binary.BigEndian.AppendUint64(nil, uint64(op.Watermark()))
	}
	if st.index == 0 && b.Control != nil {
		extra[controlExtraKey(p.name)] = b.Control
	}
	if st.backend == nil {
		p.ckpt.send(checkpoint.Ack{CheckpointID: b.ID, Task: task, Extra: extra})
		return
	}
	full := b.Full || st.lastSnap == 0 || b.Parent != st.lastSnap
	// The window store keeps changed windows decoded in front of the
	// backend: write them in, so the snapshot holds the state as of b.
	if err := st.store.Flush(); err != nil {
		p.ckpt.send(checkpoint.Failure{CheckpointID: b.ID, Task: task, Err: err})
		return
	}
	snap, err := st.backend.Snapshot(full)
	if err != nil {
		p.ckpt.send(checkpoint.Failure{CheckpointID: b.ID, Task: task, Err: err})
		return
	}
	st.lastSnap = b.ID
	p.ckpt.writeSnapshot(b.ID, task, p.name, snap, extra)
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
			for _, s := range p.to {
				s.in <- sinkMsg{d: d, epoch: st.epoch}
			}
		}
	}
	if d := t.TakeLate(); d != nil && p.late != nil {
		p.late.in <- sinkMsg{d: d, epoch: st.epoch}
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
		if err := st.backend.Put(st.held, st.heldKey, it.Payload); err != nil {
			p.log.Error("holding a result failed", "pipeline", p.name, "err", err)
		}
	}
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
	if err != nil {
		p.log.Error("reading held results failed", "pipeline", p.name, "err", err)
	}
	p.arriveHeld(st, mine)
	// Released: the next checkpoint must not hold them, or a restart after
	// the end of input would release them a second time.
	for _, r := range mine {
		if err := st.backend.Delete(st.held, r.key); err != nil {
			p.log.Error("dropping released results failed", "pipeline", p.name, "err", err)
			return
		}
	}
}

// arriveHeld adds a subtask's held results to the merge; the last subtask
// to arrive sends them all, sorted, and releases the others.
func (p *pipeline) arriveHeld(st *subtask, mine []heldResult) {
	hm := &p.merge
	hm.mu.Lock()
	hm.results = append(hm.results, mine...)
	hm.arrived++
	last := hm.arrived == len(p.subtasks)
	hm.mu.Unlock()
	if !last {
		<-hm.done
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
		for _, s := range p.to {
			s.in <- sinkMsg{d: d, epoch: st.epoch}
		}
	}
	hm.results = nil
	close(hm.done)
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
