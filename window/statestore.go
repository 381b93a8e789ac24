package window

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window/aggregate"
)

// StateStore is the Store on a state.Backend (bbolt behind a write-back
// cache, or the in-memory backend), with the byte layouts of statekey.go:
// one bucket "<operator>/windows" for window states, merging sets and count
// counters (keyGroup | key | namespace), and one "<operator>/timers" for the
// timers of all domains, ordered exactly as PopTimer must return them. It
// gives the same results as MemoryStore (a property test pins this) while
// keeping memory bounded by the backend's cache, whatever the number of keys
// and windows.
//
// Errors: the Store interface returns none, so StateStore keeps the first
// backend error (state.ErrFull, an I/O error) and then acts as an empty,
// inert store; the caller must check Err after each batch and stop the
// pipeline (restoring from the last checkpoint) when it is not nil.
//
// Restore: a Backend.Restore is noticed (through Backend.Generation) at the
// next call, and the counts are rebuilt with one scan.
type StateStore struct {
	be      state.Backend
	bucket  state.Bucket
	timers  state.Bucket
	queues  [CountDomain + 1]*state.TimerQueue
	funcs   []aggregate.Func
	windows int
	gen     uint64
	err     error

	kg  uint16
	key []byte

	st       WindowState // scratch returned by Window and CreateWindow
	kbuf     []byte
	vbuf     []byte
	below    []byte
	timerKey []byte
}

var _ Store = (*StateStore)(nil)

// NewStateStore returns the Store of the operator named operatorName (unique
// per backend) whose aggregates are funcs (Operator.Funcs, i.e. Spec.Aggs in
// order), over be, counting any state be already holds.
func NewStateStore(be state.Backend, operatorName string, funcs []aggregate.Func) (*StateStore, error) {
	s := &StateStore{be: be, funcs: append([]aggregate.Func(nil), funcs...)}
	var err error
	if s.bucket, err = be.Bucket(operatorName+"/windows", state.KeyGroupPrefix); err != nil {
		return nil, fmt.Errorf("window: state store: %w", err)
	}
	if s.timers, err = be.Bucket(operatorName+"/timers", timerKeyGroup); err != nil {
		return nil, fmt.Errorf("window: state store: %w", err)
	}
	for d := EventTime; d <= CountDomain; d++ {
		if s.queues[d], err = state.NewTimerQueue(be, s.timers, []byte{byte(d)}); err != nil {
			return nil, fmt.Errorf("window: state store: %w", err)
		}
	}
	if err := s.recount(); err != nil {
		return nil, err
	}
	return s, nil
}

// timerKeyGroup is the state.KeyGroupFunc of the timer bucket.
func timerKeyGroup(key []byte) (uint16, bool) {
	t, err := ParseTimerKey(key, nil)
	if err != nil {
		return 0, false
	}
	return t.KeyGroup, true
}

// Err returns the first backend error, or nil.
func (s *StateStore) Err() error { return s.err }

func (s *StateStore) fail(err error) {
	if s.err == nil {
		s.err = fmt.Errorf("window: state store: %w", err)
	}
}

// refresh recounts after a Backend.Restore.
func (s *StateStore) refresh() bool {
	if s.err != nil {
		return false
	}
	if s.gen != s.be.Generation() {
		if err := s.recount(); err != nil {
			s.fail(err)
			return false
		}
	}
	return true
}

