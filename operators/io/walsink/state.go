package walsink

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/eddy-edge/eddy/operators/io/walsink/qos2"
	"github.com/eddy-edge/eddy/operators/io/walsink/wal"
)

// span is the live (not aborted) data of one uncommitted epoch.
type span struct {
	epoch, first, last uint64
	count              int64
	bytes              int64 // topic + payload
}

// mark is a pre-commit marker: data up to seq is durable for epoch.
type mark struct{ epoch, seq uint64 }

type seqRange struct{ from, to uint64 }

type commitTime struct {
	seq      uint64 // last seq of the committed epoch
	unixNano int64
}

// segData is the data seq range held by one segment.
type segData struct {
	id          uint64
	first, last uint64
	hasData     bool
}

// logState is what the WAL says, rebuilt at Open by replaying every record
// in order and kept current by applying each record as it is written. One
// code path (apply*) serves both, so replay cannot drift from runtime.
type logState struct {
	nextSeq        uint64 // seq of the next data record; seqs start at 1
	lastEpoch      uint64 // highest epoch written (or recovered to)
	committedEpoch uint64
	committedSeq   uint64 // data ≤ this (and not aborted) is publishable
	nextAssign     uint64 // lowest seq never given to a flow nor dropped
	precommits     []mark
	aborted        []seqRange
	flows          map[uint64]qos2.Record // open flows by seq
	commitTimes    []commitTime
	uncommitted    []span
	segs           []segData
}

func newLogState() logState {
	return logState{nextSeq: 1, nextAssign: 1, flows: map[uint64]qos2.Record{}}
}

// isAborted reports whether seq is in an aborted range. The ranges are
// kept sorted and disjoint (addAborted), so replaying a WAL costs
// O(log ranges) per record: every restart while the uplink is down adds a
// range, and a linear scan made Open's replay records × restarts.
func (st *logState) isAborted(seq uint64) bool {
	i, _ := slices.BinarySearchFunc(st.aborted, seq, func(r seqRange, seq uint64) int {
		switch {
		case r.to < seq:
			return -1
		case r.from > seq:
			return 1
		}
		return 0
	})
	return i < len(st.aborted) && st.aborted[i].from <= seq && seq <= st.aborted[i].to
}

// addAborted adds [from, to] to the aborted ranges, merging it with those
// it overlaps or touches. Recover's ranges start at or after the previous
// one's start (it aborts from just past the committed data, which only
// grows), so this is an append or a merge with the last range; anything
// else is sorted and merged, so no order of records can break the ranges.
func (st *logState) addAborted(from, to uint64) {
	n := len(st.aborted)
	switch {
	case n == 0 || from > st.aborted[n-1].to+1:
		st.aborted = append(st.aborted, seqRange{from: from, to: to})
	case from >= st.aborted[n-1].from:
		st.aborted[n-1].to = max(st.aborted[n-1].to, to)
	default:
		st.aborted = append(st.aborted, seqRange{from: from, to: to})
		st.normalizeAborted()
	}
}

// normalizeAborted sorts the aborted ranges and merges overlapping and
// adjacent ones.
func (st *logState) normalizeAborted() {
	slices.SortFunc(st.aborted, func(a, b seqRange) int { return cmp.Compare(a.from, b.from) })
	out := st.aborted[:0]
	for _, r := range st.aborted {
		if k := len(out); k > 0 && r.from <= out[k-1].to+1 {
			out[k-1].to = max(out[k-1].to, r.to)
			continue
		}
		out = append(out, r)
	}
	st.aborted = out
}

