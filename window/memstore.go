package window

import (
	"bytes"

	"github.com/eddy-edge/eddy/window/aggregate"
)

// MemoryStore is the in-memory Store: the working state of tests, of
// benchmarks, and of pipelines that run without a state backend.
//
// Layout: one memKey per key (found without allocating through
// map[string]*memKey indexed by string(key)), holding the key's few open
// windows in a small slice scanned linearly, their accumulators side by side
// in one per-key arena (few cache misses per reading; slots and their
// sketches are recycled). Timers of each domain sit in per-time buckets (sets
// keyed by (key, window), so delete is O(1)) under a min-heap of the distinct
// times: all windows of a tumbling or sliding assigner share a handful of
// end times, so the heap stays small however many windows are open.
// Steady-state processing of a stable key set does not allocate.
//
// Keys with no state left are dropped in batches, so memory follows the live
// key set (at most twice it).
type MemoryStore struct {
	keys    map[string]*memKey
	cur     *memKey
	curKG   uint16
	curKey  []byte // the current key, copied, when cur is nil
	empties int    // memKeys with no state

	windows int
	timers  [CountDomain + 1]timerQueue[*memKey]
}

type memKey struct {
	kg       uint16
	key      []byte
	wins     []memWindow
	accs     []aggregate.Acc // arena: window i owns accs[i*nAccs : (i+1)*nAccs]
	nAccs    int
	sessions []Window
	count    int64
	timers   int
	empty    bool
}

type memWindow struct {
	w  Window
	st WindowState
}

const (
	minSweep = 1024
)

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore {
	s := &MemoryStore{keys: make(map[string]*memKey)}
	for i := range s.timers {
		s.timers[i] = newTimerQueue(memKeyBytes)
	}
	return s
}

// SetCurrentKey implements Store.
func (s *MemoryStore) SetCurrentKey(keyGroup uint16, key []byte) {
	if s.cur != nil && s.cur.kg == keyGroup && bytes.Equal(s.cur.key, key) {
		return
	}
	if s.empties >= minSweep && 2*s.empties > len(s.keys) {
		s.sweep()
	}
	s.curKG = keyGroup
	s.cur = s.keys[string(key)]
	if s.cur == nil {
		s.curKey = append(s.curKey[:0], key...)
	}
}

// sweep forgets keys without state.
func (s *MemoryStore) sweep() {
	for k, mk := range s.keys {
		if mk.empty {
			delete(s.keys, k)
		}
	}
	s.empties = 0
	s.cur = nil
}

// mustKey returns the current memKey, creating it.
func (s *MemoryStore) mustKey() *memKey {
	if s.cur == nil {
		mk := &memKey{kg: s.curKG, key: bytes.Clone(s.curKey)}
		s.keys[string(mk.key)] = mk
		s.cur = mk
		return mk
	}
	if s.cur.empty {
		s.cur.empty = false
		s.empties--
	}
	return s.cur
}

// checkEmpty marks mk empty if it holds no state.
func (s *MemoryStore) checkEmpty(mk *memKey) {
	if !mk.empty && len(mk.wins) == 0 && len(mk.sessions) == 0 && mk.count == 0 && mk.timers == 0 {
		mk.empty = true
		s.empties++
	}
}

func (mk *memKey) find(w Window) int {
	for i := range mk.wins {
		if mk.wins[i].w == w {
			return i
		}
	}
	return -1
}

// Window implements Store.
func (s *MemoryStore) Window(w Window) *WindowState {
	if s.cur == nil {
		return nil
	}
	if i := s.cur.find(w); i >= 0 {
		return &s.cur.wins[i].st
	}
	return nil
}

// CreateWindow implements Store.
func (s *MemoryStore) CreateWindow(w Window, nAccs int) *WindowState {
	mk := s.mustKey()
	if mk.find(w) >= 0 {
		panic("window: CreateWindow of an existing window " + w.String())
	}
	if len(mk.wins) > 0 && mk.nAccs != nAccs {
		panic("window: CreateWindow with a different number of accumulators")
	}
	mk.nAccs = nAccs
	i := len(mk.wins)
	need := (i + 1) * nAccs
	if need > cap(mk.accs) {
		// Grow the arena and re-point every window at its new slot.
		grown := make([]aggregate.Acc, need, 2*need)
		copy(grown, mk.accs)
		mk.accs = grown
		for j := range mk.wins {
			mk.wins[j].st.Accs = mk.slot(j)
		}
	}
	mk.accs = mk.accs[:need]
	accs := mk.slot(i)
	for j := range accs {
		accs[j].Reset() // a recycled slot may hold an old sketch
	}
	mk.wins = append(mk.wins, memWindow{w: w, st: WindowState{NextEarly: NoTimer, Accs: accs}})
	s.windows++
	return &mk.wins[i].st
}

