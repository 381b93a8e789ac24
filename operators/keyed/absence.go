package keyed

import "fmt"

// Absence notices keys that stop sending: one Silent signal when a key has
// had no reading for Timeout, one Resumed when it sends again. Each silence
// gives exactly one Silent and, if the key ever sends again, one Resumed.
//
// With last the latest reading time of the key in the Time domain and
// deadline = last + Timeout:
//
//   - Silent is emitted when the key's time reaches the deadline without a
//     reading before it: OnTimer(now ≥ deadline), or a reading at
//     t ≥ deadline (the timer had not fired yet). Its Time is the deadline
//     whenever the timer fires (a late timer, a restore, a watermark jump
//     give the same Time), and Start = last.
//   - Resumed is emitted by the first reading after a Silent, with Start =
//     last (the reading before the silence) and End = the reading's time:
//     Duration is the whole gap between the two readings. A reading at
//     t ≥ deadline before the timer fired emits Silent then Resumed.
//
// A reading exactly at the deadline ends a silence (the key was quiet for
// Timeout). A key that never sent is never silent: the block knows only
// keys it has seen. The host keeps the key's timer with its state (or
// registers NextTimer again after a restore): a processing-time deadline
// that passed while the agent was down fires at once, with the deadline
// as its Time.
//
// ProcessingTimeDomain is the default the host should apply, because a
// silent sensor does not move event time: its watermark, if per key,
// stands still. With EventTimeDomain the timer fires on the (combined)
// watermark, so silences are found when other keys move time on, and a
// final watermark at math.MaxInt64 makes every key silent.
//
// Out of order (order = "arrival", event time): last is the latest time
// seen, so an older reading never moves the deadline back; an older reading
// that ends a silence gives End = max(t, Start).
//
// Every signal's From is the source offset of the key's latest reading
// before the silence (the reading that started it), which names it in
// processing-time ids.
//
// The state is 14 bytes per key (AbsenceCodec), 22 with the offset.
type Absence struct {
	// TimeoutMs is how long a key may stay quiet, in ms; > 0. The config's
	// timeout.
	TimeoutMs int64
	// Time is the domain of readings' times and of the timer; the host's
	// default is ProcessingTimeDomain.
	Time TimeDomain
}

// Validate returns an error wrapping ErrBadBlock if an option is out of
// range.
func (a Absence) Validate() error {
	if a.TimeoutMs <= 0 {
		return fmt.Errorf("%w: absence timeout %dms must be > 0", ErrBadBlock, a.TimeoutMs)
	}
	return a.Time.check("absence")
}

// AbsenceState is the per-key state of Absence. The zero value is a key
// never seen.
type AbsenceState struct {
	Seen   bool   // a reading has been seen
	Silent bool   // Silent was emitted and no reading came since
	Seq    uint32 // the Seq of the next signal
	Last   int64  // the latest reading time, in the block's domain
	From   uint64 // the source offset of the reading at Last
}

// OnReading records a reading, emits Silent and/or Resumed if it ends a
// silence, and returns the key's next timer: Last + Timeout.
func (a Absence) OnReading(st *AbsenceState, at At, emit func(Signal)) (next int64) {
	t := at.in(a.Time)
	if !st.Seen {
		st.Seen, st.Last, st.From = true, t, at.Offset
		return a.deadline(st)
	}
	if !st.Silent && t >= a.deadline(st) {
		a.silence(st, emit)
	}
	if st.Silent {
		st.Silent = false
		emit(Signal{Kind: Resumed, Seq: st.Seq, Time: max(t, st.Last), Start: st.Last, End: max(t, st.Last), From: st.From})
		st.Seq++
	}
	if t >= st.Last {
		st.Last, st.From = t, at.Offset
	}
	return a.deadline(st)
}

// OnTimer is called when the key's timer fires at now (the watermark or the
// processing clock). It emits Silent if now ≥ Last + Timeout and the key is
// not silent yet, and returns the next timer: NoTimer after Silent (the next
// reading starts a new one), the deadline if called early.
func (a Absence) OnTimer(st *AbsenceState, now int64, emit func(Signal)) (next int64) {
	if !st.Seen || st.Silent {
		return NoTimer
	}
	if d := a.deadline(st); now < d {
		return d
	}
	a.silence(st, emit)
	return NoTimer
}

// NextTimer returns the timer st needs: Last + Timeout while the key is
// heard, NoTimer before its first reading and while it is silent. The host
// registers it after a restore.
func (a Absence) NextTimer(st AbsenceState) int64 {
	if !st.Seen || st.Silent {
		return NoTimer
	}
	return a.deadline(&st)
}

func (a Absence) deadline(st *AbsenceState) int64 { return addSat(st.Last, a.TimeoutMs) }

func (a Absence) silence(st *AbsenceState, emit func(Signal)) {
	st.Silent = true
	emit(Signal{Kind: Silent, Seq: st.Seq, Time: a.deadline(st), Start: st.Last, From: st.From})
	st.Seq++
}

// AbsenceCodec encodes an AbsenceState in 14 bytes, or 22 with Offsets
// (the shape of state.Codec):
//
//	version:1 flags:1 (bit 0: seen, bit 1: silent, bit 2: from) seq:u32le last:i64le [from:u64le]
//
// From is written, and flag bit 2 set, only with Offsets (processing time,
// whose ids need it); Decode reads either encoding.
type AbsenceCodec struct{ Offsets bool }

const (
	absenceSize     = 14
	absenceFromSize = absenceSize + 8
	absenceSeen     = 1 << 0
	absenceSilent   = 1 << 1
	absenceFrom     = 1 << 2
)

// Append appends the encoding of s to dst.
func (c AbsenceCodec) Append(dst []byte, s AbsenceState) []byte {
	var flags byte
	if s.Seen {
		flags |= absenceSeen
	}
	if s.Silent {
		flags |= absenceSilent
	}
	if c.Offsets {
		flags |= absenceFrom
	}
	dst = append(dst, stateVersion, flags)
	dst = appendU32(dst, s.Seq)
	dst = appendI64(dst, s.Last)
	if c.Offsets {
		dst = appendI64(dst, int64(s.From))
	}
	return dst
}

// Decode decodes one encoding written by Append; anything else is an error
// wrapping ErrCorruptState (a silent key that was never seen is corrupt).
func (AbsenceCodec) Decode(src []byte) (AbsenceState, error) {
	size := absenceSize
	if len(src) > 1 && src[1]&absenceFrom != 0 {
		size = absenceFromSize
	}
	if err := checkEncoding(src, "absence state", size); err != nil {
		return AbsenceState{}, err
	}
	flags := src[1]
	if err := checkFlags(flags, absenceSeen|absenceSilent|absenceFrom, "absence state"); err != nil {
		return AbsenceState{}, err
	}
	if flags&(absenceSeen|absenceSilent) == absenceSilent {
		return AbsenceState{}, fmt.Errorf("%w: absence state silent but never seen", ErrCorruptState)
	}
	st := AbsenceState{
		Seen:   flags&absenceSeen != 0,
		Silent: flags&absenceSilent != 0,
		Seq:    readU32(src[2:]),
		Last:   readI64(src[6:]),
	}
	if size == absenceFromSize {
		st.From = uint64(readI64(src[14:]))
	}
	return st, nil
}
