package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// AlignmentPolicy decides how a task with queued input takes a barrier
// (docs/architecture.md "Checkpoints" step 2; Flink's unaligned checkpoints). Aligned, the barrier is taken
// in-band: everything queued before it is processed first, so under
// backpressure a checkpoint lasts as long as the queues take to drain.
// Unaligned, the barrier is announced ahead of the queue (on the priority
// path) and taken at once: the task snapshots its state, and the records it
// overtook — those queued before the barrier — are stored with the snapshot
// as in-flight data and processed afterwards; a restore replays them before
// any new input. With AlignedTimeoutMs, a checkpoint starts aligned and a
// task switches to unaligned once the barrier was announced that long ago
// without arriving, as Flink's aligned checkpoint timeout does.
//
// It is pure: the task passes the times in.
type AlignmentPolicy struct {
	Unaligned        bool
	AlignedTimeoutMs int64 // 0: never switch
}

// Announces reports whether barriers are announced on the priority path at
// all; when false every barrier is aligned.
func (p AlignmentPolicy) Announces() bool { return p.Unaligned || p.AlignedTimeoutMs > 0 }

// Overtake reports whether a task that received the announcement of a
// barrier at announcedMs, and has not reached the barrier in-band, takes it
// now (nowMs) as an unaligned barrier.
func (p AlignmentPolicy) Overtake(announcedMs, nowMs int64) bool {
	switch {
	case p.Unaligned:
		return true
	case p.AlignedTimeoutMs > 0:
		return nowMs-announcedMs >= p.AlignedTimeoutMs
	}
	return false
}

// InFlightVersion is the format version of an encoded InFlightRecord: the
// first byte of every encoding, and the only version read.
const InFlightVersion = 3

// InFlightRecord is one record a barrier overtook, as stored in a
// checkpoint: everything a window subtask needs to process it again.
type InFlightRecord struct {
	// Seq orders the records of one task's channel.
	Seq       uint64
	KeyGroup  uint16
	Key       []byte
	Time      int64
	Watermark int64 // in effect before the record was read; math.MinInt64 on processing time
	// Arrival is the record's processing time (stream.Batch.Arrivals);
	// math.MinInt64 when its pipeline keeps none.
	Arrival int64
	Offset  uint64
	Values  []float64
	Payload []byte
	// Control is the control vector captured for the record (a keyed
	// pipeline reading control.*), nil if none.
	Control []byte
}

// AppendInFlight appends r's encoding (version, then the fields, lengths
// as uvarints, numbers big-endian; no control values are an empty Control)
// to dst.
func AppendInFlight(dst []byte, r *InFlightRecord) []byte {
	dst = append(dst, InFlightVersion)
	dst = binary.BigEndian.AppendUint64(dst, r.Seq)
	dst = binary.BigEndian.AppendUint16(dst, r.KeyGroup)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Time))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Watermark))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Arrival))
	dst = binary.BigEndian.AppendUint64(dst, r.Offset)
	dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.AppendUvarint(dst, uint64(len(r.Values)))
	for _, v := range r.Values {
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(v))
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Payload)))
	dst = append(dst, r.Payload...)
	dst = binary.AppendUvarint(dst, uint64(len(r.Control)))
	return append(dst, r.Control...)
}

var errInFlight = errors.New("checkpoint: malformed in-flight record")

// DecodeInFlight decodes an encoding made by AppendInFlight. Key, Values
// and Payload are new slices, Control too (nil when empty). A wrong version
// or a malformed record gives an error matching ErrCorrupt.
func DecodeInFlight(b []byte) (InFlightRecord, error) {
	var r InFlightRecord
	if len(b) == 0 || b[0] != InFlightVersion {
		if len(b) > 0 {
			return r, corruptf("checkpoint: in-flight record format version %d, this build reads version %d only (written by %s)",
				b[0], InFlightVersion, writtenBy(int(b[0]), InFlightVersion))
		}
		return r, markCorrupt(errInFlight)
	}
	b = b[1:]
	if len(b) < 8+2+8+8+8+8 {
		return r, markCorrupt(errInFlight)
	}
	r.Seq = binary.BigEndian.Uint64(b)
	r.KeyGroup = binary.BigEndian.Uint16(b[8:])
	r.Time = int64(binary.BigEndian.Uint64(b[10:]))
	r.Watermark = int64(binary.BigEndian.Uint64(b[18:]))
	r.Arrival = int64(binary.BigEndian.Uint64(b[26:]))
	r.Offset = binary.BigEndian.Uint64(b[34:])
	b = b[42:]
	bytesField := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		out := append([]byte(nil), b[k:k+int(n)]...)
		b = b[k+int(n):]
		return out, true
	}
	var ok bool
	if r.Key, ok = bytesField(); !ok {
		return r, markCorrupt(errInFlight)
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k)/8 {
		return r, markCorrupt(errInFlight)
	}
	b = b[k:]
	r.Values = make([]float64, n)
	for i := range r.Values {
		r.Values[i] = math.Float64frombits(binary.BigEndian.Uint64(b))
		b = b[8:]
	}
	if r.Payload, ok = bytesField(); !ok {
		return r, markCorrupt(errInFlight)
	}
	if r.Control, ok = bytesField(); !ok {
		return r, markCorrupt(errInFlight)
	}
	if len(b) != 0 {
		return r, markCorrupt(fmt.Errorf("%w: %d trailing bytes", errInFlight, len(b)))
	}
	return r, nil
}

// SortInFlight puts in-flight records in replay order: by the watermark in
// effect before each, then by Seq. One channel's records are already in
// that order (watermarks never go back); records merged from several
// channels then see the watermark each saw when first read.
func SortInFlight(rs []InFlightRecord) {
	slices.SortStableFunc(rs, func(a, b InFlightRecord) int {
		switch {
		case a.Watermark != b.Watermark:
			if a.Watermark < b.Watermark {
				return -1
			}
			return 1
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
}