// slot returns the accumulators of the i-th window of mk.
func (mk *memKey) slot(i int) []aggregate.Acc {
	lo, hi := i*mk.nAccs, (i+1)*mk.nAccs
	return mk.accs[lo:hi:hi]
}

// PutWindow implements Store. States returned by this store are changed in
// place, so only a foreign *WindowState is copied in.
func (s *MemoryStore) PutWindow(w Window, st *WindowState) {
	if s.cur != nil {
		for i := range s.cur.wins {
			if &s.cur.wins[i].st == st {
				return
			}
		}
	}
	mine := s.Window(w)
	if mine == nil {
		mine = s.CreateWindow(w, len(st.Accs))
	}
	if mine == st {
		return
	}
	mine.Fired, mine.SinceFire, mine.NextEarly = st.Fired, st.SinceFire, st.NextEarly
	for i := range mine.Accs {
		mine.Accs[i].CopyFrom(&st.Accs[i])
	}
}

// MoveWindow implements Store.
func (s *MemoryStore) MoveWindow(from, to Window) bool {
	if s.cur == nil {
		return false
	}
	i := s.cur.find(from)
	if i < 0 {
		return false
	}
	if s.cur.find(to) >= 0 {
		panic("window: MoveWindow onto an existing window " + to.String())
	}
	s.cur.wins[i].w = to
	return true
}

// DeleteWindow implements Store.
func (s *MemoryStore) DeleteWindow(w Window) {
	mk := s.cur
	if mk == nil {
		return
	}
	i := mk.find(w)
	if i < 0 {
		return
	}
	last := len(mk.wins) - 1
	if i != last {
		// Swap the accumulator slots, so the deleted window's sketches stay
		// in the arena's spare capacity for reuse.
		a, b := mk.slot(i), mk.slot(last)
		for j := range a {
			a[j], b[j] = b[j], a[j]
		}
		mk.wins[i] = mk.wins[last]
		mk.wins[i].st.Accs = a
	}
	mk.wins[last] = memWindow{}
	mk.wins = mk.wins[:last]
	mk.accs = mk.accs[:last*mk.nAccs]
	s.windows--
	s.checkEmpty(mk)
}

// MergingWindows implements Store.
func (s *MemoryStore) MergingWindows(dst []Window) []Window {
	if s.cur == nil {
		return dst
	}
	return append(dst, s.cur.sessions...)
}

// PutMergingWindows implements Store.
func (s *MemoryStore) PutMergingWindows(ws []Window) {
	if len(ws) == 0 && s.cur == nil {
		return
	}
	mk := s.mustKey()
	mk.sessions = append(mk.sessions[:0], ws...)
	s.checkEmpty(mk)
}

// ReadingCount implements Store.
func (s *MemoryStore) ReadingCount() int64 {
	if s.cur == nil {
		return 0
	}
	return s.cur.count
}

// PutReadingCount implements Store.
func (s *MemoryStore) PutReadingCount(n int64) {
	if n == 0 && s.cur == nil {
		return
	}
	mk := s.mustKey()
	mk.count = n
	s.checkEmpty(mk)
}

// AddTimer implements Store.
func (s *MemoryStore) AddTimer(d Domain, time int64, w Window) {
	mk := s.mustKey()
	if s.timers[d].add(time, timerID[*memKey]{mk, w}) {
		mk.timers++
	}
}

// DeleteTimer implements Store.
func (s *MemoryStore) DeleteTimer(d Domain, time int64, w Window) {
	if s.cur == nil {
		return
	}
	if ok, _ := s.timers[d].remove(time, timerID[*memKey]{s.cur, w}); ok {
		s.cur.timers--
		s.checkEmpty(s.cur)
	}
}

// PopTimer implements Store.
func (s *MemoryStore) PopTimer(d Domain, upTo int64) (Timer, bool) {
	id, t, ok := s.timers[d].pop(upTo)
	if !ok {
		return Timer{}, false
	}
	id.k.timers--
	s.checkEmpty(id.k)
	return Timer{Domain: d, Time: t, KeyGroup: id.k.kg, Key: id.k.key, Window: id.w}, true
}

// Counts implements Store.
func (s *MemoryStore) Counts() (windows, timers int) {
	for i := range s.timers {
		timers += s.timers[i].len()
	}
	return s.windows, timers
}

func memKeyBytes(k *memKey) []byte { return k.key }
