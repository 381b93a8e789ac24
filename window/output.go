package window

import "strconv"

// Verdict is what Process did with a reading. The zero Verdict is invalid.
type Verdict uint8

const (
	VerdictInvalid Verdict = iota
	// Accepted: at least one window took the reading.
	Accepted
	// Late: every window of the reading is past End−1+AllowedLateness (or
	// it has no window and t+AllowedLateness ≤ watermark, as Flink's
	// isElementLate). Send it to the late-data side output, or count it.
	Late
	// Unassigned: the reading falls in a gap between sliding windows
	// (slide > size) and is not late. Count it; Flink skips it.
	Unassigned
)

func (v Verdict) String() string {
	switch v {
	case Accepted:
		return "accepted"
	case Late:
		return "late"
	case Unassigned:
		return "unassigned"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// Kind says why a window fired. The zero Kind is invalid.
type Kind uint8

const (
	KindInvalid Kind = iota
	// Final: the window's end was reached (watermark, processing time or
	// reading count).
	Final
	// Early: a periodic (EarlyEvery) or count (TriggerCount) firing before
	// the window's end.
	Early
	// LateUpdate: a reading arrived after the window's end but within the
	// allowed lateness; the window re-fires with it included.
	LateUpdate
)

func (k Kind) String() string {
	switch k {
	case Final:
		return "final"
	case Early:
		return "early"
	case LateUpdate:
		return "late_update"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Firing is one result of one (key, window). It carries the full aggregate
// so far, not a delta: the last firing of a (key, window) is its result.
type Firing struct {
	Key      []byte
	KeyGroup uint16
	Window   Window
	Kind     Kind
	// Seq numbers the firings of this (key, window): 0 for the first,
	// then 1, 2, … A session window created by a merge starts again at 0
	// (it is a new window); one that keeps its bounds keeps counting.
	Seq int
	// Values holds one result per Spec.Aggs entry; NaN is null.
	Values []float64
}

// Output collects firings. The caller owns it and reuses it: Reset keeps the
// memory. Firing.Key and Firing.Values alias memory owned by the Output and
// stay valid until the next Reset.
type Output struct {
	Firings []Firing
	keys    []byte
	values  []float64
}

// Reset empties o, keeping its capacity.
func (o *Output) Reset() {
	clear(o.Firings) // drop references into old buffers
	o.Firings = o.Firings[:0]
	o.keys = o.keys[:0]
	o.values = o.values[:0]
}

// add appends a firing with room for n values and returns it.
func (o *Output) add(kg uint16, key []byte, w Window, kind Kind, seq int64, n int) *Firing {
	k0 := len(o.keys)
	o.keys = append(o.keys, key...)
	v0 := len(o.values)
	o.values = append(o.values, make([]float64, n)...)
	o.Firings = append(o.Firings, Firing{
		Key:      o.keys[k0:len(o.keys):len(o.keys)],
		KeyGroup: kg,
		Window:   w,
		Kind:     kind,
		Seq:      int(seq),
		Values:   o.values[v0:len(o.values):len(o.values)],
	})
	return &o.Firings[len(o.Firings)-1]
}
