package window

import (
	"errors"
	"fmt"
)

// ErrBadSpec is returned (wrapped) by NewOperator for an invalid Spec.
var ErrBadSpec = errors.New("window: invalid spec")

type assignerKind uint8

const (
	kindInvalid assignerKind = iota
	kindTumbling
	kindSliding
	kindSession
	kindCount
	kindGlobal
)

// Domain is the time domain a window or timer lives in.
type Domain uint8

const (
	DomainInvalid  Domain = iota
	EventTime             // driven by watermarks (AdvanceWatermark)
	ProcessingTime        // driven by the caller's processing time (AdvanceProcessingTime)
	CountDomain           // driven by each key's reading count (count windows)
)

func (d Domain) String() string {
	switch d {
	case EventTime:
		return "event"
	case ProcessingTime:
		return "processing"
	case CountDomain:
		return "count"
	}
	return "invalid"
}

// Assigner says which windows a reading belongs to. Build one with Tumbling,
// Sliding, Session, CountTumbling, CountSliding or Global; the zero Assigner
// is invalid. Assigners are small values, safe to copy and share.
type Assigner struct {
	kind             assignerKind
	size, slide, off int64
	gap              int64
	domain           Domain
}

func timeDomain(eventTime bool) Domain {
	if eventTime {
		return EventTime
	}
	return ProcessingTime
}

// Tumbling assigns t to the one window [s, s+size) with s = StartOf(t, offset, size).
func Tumbling(sizeMs, offsetMs int64, eventTime bool) Assigner {
	return Assigner{kind: kindTumbling, size: sizeMs, slide: sizeMs, off: offsetMs, domain: timeDomain(eventTime)}
}

// Sliding assigns t to every window [s, s+size) with s ≡ offset (mod slide)
// and t−size < s ≤ t: size/slide windows when slide divides size, none when
// slide > size and t falls in a gap (the reading is then Unassigned).
func Sliding(sizeMs, slideMs, offsetMs int64, eventTime bool) Assigner {
	return Assigner{kind: kindSliding, size: sizeMs, slide: slideMs, off: offsetMs, domain: timeDomain(eventTime)}
}

// Session assigns t to [t, t+gap) and merges it with every window of the same
// key it overlaps or touches.
func Session(gapMs int64, eventTime bool) Assigner {
	return Assigner{kind: kindSession, gap: gapMs, domain: timeDomain(eventTime)}
}

// CountTumbling fires every n readings of a key over those n readings.
func CountTumbling(n int64) Assigner { return CountSliding(n, n) }

// CountSliding fires every m readings of a key over its last n readings
// (Flink's countWindow(n, m): the first firings, after m, 2m, … < n readings,
// cover the readings so far). In Window units: reading number c (0-based)
// belongs to every [s, s+n) with s a multiple of m (negative allowed) and
// s ≤ c < s+n; a window fires, with Kind Final, on its last reading.
// Unfinished count windows never fire, as in Flink (not even at end of input).
func CountSliding(n, m int64) Assigner {
	return Assigner{kind: kindCount, size: n, slide: m, domain: CountDomain}
}

// Global assigns every reading of a key to GlobalWindow. It fires Final only
// at end of input (watermark Max) — Flink's GlobalWindows never fire by
// themselves; Eddy flushes them at end of input — and earlier with
// Spec.TriggerCount or Spec.EarlyEvery.
func Global() Assigner { return Assigner{kind: kindGlobal, domain: EventTime} }

// Domain returns the time domain of the assigner's windows.
func (a Assigner) Domain() Domain { return a.domain }

// IsMerging reports whether windows merge (sessions).
func (a Assigner) IsMerging() bool { return a.kind == kindSession }

func (a Assigner) String() string {
	switch a.kind {
	case kindTumbling:
		return fmt.Sprintf("tumbling(%d, offset %d, %v time)", a.size, a.off, a.domain)
	case kindSliding:
		return fmt.Sprintf("sliding(%d/%d, offset %d, %v time)", a.size, a.slide, a.off, a.domain)
	case kindSession:
		return fmt.Sprintf("session(gap %d, %v time)", a.gap, a.domain)
	case kindCount:
		return fmt.Sprintf("count(%d/%d)", a.size, a.slide)
	case kindGlobal:
		return "global"
	}
	return "invalid assigner"
}

func (a Assigner) validate() error {
	switch a.kind {
	case kindTumbling, kindSliding:
		if a.size <= 0 || a.slide <= 0 {
			return fmt.Errorf("%w: %v: size and slide must be > 0", ErrBadSpec, a)
		}
	case kindSession:
		if a.gap <= 0 {
			return fmt.Errorf("%w: %v: gap must be > 0", ErrBadSpec, a)
		}
	case kindCount:
		if a.size <= 0 || a.slide <= 0 {
			return fmt.Errorf("%w: %v: counts must be > 0", ErrBadSpec, a)
		}
	case kindGlobal:
	default:
		return fmt.Errorf("%w: no window assigner", ErrBadSpec)
	}
	return nil
}

// AssignWindows appends the windows that t belongs to and returns dst.
// Sliding and count windows come latest start first, the order of Flink's
// SlidingEventTimeWindows.assignWindows: the operator adds a reading to its
// windows, and fires those its trigger fires, in this order. For Session it
// appends [t, t+gap) before merging; for count assigners t is the key's
// 0-based reading number. It does not allocate when dst has room
// (size/slide windows for Sliding).
func (a Assigner) AssignWindows(t int64, dst []Window) []Window {
	switch a.kind {
	case kindTumbling:
		s := StartOf(t, a.off, a.size)
		return append(dst, Window{s, s + a.size})
	case kindSliding, kindCount:
		for s := StartOf(t, a.off, a.slide); s > t-a.size; s -= a.slide {
			dst = append(dst, Window{s, s + a.size})
		}
		return dst
	case kindSession:
		return append(dst, Window{t, addSat(t, a.gap)})
	case kindGlobal:
		return append(dst, GlobalWindow)
	}
	panic("window: AssignWindows on an invalid assigner")
}