// recount counts the window states in the backend.
func (s *StateStore) recount() error {
	s.gen = s.be.Generation()
	s.windows = 0
	var bad error
	err := s.be.Scan(s.bucket, nil, func(k, _ []byte) bool {
		tag, err := namespaceTag(k)
		if err != nil {
			bad = err
			return false
		}
		if tag == nsWindow {
			s.windows++
		}
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return fmt.Errorf("window: state store: count windows: %w", err)
	}
	return nil
}

// namespaceTag returns the namespace tag of a state key (see statekey.go).
func namespaceTag(k []byte) (byte, error) {
	if len(k) < 2 {
		return 0, fmt.Errorf("%w: state key of %d bytes", ErrCorruptState, len(k))
	}
	n, m := binary.Uvarint(k[2:])
	if m <= 0 || n >= uint64(len(k)) || 2+m+int(n) >= len(k) {
		return 0, fmt.Errorf("%w: state key prefix", ErrCorruptState)
	}
	return k[2+m+int(n)], nil
}

// SetCurrentKey implements Store.
func (s *StateStore) SetCurrentKey(keyGroup uint16, key []byte) {
	s.kg = keyGroup
	s.key = append(s.key[:0], key...)
}

// Window implements Store.
func (s *StateStore) Window(w Window) *WindowState {
	if !s.refresh() {
		return nil
	}
	s.kbuf = AppendWindowKey(s.kbuf[:0], s.kg, s.key, w)
	v, ok, err := s.be.Get(s.bucket, s.kbuf)
	if err != nil {
		s.fail(err)
		return nil
	}
	if !ok {
		return nil
	}
	if err := DecodeWindowState(v, s.funcs, &s.st); err != nil {
		s.fail(err)
		return nil
	}
	return &s.st
}

// CreateWindow implements Store.
func (s *StateStore) CreateWindow(w Window, nAccs int) *WindowState {
	if nAccs != len(s.funcs) {
		panic(fmt.Sprintf("window: CreateWindow with %d accumulators, the store has %d funcs", nAccs, len(s.funcs)))
	}
	s.st.Fired, s.st.SinceFire, s.st.NextEarly = 0, 0, NoTimer
	if len(s.st.Accs) != nAccs {
		s.st.Accs = make([]aggregate.Acc, nAccs)
	}
	for i := range s.st.Accs {
		s.st.Accs[i].Reset()
	}
	if s.refresh() {
		s.put(w, &s.st)
		s.windows++
	}
	return &s.st
}

// PutWindow implements Store.
func (s *StateStore) PutWindow(w Window, st *WindowState) {
	if s.refresh() {
		s.put(w, st)
	}
}

func (s *StateStore) put(w Window, st *WindowState) {
	s.kbuf = AppendWindowKey(s.kbuf[:0], s.kg, s.key, w)
	s.vbuf = AppendWindowState(s.vbuf[:0], s.funcs, st)
	if err := s.be.Put(s.bucket, s.kbuf, s.vbuf); err != nil {
		s.fail(err)
	}
}

// MoveWindow implements Store.
func (s *StateStore) MoveWindow(from, to Window) bool {
	if !s.refresh() {
		return false
	}
	s.kbuf = AppendWindowKey(s.kbuf[:0], s.kg, s.key, from)
	v, ok, err := s.be.Get(s.bucket, s.kbuf)
	if err != nil || !ok {
		if err != nil {
			s.fail(err)
		}
		return false
	}
	s.vbuf = append(s.vbuf[:0], v...)
	if err := s.be.Delete(s.bucket, s.kbuf); err != nil {
		s.fail(err)
		return false
	}
	s.kbuf = AppendWindowKey(s.kbuf[:0], s.kg, s.key, to)
	if err := s.be.Put(s.bucket, s.kbuf, s.vbuf); err != nil {
		s.fail(err)
		return false
	}
	return true
}

// DeleteWindow implements Store.
func (s *StateStore) DeleteWindow(w Window) {
	if !s.refresh() {
		return
	}
	s.kbuf = AppendWindowKey(s.kbuf[:0], s.kg, s.key, w)
	_, ok, err := s.be.Get(s.bucket, s.kbuf)
	if err == nil && ok {
		err = s.be.Delete(s.bucket, s.kbuf)
		s.windows--
	}
	if err != nil {
		s.fail(err)
	}
}

// MergingWindows implements Store.
func (s *StateStore) MergingWindows(dst []Window) []Window {
	if !s.refresh() {
		return dst
	}
	s.kbuf = AppendMergingSetKey(s.kbuf[:0], s.kg, s.key)
	v, ok, err := s.be.Get(s.bucket, s.kbuf)
	if err != nil || !ok {
		if err != nil {
			s.fail(err)
		}
		return dst
	}
	out, err := DecodeWindows(v, dst)
	if err != nil {
		s.fail(err)
		return dst
	}
	return out
}

// PutMergingWindows implements Store.
func (s *StateStore) PutMergingWindows(ws []Window) {
	if !s.refresh() {
		return
	}
	s.kbuf = AppendMergingSetKey(s.kbuf[:0], s.kg, s.key)
	var err error
	if len(ws) == 0 {
		err = s.be.Delete(s.bucket, s.kbuf)
	} else {
		s.vbuf = AppendWindows(s.vbuf[:0], ws)
		err = s.be.Put(s.bucket, s.kbuf, s.vbuf)
	}
	if err != nil {
		s.fail(err)
	}
}

// ReadingCount implements Store.
func (s *StateStore) ReadingCount() int64 {
	if !s.refresh() {
		return 0
	}
	s.kbuf = AppendCountKey(s.kbuf[:0], s.kg, s.key)
	v, ok, err := s.be.Get(s.bucket, s.kbuf)
	if err != nil || !ok {
		if err != nil {
			s.fail(err)
		}
		return 0
	}
	n, k := binary.Uvarint(v)
	if k <= 0 || k != len(v) || n > math.MaxInt64 {
		s.fail(fmt.Errorf("%w: reading count", ErrCorruptState))
		return 0
	}
	return int64(n)
}

// PutReadingCount implements Store.
func (s *StateStore) PutReadingCount(n int64) {
	if !s.refresh() {
		return
	}
	s.kbuf = AppendCountKey(s.kbuf[:0], s.kg, s.key)
	var err error
	if n == 0 {
		err = s.be.Delete(s.bucket, s.kbuf)
	} else {
		s.vbuf = binary.AppendUvarint(s.vbuf[:0], uint64(n))
		err = s.be.Put(s.bucket, s.kbuf, s.vbuf)
	}
	if err != nil {
		s.fail(err)
	}
}

// AddTimer implements Store.
func (s *StateStore) AddTimer(d Domain, time int64, w Window) {
	if !s.refresh() {
		return
	}
	s.kbuf = AppendTimerKey(s.kbuf[:0], d, time, s.kg, s.key, w)
	if _, err := s.queues[d].Add(s.kbuf); err != nil {
		s.fail(err)
	}
}

// DeleteTimer implements Store.
func (s *StateStore) DeleteTimer(d Domain, time int64, w Window) {
	if !s.refresh() {
		return
	}
	s.kbuf = AppendTimerKey(s.kbuf[:0], d, time, s.kg, s.key, w)
	if _, err := s.queues[d].Delete(s.kbuf); err != nil {
		s.fail(err)
	}
}

// PopTimer implements Store.
func (s *StateStore) PopTimer(d Domain, upTo int64) (Timer, bool) {
	if !s.refresh() {
		return Timer{}, false
	}
	// Timer keys of d with time ≤ upTo sort below d | ordered(upTo+1).
	s.below = append(s.below[:0], byte(d))
	if upTo == math.MaxInt64 {
		s.below[0]++
	} else {
		s.below = appendOrderedInt(s.below, upTo+1)
	}
	k, ok, err := s.queues[d].Pop(s.below)
	if err != nil {
		s.fail(err)
		return Timer{}, false
	}
	if !ok {
		return Timer{}, false
	}
	t, err := ParseTimerKey(k, s.timerKey[:0])
	if err != nil {
		s.fail(err)
		return Timer{}, false
	}
	s.timerKey = t.Key
	return t, true
}

// Counts implements Store.
func (s *StateStore) Counts() (windows, timers int) {
	if !s.refresh() {
		return 0, 0
	}
	for _, q := range s.queues[EventTime:] {
		timers += q.Len()
	}
	return s.windows, timers
}
