package stages

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/operators/stream"
)

// barrier passes checkpoint barrier b at subtask st: its output so far
// belongs to epoch b.ID, so the sinks get the barrier after it; then the
// state is snapshotted (the view is taken now, written asynchronously).
func (p *Pipeline) barrier(st *subtask, b stream.BarrierInfo, more map[string][]byte) {
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
	if st.index == 0 && b.Resume != nil {
		extra[resumeExtraKey(p.name)] = b.Resume
	}
	if st.index == 0 && b.Sparkplug != nil {
		extra[sparkplugExtraKey(p.name)] = b.Sparkplug
	}
	if st.index == 0 && p.shape != nil {
		extra[shapeExtraKey(p.name)] = p.shape
		if p.block != nil {
			extra[definitionExtraKey(p.name)] = p.block
		}
		if b.MaxTime != math.MinInt64 {
			extra[maxTimeExtraKey(p.name)] = binary.BigEndian.AppendUint64(nil, uint64(b.MaxTime))
		}
		if p.since != math.MinInt64 {
			extra[sinceExtraKey(p.name)] = binary.BigEndian.AppendUint64(nil, uint64(p.since))
		}
		if p.roll != nil {
			rec, _ := json.Marshal(p.roll) // strings and numbers: cannot fail
			extra[rolloverExtraKey(p.roll.Pipeline)] = rec
		}
	}
	for k, v := range more {
		extra[k] = v
	}
	if st.backend == nil {
		p.ckpt.Send(checkpoint.Ack{CheckpointID: b.ID, Task: task, Extra: extra})
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
		p.ckpt.Send(checkpoint.Failure{CheckpointID: b.ID, Task: task, Err: err})
		return
	}
	snap, err := st.backend.Snapshot(full)
	if err != nil {
		p.ckpt.Send(checkpoint.Failure{CheckpointID: b.ID, Task: task, Err: err})
		return
	}
	var written func(*checkpoint.Table)
	if cb := coldOf(st); cb != nil {
		// The file, once written whole, goes under the backend: what it
		// holds is never written back into the working file.
		box, f := p.coldFilesOf(st), coldFile{seq: cb.Snapshots(), full: !snap.Incremental(), parent: b.Parent}
		written = func(t *checkpoint.Table) { f.t = t; box.put(f) }
	}
	snap = keyedSnapshot(st, snap)
	st.lastSnap = b.ID
	p.ckpt.WriteSnapshot(b.ID, task, p.name, snap, extra, written)
	st.sampleState()
}

// sinkBarrier tells the subtask's sinks it passed barrier id.
func (p *Pipeline) sinkBarrier(id uint64) {
	for _, s := range p.to {
		s.In <- SinkMsg{Barrier: id}
	}
	if p.late != nil {
		p.late.In <- SinkMsg{Barrier: id}
	}
	if p.resultDeadLetters {
		p.deadLetter.In <- SinkMsg{Barrier: id}
	}
}

func controlExtraKey(pipeline string) string { return "control/" + pipeline }

func watermarkExtraKey(pipeline string, subtask int) string {
	return "watermark/" + pipeline + "/" + strconv.Itoa(subtask)
}
