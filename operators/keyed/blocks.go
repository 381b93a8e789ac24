package keyed

// # Blocks
//
// Four blocks cover the common per-key patterns of sensor streams. Each is
// the per-key logic only, as a pure deterministic state machine shaped like
// the window operator: a value type built from its options, a small State
// struct per key, and methods that take the key's state and one input (a
// reading or a timer) and report what happened. They read no clock, start
// no goroutine, do no I/O and do not allocate; the host operator keeps the
// state (a ValueState per key, or a MapState for dedup), evaluates the
// expressions, orders the readings, runs the timers and turns signals into
// records.
//
//	ReportByException  report_by_exception { value deadband heartbeat time }  ReportState   22 bytes/key (34 on processing time)
//	Alarm              alarm "name" { raise clear min_duration }             AlarmState    14 bytes/key
//	Absence            absence { timeout time }                              AbsenceState  14 bytes/key (22 on processing time)
//	Dedup              dedup { id within time }                              DedupEntry     9 bytes/id
//
// (Encoded sizes, before the state layer's own envelope and key: a million
// keys of report_by_exception state are 22 MB.)
//
// # Step API
//
// A reading is given as its times (At: event time and processing time, Unix
// ms) and its already evaluated inputs. Each block reads the time of its
// TimeDomain. Signals go to an emit callback, synchronously and in order,
// at most two per call, by value (emit may keep them); emit must not step
// the same key's state. The host passes a func value it built once, so a
// call does not allocate. A block's state changes only inside its methods,
// and the host stores it after each call that may have changed it (any
// OnReading or OnTimer of Report, Alarm and Absence; a passing Dedup).
//
//	r.OnReading(&st, at, value, emit)
//	a.OnReading(&st, at, raise, clear, emit)
//	next := ab.OnReading(&st, at, emit); next = ab.OnTimer(&st, now, emit)
//	next = r.NextTimer(st); next = r.OnTimer(&st, now, emit)
//	pass := d.OnReading(&entry, found, at)
//
// Absence, and ReportByException on processing time with a heartbeat, need
// timers. Their methods return the time at which the key needs OnTimer
// next (NoTimer if none), in the block's TimeDomain: the watermark for
// EventTimeDomain (fire when watermark ≥ timer), the host's processing
// time for ProcessingTimeDomain. An early or stale OnTimer call is
// harmless, so the host may keep an earlier registration rather than move
// it on every reading. A timer returned by OnTimer is always after its now,
// so a host firing every timer up to now terminates.
// Alarm decides on readings alone (see its doc).
//
// # Order
//
// The host delivers each key's readings in event-time order (its per-key
// buffer). With order = "arrival" readings come as they arrive; every block
// stays deterministic (same inputs in the same order, same signals) and
// keeps its times from going back: each block's doc says how an older
// reading is treated.
//
// # Records and ids
//
// Each Signal becomes one output record with the window records' fields:
// id, pipeline, key, kind (Signal.Kind.String()), the times of its kind
// (see Signal) as RFC 3339 and as ms, and its values
// (operators/io/record.AppendSignalJSON writes them). The id is
//
//	<device_id>/<pipeline>/<key>/<block>/<kind>/<time_ms>/<seq>
//
// where block is "report_by_exception", "absence" or the alarm's name,
// time_ms is Signal.Time and seq is Signal.Seq. Seq numbers the signals of
// one (block, key) from 0 and is part of the state, so the id is unique even
// for two signals of one kind at one time, and replaying the same readings
// after a restore gives the same ids. Seq is a uint32: it wraps after 2^32
// signals of one key, 136 years at one per second. Dedup has no signals: a
// reading that passes goes on down the pipeline as itself.
//
// A processing-time block's signals depend on the clock of the run: a
// replay after a restore may find a silence, or a heartbeat, where the
// first run did not, and Seq and the times would then differ from there
// on. Their ids name the reading a signal derives from instead:
//
//	<device_id>/<pipeline>/<key>/<block>/<kind>/o<from>/<n>
//
// (Signal.From and Signal.N), so a replay that produces the same
// transition (the silence after the same reading) produces the same id.
//
// # State encoding
//
// Each state has a codec (ReportCodec, AlarmCodec, AbsenceCodec,
// DedupCodec) with the shape of state.Codec: fixed size, little-endian,
// starting with a version byte (1 for all four). Decode accepts exactly one
// encoding of the current version; anything else is an error wrapping
// ErrCorruptState, never a panic. The processing-time states of Absence
// and ReportByException carry the source offsets of their ids after the
// version-1 fields, marked by a flag bit of their own (a longer encoding;
// the codec's Offsets option writes it).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// ErrCorruptState is returned (wrapped) when a block's encoded state cannot
// be decoded: wrong version, wrong length or an invalid field.
var ErrCorruptState = errors.New("keyed: corrupt block state")

// ErrBadBlock is returned (wrapped) by a block's Validate when an option is
// out of range.
var ErrBadBlock = errors.New("keyed: invalid block options")

// NoTimer is returned by Absence when the key needs no timer. It is not a
// time: a timer at math.MaxInt64 (a deadline that saturated) is real and
// fires at the end-of-input watermark.
const NoTimer int64 = math.MinInt64

// stateVersion is the leading byte of every block state encoding.
const stateVersion = 1

