package keyed

import (
	"fmt"
	"strconv"
)

// Alarm raises when its raise condition has held for MinDuration of event
// time and clears when its clear condition holds: two thresholds give
// hysteresis (raise = temp > 80, clear = temp < 70), MinDuration debounces
// the raise. It emits one Raised signal per transition to raised and one
// Cleared per transition back, never two in a row of one kind.
//
// Each reading counts as raising when raise is true and clear false, as
// clearing when clear is true and raise false, and as neither otherwise: a
// reading with both true (overlapping conditions, a configuration mistake)
// holds the alarm as it is, so it cannot flap on every reading. Then, with
// t the reading's event time:
//
//   - Normal: a raising reading starts an episode at s = t (pending); with
//     MinDuration 0 it raises at once.
//   - Pending: a raising reading at t ≥ s + MinDuration raises (Raised with
//     Start = s, Time = t); any other reading ends the pending episode
//     without a signal (the condition must hold on every reading from s to
//     the raise), and a later raising reading starts a new one.
//   - Raised: a clearing reading clears (Cleared with Start = s, End = t);
//     raising and neither readings keep it raised.
//
// The condition is known only at readings, so "held for MinDuration" means
// from the first raising reading to a raising reading at least MinDuration
// later, with no other reading between: the block assumes nothing about the
// gaps, needs no timer, and raises on a sensor that keeps showing the
// condition, never on one that went quiet. Clearing is immediate.
//
// Out of order (order = "arrival"): readings are taken as they come. An
// older raising reading does not move s back nor confirm the raise unless
// t ≥ s + MinDuration; a Cleared's Time and End are max(t, Start), so
// Duration is never negative.
//
// The state is 14 bytes per key (AlarmCodec).
type Alarm struct {
	// MinDurationMs is how long the raise condition must hold, in ms of
	// event time; ≥ 0. The config's min_duration.
	MinDurationMs int64
}

// Validate returns an error wrapping ErrBadBlock if an option is out of
// range.
func (a Alarm) Validate() error {
	if a.MinDurationMs < 0 {
		return fmt.Errorf("%w: alarm min_duration %dms must be ≥ 0", ErrBadBlock, a.MinDurationMs)
	}
	return nil
}

// AlarmPhase is where a key's alarm stands. The zero value is AlarmNormal,
// so a new key starts normal.
type AlarmPhase uint8

const (
	AlarmNormal  AlarmPhase = iota // not raised, no episode
	AlarmPending                   // the raise condition holds since Since, not yet for MinDuration
	AlarmRaised                    // raised; the episode started at Since
)

func (p AlarmPhase) String() string {
	switch p {
	case AlarmNormal:
		return "normal"
	case AlarmPending:
		return "pending"
	case AlarmRaised:
		return "raised"
	}
	return "alarm_phase(" + strconv.Itoa(int(p)) + ")"
}

// AlarmState is the per-key state of Alarm. The zero value is a normal key.
type AlarmState struct {
	Phase AlarmPhase
	Seq   uint32 // the Seq of the next signal
	Since int64  // Pending, Raised: event time of the episode's first raising reading
}

// OnReading applies one reading (event time at.Event, the evaluated raise
// and clear conditions) and emits at most one signal.
func (a Alarm) OnReading(st *AlarmState, at At, raise, clear bool, emit func(Signal)) {
	t := at.Event
	raising, clearing := raise && !clear, clear && !raise
	switch st.Phase {
	case AlarmRaised:
		if clearing {
			st.Phase = AlarmNormal
			end := max(t, st.Since)
			emit(Signal{Kind: Cleared, Seq: st.Seq, Time: end, Start: st.Since, End: end})
			st.Seq++
		}
		return
	case AlarmPending:
		if !raising {
			st.Phase = AlarmNormal
			return
		}
	default:
		if !raising {
			return
		}
		st.Phase, st.Since = AlarmPending, t
	}
	if t >= addSat(st.Since, a.MinDurationMs) {
		st.Phase = AlarmRaised
		emit(Signal{Kind: Raised, Seq: st.Seq, Time: t, Start: st.Since})
		st.Seq++
	}
}

// AlarmCodec encodes an AlarmState in 14 bytes (the shape of state.Codec):
//
//	version:1 phase:1 seq:u32le since:i64le
type AlarmCodec struct{}

const alarmSize = 14

// Append appends the encoding of s to dst.
func (AlarmCodec) Append(dst []byte, s AlarmState) []byte {
	dst = append(dst, stateVersion, byte(s.Phase))
	dst = appendU32(dst, s.Seq)
	return appendI64(dst, s.Since)
}

// Decode decodes one encoding written by Append; anything else is an error
// wrapping ErrCorruptState.
func (AlarmCodec) Decode(src []byte) (AlarmState, error) {
	if err := checkEncoding(src, "alarm state", alarmSize); err != nil {
		return AlarmState{}, err
	}
	if p := AlarmPhase(src[1]); p > AlarmRaised {
		return AlarmState{}, fmt.Errorf("%w: alarm phase %d", ErrCorruptState, p)
	}
	return AlarmState{Phase: AlarmPhase(src[1]), Seq: readU32(src[2:]), Since: readI64(src[6:])}, nil
}
