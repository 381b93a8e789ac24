package stages

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/io/source"
	"github.com/eddy-edge/eddy/operators/stream"
)

// logPanic logs a recovered panic with the stack of the goroutine that
// panicked, once; the error that fails the region, which the failover and
// checkpoint lines repeat, carries only the panic's value.
func (p *Pipeline) logPanic(err error) {
	p.log.Error("pipeline stage panicked", "err", err, "stack", string(debug.Stack()))
}

// guardPrepare runs the prepare stage and, if it panics, reports the
// failure (the agent stops and may restart from the last checkpoint) and
// keeps its input drained so the source and shutdown never block on it.
func (p *Pipeline) guardPrepare() {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		err := fmt.Errorf("pipeline %q: panic in the prepare stage: %v", p.name, r)
		p.logPanic(err)
		p.fatal(err)
		for rb := range p.in {
			rb.Release()
		}
		p.closePrepareOutputs()
	}()
	p.runPrepare()
}

// closePrepareOutputs ends the prepare stage's outputs, once.
func (p *Pipeline) closePrepareOutputs() {
	p.closeOnce.Do(func() {
		for _, e := range p.edges {
			e.Close()
		}
		if p.deadLetter != nil {
			p.deadLetter.Done()
		}
	})
}

// tooLargeReject dead-letters a message its source refused as larger than
// max_message_size (its payload is cut).
var tooLargeReject = operators.Reject{Reason: operators.ReasonTooLarge,
	Detail: "message larger than the source's max_message_size; the dead letter holds its first bytes"}

// applyControl merges control messages into the pipeline's control state;
// a message that cannot be applied is dead-lettered.
func (p *Pipeline) applyControl(rb *SourceBatch, dead **operators.Delivery) {
	for i := range rb.Msgs {
		m := &rb.Msgs[i]
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
				p.deadLetter.In <- SinkMsg{Delivery: d, Epoch: p.epoch}
			}
		}
	}
	p.m.controlKeys.Store(int64(p.control.Keys()))
}

// runPrepare is the prepare stage's goroutine: it reads the source's
// batches (and the control stream's), prepares each reading, and sends
// batches, watermarks and barriers down the edges to the subtasks until
// the input ends.
func (p *Pipeline) runPrepare() {
	l := &prepareLoop{p: p, batches: make([]*stream.Batch, len(p.edges)), lastWM: math.MinInt64, ctlIn: p.controlIn}
	l.inputs, _ = p.wm.(*inputWatermarks)
	l.live = !p.holdProcTime
	var idleTick <-chan time.Time
	if l.inputs != nil || p.holdsAfterResume() || p.tickEvery > 0 {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		idleTick = tk.C
	}
	for {
		mainIn := p.in
		if l.heldMain != nil {
			mainIn = nil
		}
		ctl := l.ctlIn
		if l.heldCtl != 0 {
			ctl = nil
		}
		select {
		case rb, ok := <-mainIn:
			if !ok {
				p.closePrepareOutputs()
				return
			}
			l.onMain(rb)
		case cb, ok := <-ctl:
			l.onControl(cb, ok)
		case <-idleTick:
			l.onIdle()
		}
	}
}

// prepareLoop is the prepare stage's state between two inputs: the batches
// being filled per subtask, the last watermark sent, and the barrier
// alignment with the control stream.
//
// With a control stream the prepare stage has two inputs, aligned at
// barriers (Chandy–Lamport): the first input to deliver barrier n is held
// until the other delivers it too, so the control state in checkpoint n is
// exactly what the readings before barrier n saw.
type prepareLoop struct {
	p        *Pipeline
	batches  []*stream.Batch
	lastWM   int64
	inputs   *inputWatermarks // per topic filter; nil for one generator
	lastRead int64            // monotonic time of the last batch of readings
	dead     *operators.Delivery
	// live: the input follows the live tail (not a replay of the ingest
	// log), so the wall clock moves processing time on between readings;
	// procTime is the last processing time sent down the edges.
	live     bool
	procTime int64
	// released: an old definition on processing time may fire its windows
	// that end at the cut (cutGrace).
	released bool
	// elsewhere is the newest processing time of the readings of this
	// batch the other definition takes (math.MinInt64: none).
	elsewhere int64

	heldMain *checkpoint.Trigger // main barrier waiting for the control one
	heldCtl  uint64              // control barrier waiting for the main one
	ctlIn    <-chan *SourceBatch // nil once the control source ended
}

// prepareCtx is never cancelled: internal edges drain on shutdown; only
// the sources are cancelled.
var prepareCtx = context.Background()

// broadcast sends the watermark down every edge when it advanced.
func (l *prepareLoop) broadcast() {
	p := l.p
	if p.wm == nil {
		return
	}
	if wm := p.resume.Apply(p.wm.Current()); wm > l.lastWM {
		l.lastWM = wm
		if p.roll != nil && !p.retired && wm >= p.roll.RetireAt {
			p.retire("watermark", wm)
		}
		p.m.watermark.Store(wm)
		for _, e := range p.edges {
			_ = e.Send(prepareCtx, stream.Message{Kind: stream.Watermark, Watermark: wm})
		}
	}
}

