package keyed

import (
	"fmt"
	"math"
)

// ReportByException reports a reading when its value moved at least
// Deadband from the last reported value, or when Heartbeat has passed since
// the last report: the uplink carries changes, and a steady value at least
// once per heartbeat.
//
// For each reading (value v, time t in the Time domain), in this order:
//
//  1. The key's first reading is reported.
//  2. A change is reported: |v − last| ≥ Deadband (exactly Deadband
//     reports; Deadband 0 reports every reading but a repeated NaN or
//     infinity). Missing is a value of its
//     own: NaN after a number, or a number after NaN, is a change; NaN after
//     NaN is not. ±Inf compare as numbers: Inf after a finite value is a
//     change, Inf after Inf is not.
//  3. A heartbeat is reported: Heartbeat > 0 and t ≥ lastTime + Heartbeat.
//
// A report sets last = v and lastTime = max(lastTime, t). The heartbeat is
// carried by readings: a key that sends nothing reports nothing (that is
// Absence's job), and a report is always a real reading, never a repeat of
// an old value. So the block needs no timer. With processing time the
// heartbeat counts on the host's clock when readings are processed (for
// sources whose timestamps are coarse or wrong).
//
// Out of order (order = "arrival"): the deadband compares with the last
// reported value whatever its time; the heartbeat counts from the latest
// time reported, so an older reading never triggers one early.
//
// The state is 22 bytes per key (ReportCodec).
type ReportByException struct {
	// Deadband is the least change worth reporting, in the value's unit;
	// ≥ 0 and finite. The config's deadband.
	Deadband float64
	// HeartbeatMs is the longest time between reports while readings keep
	// coming, in ms; 0 means no heartbeat. The config's heartbeat.
	HeartbeatMs int64
	// Time is the heartbeat's domain; the host's default is EventTimeDomain.
	Time TimeDomain
}

// Validate returns an error wrapping ErrBadBlock if an option is out of
// range.
func (r ReportByException) Validate() error {
	switch {
	case math.IsNaN(r.Deadband) || math.IsInf(r.Deadband, 0) || r.Deadband < 0:
		return fmt.Errorf("%w: report_by_exception deadband %v must be a finite number ≥ 0", ErrBadBlock, r.Deadband)
	case r.HeartbeatMs < 0:
		return fmt.Errorf("%w: report_by_exception heartbeat %dms must be ≥ 0", ErrBadBlock, r.HeartbeatMs)
	}
	return r.Time.check("report_by_exception")
}

// ReportState is the per-key state of ReportByException. The zero value is
// a key that has reported nothing.
type ReportState struct {
	Reported bool    // a reading has been reported
	Seq      uint32  // the Seq of the next report
	Value    float64 // the last reported value (NaN: missing)
	Time     int64   // the latest time reported, in the block's domain
}

// OnReading decides whether the reading (times at, value v; NaN for a
// missing value) is reported. If so it emits one Report signal and updates
// st; otherwise st is unchanged.
func (r ReportByException) OnReading(st *ReportState, at At, v float64, emit func(Signal)) {
	t := at.in(r.Time)
	switch {
	case !st.Reported:
		st.Reported = true
		st.Time = t
	case changed(st.Value, v, r.Deadband):
		st.Time = max(st.Time, t)
	case r.HeartbeatMs > 0 && t >= addSat(st.Time, r.HeartbeatMs):
		st.Time = t
	default:
		return
	}
	st.Value = v
	emit(Signal{Kind: Report, Seq: st.Seq, Time: at.Event, Value: v})
	st.Seq++
}

// changed reports whether v differs from last by at least deadband, missing
// (NaN) being a value of its own.
func changed(last, v, deadband float64) bool {
	lastMissing, missing := math.IsNaN(last), math.IsNaN(v)
	if lastMissing || missing {
		return lastMissing != missing
	}
	return math.Abs(v-last) >= deadband // Inf − Inf is NaN: no change
}

// ReportCodec encodes a ReportState in 22 bytes (the shape of state.Codec):
//
//	version:1 flags:1 (bit 0: reported) seq:u32le value:f64le time:i64le
type ReportCodec struct{}

const (
	reportSize     = 22
	reportReported = 1 << 0
)

// Append appends the encoding of s to dst.
func (ReportCodec) Append(dst []byte, s ReportState) []byte {
	var flags byte
	if s.Reported {
		flags |= reportReported
	}
	dst = append(dst, stateVersion, flags)
	dst = appendU32(dst, s.Seq)
	dst = appendI64(dst, int64(math.Float64bits(s.Value)))
	return appendI64(dst, s.Time)
}

// Decode decodes one encoding written by Append; anything else is an error
// wrapping ErrCorruptState.
func (ReportCodec) Decode(src []byte) (ReportState, error) {
	if err := checkEncoding(src, "report_by_exception state", reportSize); err != nil {
		return ReportState{}, err
	}
	if err := checkFlags(src[1], reportReported, "report_by_exception state"); err != nil {
		return ReportState{}, err
	}
	return ReportState{
		Reported: src[1]&reportReported != 0,
		Seq:      readU32(src[2:]),
		Value:    math.Float64frombits(uint64(readI64(src[6:]))),
		Time:     readI64(src[14:]),
	}, nil
}
