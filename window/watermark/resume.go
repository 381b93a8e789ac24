package watermark

import (
	"encoding/binary"
	"errors"
)

const (
	// DefaultBlameMs is how long, in arrival time, readings after a
	// resumed session count as part of its stored backlog when dropped as
	// late (longer if the hold may last longer).
	DefaultBlameMs = 60_000
	// MaxHoldFactor bounds a hold at this many times its quiet time, so a
	// sensor that keeps sending old timestamps cannot hold the watermark
	// for ever.
	MaxHoldFactor = 10
)

// Resume follows an input after its MQTT broker resumed the session. A
// broker may restore the subscription before it sends the messages it
// stored while the client was away (aedes does): live readings then arrive
// ahead of the older stored ones, the watermark runs ahead on the live ones
// and the stored ones arrive behind it, late.
//
// Resume measures everything in the readings' logged arrival time and event
// time, never a clock, so a replay of the same log entries repeats it
// exactly:
//
//   - Episodes. Each resume opens an episode of blame time (the longest of
//     DefaultBlameMs and the longest hold). A reading arriving in it is
//     InEpisode: if it is dropped as late, the caller counts it as the
//     backlog's, not as ordinary lateness.
//   - Hold. With a hold h > 0, the watermark the caller emits (Apply) stays
//     at its value at the resume until h of arrival time has passed with
//     no reading behind the generator's own watermark (the caller says
//     which with Behind): the backlog has been delivered. Live readings
//     are not behind, so a broker that sends its backlog first, or none,
//     costs h. The generator behind the hold goes on observing. A hold
//     lasts at most MaxHoldFactor × h; a resume during a hold restarts it.
//     When no reading comes, ReleaseBy ends it once its time has passed
//     on the caller's wall clock: the next reading, arriving later still,
//     would end it anyway, and the watermark released is the same.
//
// Arrival time only counts forward: a step back of the wall clock between
// two readings adds nothing, so it cannot stretch a hold. Not safe for
// concurrent use.
type Resume struct {
	holdMs, maxHoldMs, blameMs int64
	st                         ResumeState
}

// ResumeState is a Resume's state, kept in checkpoints so a restore in the
// middle of a hold or an episode goes on with it.
type ResumeState struct {
	Episode     uint64 // resumes seen; 0: none
	Elapsed     int64  // arrival time since the last resume, ms (capped)
	Quiet       int64  // arrival time since the last reading behind, ms (capped)
	LastArrival int64  // arrival of the last reading, ms
	Held        bool   // the emitted watermark is held at HeldAt
	HeldAt      int64
}

// NewResume returns a Resume whose holds wait for holdMs of arrival time
// without a reading behind the watermark (0: no hold, episodes only).
func NewResume(holdMs int64) *Resume {
	holdMs = max(holdMs, 0)
	return &Resume{holdMs: holdMs, maxHoldMs: MaxHoldFactor * holdMs, blameMs: max(MaxHoldFactor*holdMs, DefaultBlameMs)}
}

// Arrive records the next reading in log order: its arrival time, whether
// it is the first message of a connection whose session the broker resumed,
// and the watermark emitted before it (Apply of the generator's current
// value). Call it before the reading is observed, and Behind after it if
// the reading is behind the generator's watermark.
func (r *Resume) Arrive(arrivalMs int64, resumed bool, emitted int64) {
	st := &r.st
	if d := arrivalMs - st.LastArrival; st.Episode > 0 && d > 0 {
		st.Elapsed = min(st.Elapsed+d, r.blameMs)
		st.Quiet = min(st.Quiet+d, r.blameMs)
	}
	st.LastArrival = arrivalMs
	if resumed {
		st.Episode++
		st.Elapsed, st.Quiet = 0, 0
		if r.holdMs > 0 && !st.Held {
			st.Held, st.HeldAt = true, emitted
		}
	}
	if st.Held && r.over(st.Elapsed, st.Quiet) {
		st.Held = false
	}
}

// over reports whether a hold is over after elapsed since its resume and
// quiet since its last reading behind.
func (r *Resume) over(elapsed, quiet int64) bool {
	return quiet >= r.holdMs || elapsed >= r.maxHoldMs
}

// Behind records that the reading just passed to Arrive is at or behind the
// generator's watermark (the unheld one): during a hold, the backlog is
// still coming.
func (r *Resume) Behind() { r.st.Quiet = 0 }

// ReleaseBy ends a hold whose time has passed by nowMs on the wall clock the
// arrival times are taken from, counting from the last reading's arrival,
// and reports whether it did. Call it when readings stop coming: a quiet
// input would otherwise hold its windows until its next reading.
func (r *Resume) ReleaseBy(nowMs int64) bool {
	st := &r.st
	if !st.Held || nowMs <= st.LastArrival {
		return false
	}
	d := nowMs - st.LastArrival
	if !r.over(st.Elapsed+d, st.Quiet+d) {
		return false
	}
	st.Held = false
	return true
}

// Apply returns the watermark to emit for the generator's wm: wm, or the
// held value during a hold. A nil Resume returns wm.
func (r *Resume) Apply(wm int64) int64 {
	if r != nil && r.st.Held && r.st.HeldAt < wm {
		return r.st.HeldAt
	}
	return wm
}

// InEpisode reports whether the last reading arrived within the blame time
// of a resume (false for a nil Resume).
func (r *Resume) InEpisode() bool { return r != nil && r.st.Episode > 0 && r.st.Elapsed < r.blameMs }

// Episode is the number of resumes seen so far (0: none).
func (r *Resume) Episode() uint64 { return r.st.Episode }

// Holding reports whether the emitted watermark is held.
func (r *Resume) Holding() bool { return r.st.Held }

// State returns the state for a checkpoint.
func (r *Resume) State() ResumeState { return r.st }

// Restore puts a checkpointed state back.
func (r *Resume) Restore(st ResumeState) { r.st = st }

// resumeStateLen is the encoded size: version, flags, five 8-byte fields.
const resumeStateLen = 2 + 5*8

// resumeStateVersion is the first byte of the encoding, the only version
// read.
const resumeStateVersion = 1

// ErrBadResumeState is returned by UnmarshalResumeState for bytes it did not
// write.
var ErrBadResumeState = errors.New("watermark: bad resume state")

// AppendBinary appends st in a fixed, portable layout (big endian).
func (st ResumeState) AppendBinary(b []byte) []byte {
	var flags byte
	if st.Held {
		flags = 1
	}
	b = append(b, resumeStateVersion, flags)
	b = binary.BigEndian.AppendUint64(b, st.Episode)
	b = binary.BigEndian.AppendUint64(b, uint64(st.Elapsed))
	b = binary.BigEndian.AppendUint64(b, uint64(st.Quiet))
	b = binary.BigEndian.AppendUint64(b, uint64(st.LastArrival))
	return binary.BigEndian.AppendUint64(b, uint64(st.HeldAt))
}

// UnmarshalResumeState decodes what AppendBinary wrote.
func UnmarshalResumeState(b []byte) (ResumeState, error) {
	if len(b) != resumeStateLen || b[0] != resumeStateVersion || b[1] > 1 {
		return ResumeState{}, ErrBadResumeState
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(b[2+8*i:]) }
	return ResumeState{Held: b[1] == 1, Episode: u(0), Elapsed: int64(u(1)), Quiet: int64(u(2)),
		LastArrival: int64(u(3)), HeldAt: int64(u(4))}, nil
}