// forward sends a barrier down every edge after everything before it.
func (l *prepareLoop) forward(tr *checkpoint.Trigger) {
	p := l.p
	b := stream.BarrierInfo{ID: tr.ID, Full: tr.Kind != checkpoint.KindIncremental, Parent: tr.Parent, Resume: p.resumeSnapshot(),
		MaxTime: p.maxTime, Sparkplug: p.sparkplugSnapshot()}
	if p.control != nil {
		b.Control = p.control.Snapshot()
	}
	for _, e := range p.edges {
		_ = e.Send(prepareCtx, stream.Message{Kind: stream.Barrier, Barrier: b})
	}
	if p.deadLetter != nil {
		p.deadLetter.In <- SinkMsg{Barrier: b.ID}
	}
	p.epoch = b.ID + 1
}

// onControl takes one batch of the control stream (ok false: it ended).
func (l *prepareLoop) onControl(cb *SourceBatch, ok bool) {
	switch {
	case !ok:
		l.ctlIn = nil // the control source ended: nothing to align with
		if l.heldMain != nil {
			l.forward(l.heldMain)
			l.heldMain = nil
		}
	case cb.Barrier != nil && l.heldMain != nil && l.heldMain.ID == cb.Barrier.ID:
		l.forward(l.heldMain)
		l.heldMain = nil
	case cb.Barrier != nil:
		l.heldCtl = cb.Barrier.ID
	case cb.EOI, cb.CaughtUp:
	default:
		l.p.applyControl(cb, &l.dead)
		cb.Release()
	}
}

// onIdle advances idle inputs' watermarks and ends a resume hold that no
// reading keeps up.
func (l *prepareLoop) onIdle() {
	p := l.p
	if l.inputs != nil {
		l.inputs.tick(p.clk.MonoMs())
	}
	if p.resume != nil && p.clk.MonoMs()-l.lastRead >= p.burst.hold.Milliseconds() && p.resume.Holding() {
		// Readings stopped coming during a hold. Only then: a replay
		// reads old arrivals, and the wall clock would end its holds
		// where the live run did not.
		p.resume.ReleaseBy(p.clk.WallMs())
	}
	l.broadcast()
	if l.live && p.tickEvery > 0 {
		l.advanceProcessingTime(p.clk.WallMs())
	}
}

// advanceProcessingTime sends processing time now down every edge when
// it advanced. A live input's ticks call it, and an old definition on
// processing time with the arrivals of the readings its new definition
// takes: otherwise, during a replay the readings' arrivals move
// processing time, in the subtasks.
func (l *prepareLoop) advanceProcessingTime(now int64) {
	p := l.p
	r := p.roll
	old := r != nil && r.ProcessingTime
	if old && !l.released {
		if now >= r.Cut+cutGrace.Milliseconds() {
			l.released = true
		} else {
			now = min(now, r.Cut-2) // the last window before the cut stays open
		}
	}
	if now <= l.procTime {
		return
	}
	l.procTime = now
	for _, e := range p.edges {
		_ = e.Send(prepareCtx, stream.Message{Kind: stream.ProcessingTime, ProcessingTime: now})
	}
	if old {
		p.maxTime = max(p.maxTime, now) // how far it went: CheckRollover reads it
		if !p.retired && now >= r.RetireAt {
			p.retire("processing_time", now)
		}
	}
}

// retire marks the old definition retired once its time (what, at) has
// passed its last window: from then on it takes no reading.
func (p *Pipeline) retire(what string, at int64) {
	p.retired = true
	r := p.roll
	p.log.Info("rollover: the old definition has finished its windows and retires", "pipeline", r.Pipeline,
		"definition", r.OldHash, "cut", formatCut(r.Cut), what, formatCut(at))
}

// cutGrace is how long after a cut on processing time the old definition
// still waits for readings that arrived before it: arrivals are stamped
// when each connection receives a message, so a reading stamped just
// before the cut may reach the pipeline after one stamped at it. The old
// definition fires its last window once its input holds a reading stamped
// cutGrace after the cut, or, live, once the wall clock is there.
const cutGrace = time.Second