// TimeDomain says which clock a block measures durations on. The zero value
// is invalid; each block's doc gives the default the host should apply.
type TimeDomain uint8

const (
	TimeDomainInvalid TimeDomain = iota
	// EventTimeDomain: the readings' timestamps; timers fire on the
	// watermark.
	EventTimeDomain
	// ProcessingTimeDomain: the host's processing time of the reading (in
	// Eddy, its arrival); timers fire on that clock.
	ProcessingTimeDomain
)

func (d TimeDomain) String() string {
	switch d {
	case EventTimeDomain:
		return "event"
	case ProcessingTimeDomain:
		return "processing"
	}
	return "time_domain(" + strconv.Itoa(int(d)) + ")"
}

// check returns an error wrapping ErrBadBlock unless d is EventTimeDomain or
// ProcessingTimeDomain.
func (d TimeDomain) check(block string) error {
	if d != EventTimeDomain && d != ProcessingTimeDomain {
		return fmt.Errorf("%w: %s time %v: want event or processing", ErrBadBlock, block, d)
	}
	return nil
}

// At is when a reading happened, in both domains, Unix ms, and where it
// is in its source. Proc is the host's clock when the reading arrived or
// when it left the ordering buffer, as the host chooses; it must not go
// back from reading to reading and timer to timer.
type At struct {
	Event int64 // the reading's timestamp
	Proc  int64 // the host's processing-time clock
	// Offset is the reading's position in its source (its ingest-log
	// offset): the same when a restore replays it, so processing-time
	// signals are named by it (Signal.From).
	Offset uint64
}

// in returns the time of at in domain d.
func (at At) in(d TimeDomain) int64 {
	if d == ProcessingTimeDomain {
		return at.Proc
	}
	return at.Event
}

// SignalKind says what a signal reports. The zero value is invalid.
type SignalKind uint8

const (
	SignalInvalid SignalKind = iota
	Report                   // ReportByException: a reading to send
	Raised                   // Alarm: the raise condition held for min_duration
	Cleared                  // Alarm: the clear condition ended a raised alarm
	Silent                   // Absence: a key had no reading for timeout
	Resumed                  // Absence: a silent key spoke again
	Heartbeat                // ReportByException on processing time: the last reported value again
)

func (k SignalKind) String() string {
	switch k {
	case Report:
		return "report"
	case Raised:
		return "raised"
	case Cleared:
		return "cleared"
	case Silent:
		return "silent"
	case Resumed:
		return "resumed"
	case Heartbeat:
		return "heartbeat"
	}
	return "signal(" + strconv.Itoa(int(k)) + ")"
}

// Signal is one output of a block for one key. Times are Unix ms in the
// block's TimeDomain (Report: always event time). Which fields a kind sets:
//
//	Report   Time: the reading's event time; Value: its value (NaN: missing)
//	Raised   Time: the reading that confirmed it; Start: the episode's first reading
//	Cleared  Time = End: the clearing reading; Start: as in Raised
//	Silent   Time: last reading + timeout; Start: the last reading
//	Resumed  Time = End: the reading that ended the silence; Start: the one before it
//	Heartbeat  Time: last report + heartbeat (processing time); Value: the last reported value
//
// Duration (End − Start) is the length of a cleared alarm's episode or of a
// silence. Unset fields are 0; only Report and Heartbeat carry a Value. Seq
// numbers the signals of one (block, key) from 0 (see Records and ids at
// the top of this file).
//
// From and N name a signal of a processing-time block by the readings
// alone: From is the source offset of the reading it derives from (Report:
// the reading; Silent and Resumed: the key's last reading before the
// silence; Heartbeat: the reported reading it repeats), N numbers the
// signals of one kind from one reading (Heartbeat: 1, 2, … since the
// report; others 0).
type Signal struct {
	Kind  SignalKind
	Seq   uint32
	Time  int64
	Start int64
	End   int64
	Value float64
	From  uint64
	N     uint32
}

// Duration is End − Start, for Cleared and Resumed.
func (s Signal) Duration() int64 { return s.End - s.Start }

// addSat returns t + d for d ≥ 0, saturating at math.MaxInt64, so a
// deadline near the end of time never wraps into the past.
func addSat(t, d int64) int64 {
	if t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}

// checkEncoding checks that src is one encoding of the current version of
// a state of size bytes.
func checkEncoding(src []byte, what string, size int) error {
	if len(src) != size {
		return fmt.Errorf("%w: %s of %d bytes, want %d", ErrCorruptState, what, len(src), size)
	}
	if src[0] != stateVersion {
		return fmt.Errorf("%w: %s version %d, want %d", ErrCorruptState, what, src[0], stateVersion)
	}
	return nil
}

// checkFlags checks that flags uses no bit outside known.
func checkFlags(flags, known byte, what string) error {
	if flags&^known != 0 {
		return fmt.Errorf("%w: %s flags %#x", ErrCorruptState, what, flags)
	}
	return nil
}

func appendI64(dst []byte, v int64) []byte  { return binary.LittleEndian.AppendUint64(dst, uint64(v)) }
func readI64(src []byte) int64              { return int64(binary.LittleEndian.Uint64(src)) }
func appendU32(dst []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(dst, v) }
func readU32(src []byte) uint32             { return binary.LittleEndian.Uint32(src) }