// apply applies one record read from (or written to) segment seg.
func (st *logState) apply(seg uint64, p []byte) error {
	if len(p) == 0 {
		return fmt.Errorf("%w: empty record", errBadRecord)
	}
	switch p[0] {
	case kindState:
		return st.applyState(p)
	case kindDataCompact:
		d, err := decodeData(p)
		if err != nil {
			return err
		}
		st.applyData(seg, d.epoch, d.seq, int64(len(d.topic)+len(d.payload)))
	case kindPreCommit:
		w, err := decodeWords(p, 2)
		if err != nil {
			return err
		}
		st.precommits = append(st.precommits, mark{epoch: w[0], seq: w[1]})
		st.lastEpoch = max(st.lastEpoch, w[0])
	case kindCommit:
		w, err := decodeWords(p, 3)
		if err != nil {
			return err
		}
		st.applyCommit(w[0], w[1], int64(w[2]))
	case kindAbort:
		w, err := decodeWords(p, 3)
		if err != nil {
			return err
		}
		st.applyAbort(w[0], w[1], w[2])
	case kindSteps:
		return forEachStep(p, st.flowID, st.applyStep)
	case kindResume:
		w, err := decodeWords(p, 1)
		if err != nil {
			return err
		}
		st.applyResume(w[0])
	case kindDrop:
		w, err := decodeWords(p, 4)
		if err != nil {
			return err
		}
		st.nextAssign = max(st.nextAssign, w[1]+1)
	default:
		return fmt.Errorf("%w: unknown kind %d", errBadRecord, p[0])
	}
	return nil
}

func (st *logState) applyData(seg, epoch, seq uint64, bytes int64) {
	st.nextSeq = max(st.nextSeq, seq+1)
	st.lastEpoch = max(st.lastEpoch, epoch)
	if n := len(st.segs); n == 0 || st.segs[n-1].id != seg {
		st.segs = append(st.segs, segData{id: seg})
	}
	sd := &st.segs[len(st.segs)-1]
	if !sd.hasData {
		sd.first, sd.hasData = seq, true
	}
	sd.last = seq
	if seq <= st.committedSeq || st.isAborted(seq) {
		return
	}
	if n := len(st.uncommitted); n > 0 && st.uncommitted[n-1].epoch == epoch {
		sp := &st.uncommitted[n-1]
		sp.last, sp.count, sp.bytes = seq, sp.count+1, sp.bytes+bytes
		return
	}
	st.uncommitted = append(st.uncommitted, span{epoch: epoch, first: seq, last: seq, count: 1, bytes: bytes})
}

// applyCommit makes data ≤ seq of epochs ≤ epoch publishable and returns
// the messages and bytes that became so.
func (st *logState) applyCommit(epoch, seq uint64, unixNano int64) (count, bytes int64) {
	st.committedEpoch = max(st.committedEpoch, epoch)
	st.lastEpoch = max(st.lastEpoch, epoch)
	if seq > st.committedSeq {
		st.committedSeq = seq
		st.commitTimes = append(st.commitTimes, commitTime{seq: seq, unixNano: unixNano})
	}
	st.precommits = slices.DeleteFunc(st.precommits, func(m mark) bool { return m.epoch <= epoch })
	i := 0
	for i < len(st.uncommitted) && st.uncommitted[i].last <= st.committedSeq {
		count += st.uncommitted[i].count
		bytes += st.uncommitted[i].bytes
		i++
	}
	st.uncommitted = slices.Delete(st.uncommitted, 0, i)
	return count, bytes
}

func (st *logState) applyAbort(lastCompleted, from, to uint64) {
	if from <= to {
		st.addAborted(from, to)
	}
	st.uncommitted = slices.DeleteFunc(st.uncommitted, func(s span) bool { return s.first >= from })
	st.precommits = slices.DeleteFunc(st.precommits, func(m mark) bool { return m.epoch > lastCompleted })
	st.lastEpoch = lastCompleted
}

// applyResume sets the QoS 1 publishing position: every seq below from is
// acknowledged (or dropped or aborted), and publishing resumes at from. It
// abandons open QoS 2 flows (a sink switched to QoS 1 publishes their
// messages again, at QoS 1), which is why it sets the position rather than
// only raising it.
func (st *logState) applyResume(from uint64) {
	st.nextAssign = from
	clear(st.flows)
}

// flowID is the packet id of the open flow of seq.
func (st *logState) flowID(seq uint64) (uint16, bool) {
	r, ok := st.flows[seq]
	return r.ID, ok
}