// onMain takes one batch of the main input: a barrier (held while the
// control stream has not delivered it), the end of input, or readings.
func (l *prepareLoop) onMain(rb *SourceBatch) {
	p := l.p
	switch {
	case rb.Barrier != nil:
		if l.ctlIn != nil && l.heldCtl != rb.Barrier.ID {
			l.heldMain = rb.Barrier
			return
		}
		l.heldCtl = 0
		l.forward(rb.Barrier)
		return
	case rb.EOI:
		for _, e := range p.edges {
			_ = e.Send(prepareCtx, stream.Message{Kind: stream.EndOfInput})
		}
		return
	case rb.CaughtUp:
		l.live = true
		return
	}
	now, wall, synced := p.clk.MonoMs(), p.clk.WallMs(), p.clk.WallSynced()
	l.lastRead = now
	if p.roll != nil && p.retired && p.late == nil {
		// A retired old definition has fired every window it had: the
		// readings are the new one's, and decoding them again is waste
		// (with a late_output it goes on sending its late readings there).
		p.m.in.Add(len(rb.Msgs))
		p.m.filtered.Add(len(rb.Msgs))
		rb.Release()
		return
	}
	var in, filtered int64
	l.elsewhere = math.MinInt64
	for i := range rb.Msgs {
		m := &rb.Msgs[i]
		if p.resume != nil {
			// Every message counts, read or rejected: the first of a
			// resumed session may be a bad one.
			p.resume.Arrive(m.Arrival, m.ResumeStart, p.resume.Apply(p.wm.Current()))
		}
		if p.sp != nil && !m.TooLarge {
			n, f := l.sparkplugMessage(m, now, wall, synced)
			in, filtered = in+n, filtered+f
			continue
		}
		in++
		outcome := operators.Rejected
		if m.TooLarge {
			p.prep.Reject = tooLargeReject
		} else {
			outcome = p.prep.PrepareMessage(m.Payload, m.Topic, m.Props, m.Offset, m.Arrival, wall, synced)
		}
		if l.outcome(outcome, m, m.Offset, m.Payload, now, wall) {
			filtered++
		}
	}
	p.m.in.Add(int(in))
	p.m.filtered.Add(int(filtered))
	for s, b := range l.batches {
		if b != nil {
			_ = p.edges[s].Send(prepareCtx, stream.Message{Kind: stream.Records, Batch: b})
			l.batches[s] = nil
		}
	}
	rb.Release()
	if l.dead != nil {
		p.deadLetter.In <- SinkMsg{Delivery: l.dead, Epoch: p.epoch}
		l.dead = nil
	}
	l.broadcast()
	if l.elsewhere != math.MinInt64 && p.roll != nil && p.roll.ProcessingTime {
		// Readings from the cut on are the new definition's, but their
		// arrivals move the old one's processing time, after the readings
		// before them: its windows close as they come, in a replay too.
		l.advanceProcessingTime(l.elsewhere)
	}
}

// outcome acts on what the preparer did with a reading of message m whose
// payload (m's, or one reading of a Sparkplug message) it read; offset is
// the reading's (m's, or stream.ReadingOffset). It reports whether the
// filter dropped it.
func (l *prepareLoop) outcome(o operators.Outcome, m *source.Message, offset uint64, payload []byte, now, wall int64) (filtered bool) {
	switch o {
	case operators.Pass:
		if l.released { // only an old definition on processing time is
			// Stamped before the cut, read after the old definition fired
			// its last window: a window would have to reopen for it.
			l.p.m.late.Inc()
			return false
		}
		l.route(m, offset, payload, now)
	case operators.Punctuation:
		if pw, ok := l.p.wm.(*punctuatedWatermark); ok {
			pw.mark(l.p.prep.Watermark)
		}
	case operators.Filtered:
		return true
	case operators.Elsewhere:
		// The pipeline's other definition takes it; its time still moves
		// this one's watermark, so that its windows close.
		if l.p.wm != nil {
			l.p.wm.Observe(l.p.prep.Time)
		}
		l.elsewhere = max(l.elsewhere, l.p.prep.Time)
		return true
	case operators.Rejected:
		l.reject(m, payload, wall)
	}
	return false
}

// route appends the reading the preparer passed to its subtask's batch,
// stamped with the watermark it was read under.
func (l *prepareLoop) route(m *source.Message, offset uint64, payload []byte, now int64) {
	p := l.p
	if l.inputs != nil {
		l.inputs.route(m.Topic, now)
	}
	s := p.prep.Subtask
	p.maxTime = max(p.maxTime, p.prep.Time)
	if l.batches[s] == nil {
		l.batches[s] = stream.NewBatch(p.stride)
	}
	b := l.batches[s]
	if p.wm != nil {
		wm := p.wm.Current()
		b.AppendWatermarked(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, payload, offset, p.resume.Apply(wm))
		if p.resume != nil && p.prep.Time <= wm {
			p.resume.Behind() // backlog still coming: a hold waits on
		}
		p.wm.Observe(p.prep.Time)
		if p.resume.InEpisode() {
			b.MarkResumed()
		}
	} else {
		b.Append(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, payload, offset)
	}
	if p.tickEvery > 0 {
		b.AppendArrival(m.Arrival)
	}
	if c := p.prep.Control; c != nil {
		b.AppendControl(c) // a keyed pipeline reading control.*
	}
}

// reject counts, logs (rate limited) and dead-letters a reading the
// preparer refused.
func (l *prepareLoop) reject(m *source.Message, payload []byte, wall int64) {
	p := l.p
	r := p.prep.Reject
	p.m.deadLettered(r.Reason).Inc()
	if p.dlLog.allow(wall) {
		p.log.Warn("reading dead-lettered", "pipeline", p.name, "reason", r.Reason, "detail", r.Detail, "topic", m.Topic, "offset", m.Offset)
	}
	if p.deadLetter != nil {
		if l.dead == nil {
			l.dead = new(operators.Delivery)
		}
		l.dead.AddDeadLetter(p.name, r.Reason, r.Detail, m.Topic, m.Offset, payload)
	}
}
