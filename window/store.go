package window

import "github.com/eddy-edge/eddy/window/aggregate"

// Store holds the operator's keyed state: window accumulators, the merging
// window sets of sessions, count-window counters, and timers. The in-memory
// MemoryStore implements it, and StateStore on a state.Backend, with keys
// laid out as in statekey.go (keygroup | key | namespace).
//
// Keyed methods act on the current key, chosen with SetCurrentKey (as Flink's
// keyed state backend does), so a reading touching several windows looks its
// key up once.
//
// Memory and lifetime: pointers and slices a Store returns (a *WindowState,
// Timer.Key, a merging set) stay valid until the next call to any Store
// method; the operator changes a *WindowState in place and then calls
// PutWindow, so a store that decodes into scratch memory can encode it back.
// The Store copies the key bytes it keeps. Stores are not safe for concurrent
// use: one operator subtask owns one Store.
type Store interface {
	// SetCurrentKey selects the key for the keyed methods below. key may
	// alias the caller's memory: the store copies it if it keeps it.
	SetCurrentKey(keyGroup uint16, key []byte)

	// Window returns the state of window w of the current key, or nil.
	Window(w Window) *WindowState
	// CreateWindow creates an empty state for w (Fired 0, NextEarly NoTimer,
	// nAccs zeroed accumulators) and returns it. w must not exist.
	CreateWindow(w Window, nAccs int) *WindowState
	// PutWindow records that the state returned for w was changed.
	PutWindow(w Window, st *WindowState)
	// MoveWindow renames the state of from to to (to must not exist); it
	// reports false if from does not exist. Used when a session grows.
	MoveWindow(from, to Window) bool
	// DeleteWindow removes the state of w, if any.
	DeleteWindow(w Window)

	// MergingWindows appends the current key's session windows to dst.
	MergingWindows(dst []Window) []Window
	// PutMergingWindows replaces the current key's session windows (a nil or
	// empty set deletes it).
	PutMergingWindows(ws []Window)

	// ReadingCount returns the current key's count-window reading counter.
	ReadingCount() int64
	// PutReadingCount sets it.
	PutReadingCount(n int64)

	// AddTimer registers a timer for (domain, time, current key, w). Timers
	// are a set: adding an existing one does nothing.
	AddTimer(d Domain, time int64, w Window)
	// DeleteTimer removes a timer of the current key, if present.
	DeleteTimer(d Domain, time int64, w Window)
	// PopTimer removes and returns the earliest timer of domain d with
	// Time ≤ upTo, or false if there is none. Timers come out ordered by
	// (Time, Key bytes, Window.Start, Window.End), so the operator's output
	// is deterministic; timers added while popping are seen if due.
	PopTimer(d Domain, upTo int64) (Timer, bool)

	// Counts returns the number of window states and of pending timers.
	Counts() (windows, timers int)
}

// NoTimer marks WindowState.NextEarly when no early timer is pending.
const NoTimer = -1 << 63

// WindowState is the state of one (key, window).
type WindowState struct {
	// Fired is the number of firings emitted so far; the next firing's Seq.
	Fired int64
	// SinceFire counts readings since the last count-trigger firing.
	SinceFire int64
	// NextEarly is the processing time of the pending early-firing timer, or
	// NoTimer.
	NextEarly int64
	// Accs holds one accumulator per Spec.Aggs entry.
	Accs []aggregate.Acc
}

// Timer is a due timer popped from a Store. Key aliases store memory: valid
// until the next Store call.
type Timer struct {
	Domain   Domain
	Time     int64
	KeyGroup uint16
	Key      []byte
	Window   Window
}
