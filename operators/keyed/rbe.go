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
// A report sets last = v and lastTime = max(lastTime, t).
//
// On event time the heartbeat is carried by readings: a key that sends
// nothing reports nothing (that is Absence's job), and a report is always a
// real reading, never a repeat of an old value. So the block needs no
// timer.
//
// On processing time (the host's clock when readings are processed) the
// rules above hold, and the heartbeat is also kept by a timer at lastTime +
// Heartbeat (NextTimer): when it fires with nothing reported since, a
// Heartbeat signal repeats the last reported value (Time: the timer's
// time) and the next timer is Heartbeat after the firing. So the uplink
// hears from a key at least once per heartbeat of wall time, even when the
// key sends nothing, until state_ttl drops its state.
//
// Out of order (order = "arrival"): the deadband compares with the last
// reported value whatever its time; the heartbeat counts from the latest
// time reported, so an older reading never triggers one early.
//
// Reports name their reading (Signal.From = its offset), heartbeats the
// reported reading they repeat, numbered from 1 (Signal.N).
//
// The state is 22 bytes per key (ReportCodec), 34 with the offsets.
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
	From     uint64  // the source offset of the last reported reading
	Beats    uint32  // heartbeats since that report
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
	st.Value, st.From, st.Beats = v, at.Offset, 0
	emit(Signal{Kind: Report, Seq: st.Seq, Time: at.Event, Value: v, From: at.Offset})
	st.Seq++
}

// NextTimer returns the timer st needs: on processing time with a
// heartbeat, lastTime + Heartbeat once the key reported; NoTimer otherwise.
func (r ReportByException) NextTimer(st ReportState) int64 {
	if r.Time != ProcessingTimeDomain || r.HeartbeatMs <= 0 || !st.Reported {
		return NoTimer
	}
	return addSat(st.Time, r.HeartbeatMs)
}

// OnTimer is called when the key's processing-time timer fires at now. If
// the heartbeat is due (now ≥ lastTime + Heartbeat) it emits one Heartbeat
// with the last reported value, at the due time, and sets lastTime to now.
// It returns the next timer, always after now (NoTimer when it would
// saturate at now: an end-of-input clock at math.MaxInt64 gives one
// heartbeat, not an endless run).
func (r ReportByException) OnTimer(st *ReportState, now int64, emit func(Signal)) (next int64) {
	d := r.NextTimer(*st)
	switch {
	case d == NoTimer:
		return NoTimer
	case now < d:
		return d
	}
	st.Beats++
	emit(Signal{Kind: Heartbeat, Seq: st.Seq, Time: d, Value: st.Value, From: st.From, N: st.Beats})
	st.Seq++
	st.Time = now
	if d = r.NextTimer(*st); d <= now {
		return NoTimer
	}
	return d
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

// ReportCodec encodes a ReportState in 22 bytes, or 34 with Offsets (the
// shape of state.Codec):
//
//	version:1 flags:1 (bit 0: reported, bit 1: from) seq:u32le value:f64le time:i64le [from:u64le beats:u32le]
//
// From and Beats are written, and flag bit 1 set, only with Offsets
// (processing time, whose ids need them); Decode reads either encoding.
type ReportCodec struct{ Offsets bool }

const (
	reportSize     = 22
	reportFromSize = reportSize + 8 + 4
	reportReported = 1 << 0
	reportFrom     = 1 << 1
)

// Append appends the encoding of s to dst.
func (c ReportCodec) Append(dst []byte, s ReportState) []byte {
	var flags byte
	if s.Reported {
		flags |= reportReported
	}
	if c.Offsets {
		flags |= reportFrom
	}
	dst = append(dst, stateVersion, flags)
	dst = appendU32(dst, s.Seq)
	dst = appendI64(dst, int64(math.Float64bits(s.Value)))
	dst = appendI64(dst, s.Time)
	if c.Offsets {
		dst = appendI64(dst, int64(s.From))
		dst = appendU32(dst, s.Beats)
	}
	return dst
}

// Decode decodes one encoding written by Append; anything else is an error
// wrapping ErrCorruptState.
func (ReportCodec) Decode(src []byte) (ReportState, error) {
	size := reportSize
	if len(src) > 1 && src[1]&reportFrom != 0 {
		size = reportFromSize
	}
	if err := checkEncoding(src, "report_by_exception state", size); err != nil {
		return ReportState{}, err
	}
	if err := checkFlags(src[1], reportReported|reportFrom, "report_by_exception state"); err != nil {
		return ReportState{}, err
	}
	st := ReportState{
		Reported: src[1]&reportReported != 0,
		Seq:      readU32(src[2:]),
		Value:    math.Float64frombits(uint64(readI64(src[6:]))),
		Time:     readI64(src[14:]),
	}
	if size == reportFromSize {
		st.From, st.Beats = uint64(readI64(src[22:])), readU32(src[30:])
	}
	return st, nil
}
