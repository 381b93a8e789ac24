package stages

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/operators/stream"
)

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
func (p *Pipeline) overtake(st *subtask) {
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
					Watermark: math.MinInt64, Arrival: math.MinInt64, Offset: b.Offsets[i], Values: b.RecordValues(i), Payload: b.Payload(i), Control: b.Control(i)}
				if len(b.Watermarks) == b.Len() {
					rec.Watermark = b.Watermarks[i]
				}
				if b.HasArrivals() {
					rec.Arrival = b.Arrivals[i]
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

// replayInFlight processes the in-flight records a restored unaligned
// checkpoint holds for this subtask, before any new input, in the order
// they were first read, and then moves to the channel's watermark at the
// barrier.
func (p *Pipeline) replayInFlight(st *subtask, keepLate bool) {
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
		withControl, withArrival := false, false
		for _, r := range recs {
			withControl = withControl || r.Control != nil
			withArrival = withArrival || r.Arrival != math.MinInt64
		}
		for len(recs) > 0 {
			n := min(len(recs), 512)
			b := inFlightBatch(recs[:n], p.stride, withControl, withArrival)
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

// inFlightBatch returns a batch of the in-flight records recs, with
// their captured control values when withControl (a record without any
// gets none: its expressions read every control value as null), and
// their arrivals when withArrival: the processing time they were read
// at, not the restore's.
func inFlightBatch(recs []checkpoint.InFlightRecord, stride int, withControl, withArrival bool) *stream.Batch {
	b := stream.NewBatch(stride)
	for _, r := range recs {
		if r.Watermark != math.MinInt64 {
			b.AppendWatermarked(r.Key, r.KeyGroup, r.Time, r.Values, r.Payload, r.Offset, r.Watermark)
		} else {
			b.Append(r.Key, r.KeyGroup, r.Time, r.Values, r.Payload, r.Offset)
		}
		if withControl {
			b.AppendControl(r.Control)
		}
		if withArrival {
			b.AppendArrival(r.Arrival)
		}
	}
	return b
}

// InFlightSummary counts the subtasks of checkpoint m that took the
// barrier unaligned and the in-flight records they stored, as the
// pipelines recorded them in its manifest.
func InFlightSummary(m *checkpoint.Manifest) (tasks int, records uint64) {
	for k, v := range m.Extra {
		if _, n, ok := decodeInflightExtra(v); ok && strings.HasPrefix(k, "inflight/") {
			tasks++
			records += n
		}
	}
	return tasks, records
}

// Announce sends trigger tr ahead of the queues to the window subtasks
// when the pipeline's checkpoints may be unaligned (savepoints stay
// aligned, as in Flink). It never blocks: a subtask that misses one takes
// that barrier aligned.
func (p *Pipeline) Announce(tr checkpoint.Trigger) {
	if tr.Kind == checkpoint.KindSavepoint || !p.align.Announces() {
		return
	}
	b := stream.BarrierInfo{ID: tr.ID, Full: tr.Kind != checkpoint.KindIncremental, Parent: tr.Parent, Announcement: true}
	for _, e := range p.edges {
		e.TrySendPriority(stream.Message{Kind: stream.Barrier, Barrier: b})
	}
}

func inflightExtraKey(pipeline string, subtask int) string {
	return "inflight/" + pipeline + "/" + strconv.Itoa(subtask)
}

// inflightExtraVersion is the first byte of a subtask's in-flight summary,
// the only version read.
const inflightExtraVersion = 1

// encodeInflightExtra is a subtask's in-flight summary in the manifest:
// the version, the channel's watermark at the barrier, the record count.
func encodeInflightExtra(wm int64, n uint64) []byte {
	b := []byte{inflightExtraVersion}
	b = binary.BigEndian.AppendUint64(b, uint64(wm))
	return binary.BigEndian.AppendUint64(b, n)
}

func decodeInflightExtra(b []byte) (wm int64, n uint64, ok bool) {
	if len(b) != 17 || b[0] != inflightExtraVersion {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(b[1:])), binary.BigEndian.Uint64(b[9:]), true
}
