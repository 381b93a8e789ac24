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

// guardPrepare runs the prepare stage and, if it panics, reports the
// failure (the agent stops and may restart from the last checkpoint) and
// keeps its input drained so the source and shutdown never block on it.
func (p *Pipeline) guardPrepare() {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		p.fatal(fmt.Errorf("pipeline %q: panic in the prepare stage: %v\n%s", p.name, r, debug.Stack()))
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
	var idleTick <-chan time.Time
	if l.inputs != nil || p.holdsAfterResume() {
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
		p.m.watermark.Store(wm)
		for _, e := range p.edges {
			_ = e.Send(prepareCtx, stream.Message{Kind: stream.Watermark, Watermark: wm})
		}
	}
}

// forward sends a barrier down every edge after everything before it.
func (l *prepareLoop) forward(tr *checkpoint.Trigger) {
	p := l.p
	b := stream.BarrierInfo{ID: tr.ID, Full: tr.Kind != checkpoint.KindIncremental, Parent: tr.Parent, Resume: p.resumeSnapshot()}
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
	case cb.EOI:
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
}

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
	}
	now, wall, synced := p.clk.MonoMs(), p.clk.WallMs(), p.clk.WallSynced()
	l.lastRead = now
	var filtered int64
	for i := range rb.Msgs {
		m := &rb.Msgs[i]
		if p.resume != nil {
			// Every message counts, read or rejected: the first of a
			// resumed session may be a bad one.
			p.resume.Arrive(m.Arrival, m.ResumeStart, p.resume.Apply(p.wm.Current()))
		}
		outcome := operators.Rejected
		if m.TooLarge {
			p.prep.Reject = tooLargeReject
		} else {
			outcome = p.prep.PrepareMessage(m.Payload, m.Topic, m.Props, m.Offset, now, wall, synced)
		}
		switch outcome {
		case operators.Pass:
			l.route(m, now)
		case operators.Punctuation:
			if pw, ok := p.wm.(*punctuatedWatermark); ok {
				pw.mark(p.prep.Watermark)
			}
		case operators.Filtered:
			filtered++
		case operators.Rejected:
			l.reject(m, wall)
		}
	}
	p.m.in.Add(len(rb.Msgs))
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
}

// route appends the reading the preparer passed to its subtask's batch,
// stamped with the watermark it was read under.
func (l *prepareLoop) route(m *source.Message, now int64) {
	p := l.p
	if l.inputs != nil {
		l.inputs.route(m.Topic, now)
	}
	s := p.prep.Subtask
	if l.batches[s] == nil {
		l.batches[s] = stream.NewBatch(p.stride)
	}
	b := l.batches[s]
	if p.wm != nil {
		wm := p.wm.Current()
		b.AppendWatermarked(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, m.Payload, m.Offset, p.resume.Apply(wm))
		if p.resume != nil && p.prep.Time <= wm {
			p.resume.Behind() // backlog still coming: a hold waits on
		}
		p.wm.Observe(p.prep.Time)
		if p.resume.InEpisode() {
			b.MarkResumed()
		}
	} else {
		b.Append(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, m.Payload, m.Offset)
	}
	if c := p.prep.Control; c != nil {
		b.AppendControl(c) // a keyed pipeline reading control.*
	}
}

// reject counts, logs (rate limited) and dead-letters a reading the
// preparer refused.
func (l *prepareLoop) reject(m *source.Message, wall int64) {
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
		l.dead.AddDeadLetter(p.name, r.Reason, r.Detail, m.Topic, m.Offset, m.Payload)
	}
}
