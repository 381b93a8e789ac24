package agent

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
	"github.com/eddy-edge/eddy/operators/stream"
)

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

func (p *pipeline) runPrepare() {
	ctx := context.Background() // internal edges drain on shutdown; only sources are cancelled
	batches := make([]*stream.Batch, len(p.edges))
	lastWM := int64(math.MinInt64)
	broadcast := func() {
		if p.wm == nil {
			return
		}
		if wm := p.resume.Apply(p.wm.Current()); wm > lastWM {
			lastWM = wm
			p.m.watermark.Store(wm)
			for _, e := range p.edges {
				_ = e.Send(ctx, stream.Message{Kind: stream.Watermark, Watermark: wm})
			}
		}
	}
	inputs, _ := p.wm.(*inputWatermarks)
	var lastRead int64 // monotonic time of the last batch of readings
	var idleTick <-chan time.Time
	if inputs != nil || p.holdsAfterResume() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		idleTick = tk.C
	}
	var dead *operators.Delivery
	forward := func(tr *checkpoint.Trigger) {
		// Everything before the barrier is already on the edges; the
		// barrier follows it in-band.
		b := stream.BarrierInfo{ID: tr.ID, Full: tr.Kind != checkpoint.KindIncremental, Parent: tr.Parent, Resume: p.resumeSnapshot()}
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
			if inputs != nil {
				inputs.tick(p.clk.monoMs())
			}
			if p.resume != nil && p.clk.monoMs()-lastRead >= p.burst.hold.Milliseconds() && p.resume.Holding() {
				// Readings stopped coming during a hold. Only then: a
				// replay reads old arrivals, and the wall clock would
				// end its holds where the live run did not.
				p.resume.ReleaseBy(p.clk.wallMs())
			}
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
		lastRead = now
		var filtered int64
		for i := range rb.msgs {
			m := &rb.msgs[i]
			if p.resume != nil {
				// Every message counts, read or rejected: the first of a
				// resumed session may be a bad one.
				p.resume.Arrive(m.Arrival, m.ResumeStart, p.resume.Apply(p.wm.Current()))
			}
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
					wm := p.wm.Current()
					batches[s].AppendWatermarked(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, m.Payload, m.Offset, p.resume.Apply(wm))
					if p.resume != nil && p.prep.Time <= wm {
						p.resume.Behind() // backlog still coming: a hold waits on
					}
					p.wm.Observe(p.prep.Time)
					if p.resume.InEpisode() {
						batches[s].MarkResumed()
					}
				} else {
					batches[s].Append(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, m.Payload, m.Offset)
				}
				if c := p.prep.Control; c != nil {
					batches[s].AppendControl(c) // a keyed pipeline reading control.*
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
