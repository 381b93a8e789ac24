package walsink

import (
	"encoding/binary"
	"fmt"

	"github.com/eddy-edge/eddy/operators/io/walsink/qos2"
	"github.com/eddy-edge/eddy/operators/io/walsink/wal"
)

// Record kinds: the first payload byte of every WAL frame. Zero is invalid.
const (
	kindInvalid     byte = iota
	kindState            // snapshot of the log state; first frame of every segment
	_                    // 2: unused (a development layout of messages)
	kindPreCommit        // all data of epochs ≤ epoch is durable
	kindCommit           // checkpoint epoch completed: data ≤ seq publishable
	kindAbort            // data seqs from..to will never be published
	_                    // 6: unused (a development layout of flow steps)
	kindDrop             // drop_oldest skipped committed seqs from..to
	kindResume           // QoS 1: every seq below is acknowledged; no QoS 2 flow is open
	kindSteps            // a batch of publish-flow steps as runs of consecutive seqs
	kindDataCompact      // one message of an epoch, integers as uvarints
)

const flagRetain = 1

type dataRecord struct {
	epoch, seq uint64
	retain     bool
	topic      []byte
	payload    []byte
}

func appendData(dst []byte, epoch, seq uint64, retain bool, topic string, payload []byte) []byte {
	start := len(dst)
	dst = wal.BeginFrame(dst)
	dst = append(dst, kindDataCompact)
	dst = binary.AppendUvarint(dst, epoch)
	dst = binary.AppendUvarint(dst, seq)
	var flags byte
	if retain {
		flags |= flagRetain
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(len(topic)))
	dst = append(dst, topic...)
	dst = append(dst, payload...)
	return wal.EndFrame(dst, start)
}

// dataOverhead bounds a data frame's size beyond topic and payload.
const dataOverhead = wal.FrameHeaderBytes + 1 + binary.MaxVarintLen64*2 + 1 + binary.MaxVarintLen16

// decodeData decodes a kindDataCompact record.
func decodeData(p []byte) (dataRecord, error) {
	var d dataRecord
	b := p[1:]
	var k int
	if d.epoch, k = binary.Uvarint(b); k <= 0 {
		return dataRecord{}, fmt.Errorf("%w: data record: bad epoch", errBadRecord)
	}
	b = b[k:]
	if d.seq, k = binary.Uvarint(b); k <= 0 {
		return dataRecord{}, fmt.Errorf("%w: data record: bad seq", errBadRecord)
	}
	b = b[k:]
	if len(b) < 1 {
		return dataRecord{}, fmt.Errorf("%w: short data record", errBadRecord)
	}
	d.retain = b[0]&flagRetain != 0
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return dataRecord{}, fmt.Errorf("%w: data record topic overruns", errBadRecord)
	}
	b = b[k:]
	d.topic, d.payload = b[:n], b[n:]
	return d, nil
}

// appendWords appends a frame of kind followed by little-endian uint64s.
func appendWords(dst []byte, kind byte, words ...uint64) []byte {
	start := len(dst)
	dst = wal.BeginFrame(dst)
	dst = append(dst, kind)
	for _, w := range words {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return wal.EndFrame(dst, start)
}

func decodeWords(p []byte, n int) ([]uint64, error) {
	if len(p) != 1+8*n {
		return nil, fmt.Errorf("%w: kind %d has %d bytes, want %d", errBadRecord, p[0], len(p), 1+8*n)
	}
	w := make([]uint64, n)
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(p[1+8*i:])
	}
	return w, nil
}

// appendSteps appends a kindSteps frame holding recs, in order, as runs:
// records of one step for consecutive seqs (and, for StepPublishSent,
// consecutive packet ids) share one run. A window's PUBRECs, which arrive
// in seq order, take a few bytes in all, not 11 each.
func appendSteps(dst []byte, recs []qos2.Record) []byte {
	start := len(dst)
	dst = wal.BeginFrame(dst)
	dst = append(dst, kindSteps)
	for i := 0; i < len(recs); {
		r := recs[i]
		n := 1
		for i+n < len(recs) && continuesRun(r, n, recs[i+n]) {
			n++
		}
		dst = append(dst, byte(r.Step))
		dst = binary.AppendUvarint(dst, r.Seq)
		dst = binary.AppendUvarint(dst, uint64(n-1))
		if r.Step == qos2.StepPublishSent {
			dst = binary.LittleEndian.AppendUint16(dst, r.ID)
		}
		i += n
	}
	return wal.EndFrame(dst, start)
}

// continuesRun reports whether next is the (n+1)th record of the run that
// first starts.
func continuesRun(first qos2.Record, n int, next qos2.Record) bool {
	if next.Step != first.Step || next.Seq != first.Seq+uint64(n) {
		return false
	}
	return first.Step != qos2.StepPublishSent || next.ID == runID(first.ID, n)
}

// runID is the packet id of the ith record of a StepPublishSent run whose
// first id is first: ids count up through 1..65535 and wrap to 1, as
// qos2.IDOf gives them to consecutive seqs.
func runID(first uint16, i int) uint16 {
	return uint16((int(first)-1+i)%65535 + 1)
}

// forEachStep calls fn for each step in a kindSteps record, in order.
// Records of StepPubrecReceived and StepPubcompReceived do not carry the
// packet id: idOf gives it, the id of the open flow of that seq, which the
// flow's StepPublishSent record (or a state record) before them set.
func forEachStep(p []byte, idOf func(seq uint64) (uint16, bool), fn func(qos2.Record)) error {
	b := p[1:]
	for len(b) > 0 {
		step := qos2.Step(b[0])
		b = b[1:]
		seq, k := binary.Uvarint(b)
		if k <= 0 {
			return fmt.Errorf("%w: steps record: bad seq", errBadRecord)
		}
		b = b[k:]
		more, k := binary.Uvarint(b)
		if k <= 0 || more >= 1<<16 {
			return fmt.Errorf("%w: steps record: bad run length", errBadRecord)
		}
		b = b[k:]
		var first uint16
		switch step {
		case qos2.StepPublishSent:
			if len(b) < 2 {
				return fmt.Errorf("%w: steps record: short packet id", errBadRecord)
			}
			first = binary.LittleEndian.Uint16(b)
			b = b[2:]
			if first == 0 {
				return fmt.Errorf("%w: steps record: packet id 0 for seq %d", errBadRecord, seq)
			}
		case qos2.StepPubrecReceived, qos2.StepPubcompReceived:
		default:
			return fmt.Errorf("%w: steps record: step %d", errBadRecord, step)
		}
		for i := range int(more) + 1 {
			r := qos2.Record{Seq: seq + uint64(i), Step: step, ID: runID(first, i)}
			if step != qos2.StepPublishSent {
				id, ok := idOf(r.Seq)
				if !ok {
					return fmt.Errorf("%w: step %v for seq %d, which has no open flow", errBadRecord, step, r.Seq)
				}
				r.ID = id
			}
			fn(r)
		}
	}
	return nil
}