func (st *logState) applyStep(r qos2.Record) {
	st.nextAssign = max(st.nextAssign, r.Seq+1)
	if r.Step == qos2.StepPubcompReceived {
		delete(st.flows, r.Seq)
		return
	}
	st.flows[r.Seq] = r
}

// appendState appends a kindState frame: the whole state but segment data
// ranges and uncommitted spans, which replay rebuilds from data records
// (those are never deleted while they matter).
func (st *logState) appendState(dst []byte) []byte {
	start := len(dst)
	dst = wal.BeginFrame(dst)
	dst = append(dst, kindState)
	for _, w := range []uint64{st.nextSeq, st.lastEpoch, st.committedEpoch, st.committedSeq, st.nextAssign} {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(st.precommits)))
	for _, m := range st.precommits {
		dst = binary.LittleEndian.AppendUint64(dst, m.epoch)
		dst = binary.LittleEndian.AppendUint64(dst, m.seq)
	}
	var aborted []seqRange
	for _, r := range st.aborted {
		if r.to >= st.nextAssign {
			aborted = append(aborted, r)
		}
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(aborted)))
	for _, r := range aborted {
		dst = binary.LittleEndian.AppendUint64(dst, r.from)
		dst = binary.LittleEndian.AppendUint64(dst, r.to)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(st.commitTimes)))
	for _, c := range st.commitTimes {
		dst = binary.LittleEndian.AppendUint64(dst, c.seq)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(c.unixNano))
	}
	seqs := slices.Sorted(maps.Keys(st.flows))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(seqs)))
	for _, s := range seqs {
		r := st.flows[s]
		dst = binary.LittleEndian.AppendUint64(dst, r.Seq)
		dst = binary.LittleEndian.AppendUint16(dst, r.ID)
		dst = append(dst, byte(r.Step))
	}
	return wal.EndFrame(dst, start)
}

func (st *logState) applyState(p []byte) error {
	d := decoder{b: p[1:]}
	st.nextSeq, st.lastEpoch, st.committedEpoch, st.committedSeq, st.nextAssign = d.u64(), d.u64(), d.u64(), d.u64(), d.u64()
	st.precommits = st.precommits[:0]
	for n := d.u32(); n > 0 && d.err == nil; n-- {
		st.precommits = append(st.precommits, mark{epoch: d.u64(), seq: d.u64()})
	}
	st.aborted = st.aborted[:0]
	for n := d.u32(); n > 0 && d.err == nil; n-- {
		st.aborted = append(st.aborted, seqRange{from: d.u64(), to: d.u64()})
	}
	st.normalizeAborted()
	st.commitTimes = st.commitTimes[:0]
	for n := d.u32(); n > 0 && d.err == nil; n-- {
		st.commitTimes = append(st.commitTimes, commitTime{seq: d.u64(), unixNano: int64(d.u64())})
	}
	clear(st.flows)
	for n := d.u32(); n > 0 && d.err == nil; n-- {
		r := qos2.Record{Seq: d.u64(), ID: d.u16(), Step: qos2.Step(d.u8())}
		st.flows[r.Seq] = r
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes in state record", errBadRecord, len(d.b))
	}
	// Spans rebuilt from data records before this snapshot may now be
	// committed or aborted.
	st.uncommitted = slices.DeleteFunc(st.uncommitted, func(s span) bool {
		return s.last <= st.committedSeq || st.isAborted(s.first)
	})
	return d.err
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || len(d.b) < n {
		if d.err == nil {
			d.err = fmt.Errorf("%w: short state record", errBadRecord)
		}
		return make([]byte, n)
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 { return binary.LittleEndian.Uint64(d.take(8)) }
func (d *decoder) u32() uint32 { return binary.LittleEndian.Uint32(d.take(4)) }
func (d *decoder) u16() uint16 { return binary.LittleEndian.Uint16(d.take(2)) }
func (d *decoder) u8() uint8   { return d.take(1)[0] }
