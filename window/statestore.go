package window

import (
	"bytes"
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
// keeping memory bounded, whatever the number of keys and windows.
//
// Object cache: window states of recently used keys stay decoded in front of
// the backend (up to StateStoreOptions.CacheBytes), so a reading of a live
// window costs no decoding, encoding or backend access. A window is encoded
// into the backend only when it must leave: its key is evicted, Flush is
// called, or it is deleted after having been written (a window opened and
// purged between two Flushes never reaches the backend). When the cache is
// full, a key is admitted only if one step of the CLOCK hand frees room (a
// key unused for a whole turn); otherwise its windows are read and written
// through the backend as they would be without the cache. So a working set
// larger than the cache keeps the part that fits (cyclic access would evict
// every key before its next use under plain CLOCK), and cold keys still age
// out. A cached key's session merging set stays decoded the same way;
// count-window counters go to the backend directly.
//
// Timer front: timers stay in memory too (up to StateStoreOptions.TimerCache
// of them, then all go to the backend at once; their memory is part of
// StateStoreOptions.CacheBytes), so a timer that fires before
// the next checkpoint never reaches the backend, and one that fires after
// costs a delete but no backend scan; when event time runs ahead of the wall
// clock (a backlog replayed after an outage) most timers are of the first
// kind. Flush writes the new ones into the backend. The backend is asked
// whether it holds a timer only when it holds timers the front does not
// (after a restore or a full front) and the timer sorts at or below the
// largest one it may hold (state.TimerQueue), which new windows' timers
// rarely do.
//
// Checkpoints: the backend lags behind the store by the dirty cached
// windows and merging sets and the front's timers, so the caller must call
// Flush right before Backend.Snapshot (and
// before anything else reads the windows bucket from the backend).
//
// Errors: the Store interface returns none, so StateStore keeps the first
// backend error (state.ErrFull, an I/O error) and then acts as an empty,
// inert store; the caller must check Err after each batch and stop the
// pipeline (restoring from the last checkpoint) when it is not nil. With the
// object cache, a write error may surface later than the reading that caused
// it (at an eviction or at Flush), never after Flush returns nil.
//
// Restore: a Backend.Restore is noticed (through Backend.Generation) at the
// next call; the object cache is dropped and the counts are rebuilt with one
// scan.
type StateStore struct {
	be      state.Backend
	bucket  state.Bucket
	timers  state.Bucket
	queues  [CountDomain + 1]*state.TimerQueue
	funcs   []aggregate.Func
	windows int // window states, cached or in the backend
	outside int // window states in the backend only (not cached)
	gen     uint64
	err     error

	objs       objCache
	front      timerFront
	frontLimit int
	frontHigh  int       // the most timers the front held: its maps keep that capacity
	cacheBytes int       // StateStoreOptions.CacheBytes: the object cache and the front
	fk         *frontKey // the current key's front record, or nil if not looked up
	fkLooked   bool      // fk was looked up for the current key
	cur        int32     // cache slot of the current key, or -1
	lastWin    int       // index of the window Window or CreateWindow last returned in the current key
	tried      bool      // admitting the current key was tried (once per SetCurrentKey)
	kg         uint16
	key        []byte
	hash       uint64 // of key (state.Clock.Hash)

	st       WindowState // scratch for windows of keys not cached (and once failed)
	kbuf     []byte
	vbuf     []byte
	gbuf     []byte // a value read from the backend, copied
	below    []byte
	timerKey []byte
}

var _ Store = (*StateStore)(nil)

// StateStoreOptions tune a StateStore.
type StateStoreOptions struct {
	// CacheBytes bounds the approximate memory of the decoded window states
	// kept in front of the backend (keys, windows, accumulators, sketches)
	// and of the timer front together: the front's share is the most
	// timers it held (frontTimerBytes each; its maps keep their capacity),
	// and the window states get the rest, at least half. Zero means
	// DefaultStateCacheBytes. A tiny value is valid: every key switch then
	// evicts every window, slowly but correctly.
	CacheBytes int
	// TimerCache bounds the timers kept in memory, those written at a
	// Flush included until they fire; a full front goes to the backend
	// whole. Zero means as many as fill half of CacheBytes (15,768 for the
	// default: one tumbling or chained sliding window's timer for each of
	// 15k keys); 1 keeps at most one. A larger value than that default
	// holds memory beyond CacheBytes.
	TimerCache int
}

// frontTimerBytes is the memory of one timer in the front, measured at a
// full front of 32k tumbling timers of distinct keys (266 bytes: its set
// and queue slots, its key's record, the key's copy and map slot).
const frontTimerBytes = 266

// DefaultStateCacheBytes is the default StateStoreOptions.CacheBytes: about
// 20,000 windows of five simple aggregates, or 10,000 next to a full timer
// front.
const DefaultStateCacheBytes = 8 << 20

// NewStateStore returns the Store of the operator named operatorName (unique
// per backend) whose aggregates are funcs (Operator.Funcs, i.e. Spec.Aggs in
// order), over be, counting any state be already holds, with the default
// options.
func NewStateStore(be state.Backend, operatorName string, funcs []aggregate.Func) (*StateStore, error) {
	return NewStateStoreWith(be, operatorName, funcs, StateStoreOptions{})
}

// NewStateStoreWith is NewStateStore with options.
func NewStateStoreWith(be state.Backend, operatorName string, funcs []aggregate.Func, opts StateStoreOptions) (*StateStore, error) {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultStateCacheBytes
	}
	if opts.TimerCache <= 0 {
		opts.TimerCache = max(1, opts.CacheBytes/2/frontTimerBytes)
	}
	s := &StateStore{be: be, funcs: append([]aggregate.Func(nil), funcs...), cur: -1, frontLimit: opts.TimerCache, cacheBytes: opts.CacheBytes}
	s.objs = newObjCache(opts.CacheBytes, s.funcs)
	s.front = newTimerFront()
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

// Flush writes every changed cached window state and merging set and every
// new timer into the backend (all stay cached) and returns Err.
// Call it right before Backend.Snapshot: the snapshot then holds exactly the
// store's state.
func (s *StateStore) Flush() error {
	if !s.refresh() {
		return s.err
	}
	s.storeTimers()
	_ = s.objs.Flush(s.writeKey) // writeKey keeps its errors in s.err
	return s.err
}

// writeKey writes the dirty windows and merging set of the key in slot
// into the backend. A failure is kept in s.err, not returned: the other
// keys are written all the same, as before the first error.
func (s *StateStore) writeKey(slot int32) error {
	k := s.objs.Val(slot)
	for i := range k.wins {
		if ow := &k.wins[i]; ow.dirty {
			s.write(slot, ow)
		}
	}
	if k.setDirty {
		s.writeSet(slot)
	}
	return nil
}

// storeTimers writes the front's new timers into the backend (they stay in
// the front, stored). The front's timers are not in the backend otherwise,
// so each is new there.
func (s *StateStore) storeTimers() {
	if s.front.unstored() == 0 {
		return
	}
	s.front.store(func(d Domain, t int64, k *frontKey, w Window) {
		if s.err != nil {
			return
		}
		s.kbuf = AppendTimerKey(s.kbuf[:0], d, t, k.kg, k.key, w)
		if err := s.queues[d].AddNew(s.kbuf); err != nil {
			s.fail(err)
		}
	})
}

// spillTimers empties a full front into the backend.
func (s *StateStore) spillTimers() {
	s.storeTimers()
	s.front.reset()
	s.fk, s.fkLooked = nil, false
}

// backendOnly reports whether the backend holds timers of d the front does
// not.
func (s *StateStore) backendOnly(d Domain) bool {
	return s.queues[d].Len() > s.front.stored[d]
}

// write encodes a cached window state of the key in slot into the backend.
func (s *StateStore) write(slot int32, ow *objWin) {
	s.kbuf = AppendWindowKey(s.kbuf[:0], s.objs.Val(slot).kg, s.objs.Key(slot), ow.w)
	s.vbuf = AppendWindowState(s.vbuf[:0], s.funcs, &ow.st)
	if err := s.be.Put(s.bucket, s.kbuf, s.vbuf); err != nil {
		s.fail(err)
	}
	ow.dirty, ow.stored = false, true
}

// makeRoom releases spare accumulators and moves the CLOCK hand one step
// (evicting the key under it if unused for a whole turn, never the current
// key), and reports whether the cache is then within its budget.
func (s *StateStore) makeRoom() bool {
	c := &s.objs
	for c.Over() && c.dropSpare() {
	}
	if !c.Over() {
		return true
	}
	slot, ok := c.Step(s.cur)
	if !ok {
		return false
	}
	_ = s.writeKey(slot) // kept in s.err
	s.outside += len(c.Val(slot).wins)
	c.drop(slot)
	return !c.Over()
}

// cached reports whether the current key is cached, admitting it if there is
// room. Admission is tried once per SetCurrentKey: the CLOCK hand moving
// once per reading of an uncached key, not once per window, lets keys used
// once per turn of a cyclic access pattern stay.
func (s *StateStore) cached() bool {
	if s.cur >= 0 {
		return true
	}
	if s.tried {
		return false
	}
	s.tried = true
	if !s.makeRoom() {
		return false
	}
	s.cur = s.objs.admit(s.hash, s.kg, s.key)
	return true
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

// recount drops the object cache and counts the window states in the
// backend.
func (s *StateStore) recount() error {
	s.gen = s.be.Generation()
	s.objs.reset()
	s.front.reset()
	s.fk, s.fkLooked = nil, false
	s.cur = -1
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
	s.outside = s.windows
	return nil
}

// namespaceTag returns the namespace tag of a state key (see statekey.go).
func namespaceTag(k []byte) (byte, error) {
	_, tag, err := splitStateKey(k)
	return tag, err
}

// splitStateKey returns the key and the namespace tag of a state key.
func splitStateKey(k []byte) (key []byte, tag byte, err error) {
	if len(k) < 2 {
		return nil, 0, fmt.Errorf("%w: state key of %d bytes", ErrCorruptState, len(k))
	}
	n, m := binary.Uvarint(k[2:])
	if m <= 0 || n >= uint64(len(k)) || 2+m+int(n) >= len(k) {
		return nil, 0, fmt.Errorf("%w: state key prefix", ErrCorruptState)
	}
	return k[2+m : 2+m+int(n)], k[2+m+int(n)], nil
}

// SetCurrentKey implements Store.
func (s *StateStore) SetCurrentKey(keyGroup uint16, key []byte) {
	if s.cur >= 0 && s.objs.Val(s.cur).kg == keyGroup && bytes.Equal(s.objs.Key(s.cur), key) {
		return
	}
	s.kg = keyGroup
	s.key = append(s.key[:0], key...)
	s.hash = s.objs.Hash(key)
	s.tried = false
	s.fk, s.fkLooked = nil, false
	s.cur = s.objs.Lookup(s.hash, key)
}

// Window implements Store.
func (s *StateStore) Window(w Window) *WindowState {
	if !s.refresh() {
		return nil
	}
	if s.cur >= 0 {
		k := s.objs.Val(s.cur)
		if i := k.findNear(w, s.lastWin); i >= 0 {
			s.lastWin = i
			return &k.wins[i].st
		}
	}
	if s.outside == 0 {
		return nil // every window state is cached: no need to ask the backend
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
	if s.cur < 0 {
		// Admitting the key may evict others through the backend, which
		// invalidates v.
		s.gbuf = append(s.gbuf[:0], v...)
		v = s.gbuf
	}
	if !s.cached() {
		if err := DecodeWindowState(v, s.funcs, &s.st); err != nil {
			s.fail(err)
			return nil
		}
		return &s.st
	}
	ow := s.objs.addWin(s.cur, w)
	if err := DecodeWindowState(v, s.funcs, &ow.st); err != nil {
		s.fail(err)
		return nil
	}
	ow.stored = true
	s.objs.charge(s.cur, ow)
	s.outside--
	return &ow.st
}

// CreateWindow implements Store.
func (s *StateStore) CreateWindow(w Window, nAccs int) *WindowState {
	if nAccs != len(s.funcs) {
		panic(fmt.Sprintf("window: CreateWindow with %d accumulators, the store has %d funcs", nAccs, len(s.funcs)))
	}
	ok := s.refresh()
	if ok && s.cur >= 0 && s.objs.Over() {
		s.makeRoom() // a cached key's windows grow the cache too
	}
	if !ok || !s.cached() {
		s.st.Fired, s.st.SinceFire, s.st.NextEarly = 0, 0, NoTimer
		if len(s.st.Accs) != nAccs {
			s.st.Accs = make([]aggregate.Acc, nAccs)
		}
		for i := range s.st.Accs {
			s.st.Accs[i].Reset()
		}
		if ok {
			s.put(w, &s.st)
			s.windows++
			s.outside++
		}
		return &s.st
	}
	slot := s.cur
	s.objs.addWin(slot, w)
	k := s.objs.Val(slot)
	s.objs.markDirty(slot, len(k.wins)-1)
	s.windows++
	s.lastWin = len(k.wins) - 1
	return &k.wins[len(k.wins)-1].st
}

// PutWindow implements Store. States this store returned are changed in
// place, so PutWindow only marks them dirty; a foreign *WindowState is copied
// in.
func (s *StateStore) PutWindow(w Window, st *WindowState) {
	if !s.refresh() {
		return
	}
	if st == &s.st {
		s.put(w, st) // a window of a key not cached
		return
	}
	if s.cur >= 0 {
		k := s.objs.Val(s.cur)
		if i := k.findFrom(w, s.lastWin); i >= 0 && &k.wins[i].st == st {
			s.objs.markDirty(s.cur, i)
			if s.objs.sketchy {
				s.objs.charge(s.cur, &k.wins[i])
			}
			return
		}
	}
	mine := s.Window(w)
	if mine == nil {
		if s.err != nil {
			return
		}
		mine = s.CreateWindow(w, len(st.Accs))
	}
	mine.Fired, mine.SinceFire, mine.NextEarly = st.Fired, st.SinceFire, st.NextEarly
	for i := range mine.Accs {
		mine.Accs[i].CopyFrom(&st.Accs[i])
	}
	s.PutWindow(w, mine)
}

// put encodes a window state of the current key into the backend.
func (s *StateStore) put(w Window, st *WindowState) {
	s.kbuf = AppendWindowKey(s.kbuf[:0], s.kg, s.key, w)
	s.vbuf = AppendWindowState(s.vbuf[:0], s.funcs, st)
	if err := s.be.Put(s.bucket, s.kbuf, s.vbuf); err != nil {
		s.fail(err)
	}
}

// MoveWindow implements Store.
func (s *StateStore) MoveWindow(from, to Window) bool {
	st := s.Window(from)
	if st == nil {
		return false
	}
	if st == &s.st { // not cached: move the bytes
		s.kbuf = AppendWindowKey(s.kbuf[:0], s.kg, s.key, from)
		if err := s.be.Delete(s.bucket, s.kbuf); err != nil {
			s.fail(err)
			return false
		}
		s.put(to, st)
		return s.err == nil
	}
	k := s.objs.Val(s.cur)
	i := k.find(from)
	ow := &k.wins[i]
	if ow.stored {
		s.kbuf = AppendWindowKey(s.kbuf[:0], s.kg, s.key, from)
		if err := s.be.Delete(s.bucket, s.kbuf); err != nil {
			s.fail(err)
			return false
		}
		ow.stored = false
	}
	ow.w = to
	s.objs.markDirty(s.cur, i)
	return true
}

// DeleteWindow implements Store.
func (s *StateStore) DeleteWindow(w Window) {
	if !s.refresh() {
		return
	}
	if s.cur >= 0 {
		k := s.objs.Val(s.cur)
		if i := k.find(w); i >= 0 {
			if k.wins[i].stored {
				s.kbuf = AppendWindowKey(s.kbuf[:0], s.kg, s.key, w)
				if err := s.be.Delete(s.bucket, s.kbuf); err != nil {
					s.fail(err)
				}
			}
			s.objs.removeWin(s.cur, i)
			s.windows--
			return
		}
	}
	if s.outside == 0 {
		return
	}
	s.kbuf = AppendWindowKey(s.kbuf[:0], s.kg, s.key, w)
	_, ok, err := s.be.Get(s.bucket, s.kbuf)
	if err == nil && ok {
		err = s.be.Delete(s.bucket, s.kbuf)
		s.windows--
		s.outside--
	}
	if err != nil {
		s.fail(err)
	}
}

// MergingWindows implements Store. A cached key keeps its merging set
// decoded, like its windows.
func (s *StateStore) MergingWindows(dst []Window) []Window {
	if !s.refresh() {
		return dst
	}
	if s.cur >= 0 {
		if k := s.objs.Val(s.cur); k.setKnown {
			return append(dst, k.set...)
		}
	}
	s.kbuf = AppendMergingSetKey(s.kbuf[:0], s.kg, s.key)
	v, ok, err := s.be.Get(s.bucket, s.kbuf)
	if err != nil {
		s.fail(err)
		return dst
	}
	out := dst
	if ok {
		if out, err = DecodeWindows(v, dst); err != nil {
			s.fail(err)
			return dst
		}
	}
	// out is the caller's memory: admitting the key (which may evict
	// others through the backend) leaves it valid.
	if s.cached() {
		s.objs.putSet(s.cur, out[len(dst):], false)
	}
	return out
}

// PutMergingWindows implements Store.
func (s *StateStore) PutMergingWindows(ws []Window) {
	if !s.refresh() {
		return
	}
	if s.cached() {
		s.objs.putSet(s.cur, ws, true)
		return
	}
	s.putSet(s.kg, s.key, ws)
}

// writeSet writes the cached merging set of the key in slot into the
// backend.
func (s *StateStore) writeSet(slot int32) {
	k := s.objs.Val(slot)
	s.putSet(k.kg, s.objs.Key(slot), k.set)
	k.setDirty = false
}

// putSet writes the merging set ws of key into the backend (deletes it when
// empty).
func (s *StateStore) putSet(kg uint16, key []byte, ws []Window) {
	s.kbuf = AppendMergingSetKey(s.kbuf[:0], kg, key)
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

// frontKey returns the current key's front record; with create, it
// creates it.
func (s *StateStore) frontKey(create bool) *frontKey {
	if !s.fkLooked || (create && s.fk == nil) {
		if create {
			s.fk = s.front.intern(s.kg, s.key)
		} else {
			s.fk = s.front.lookup(s.key)
		}
		s.fkLooked = true
	}
	return s.fk
}

// AddTimer implements Store.
func (s *StateStore) AddTimer(d Domain, time int64, w Window) {
	if !s.refresh() {
		return
	}
	if k := s.frontKey(false); k != nil && s.front.has(d, time, k, w) {
		return
	}
	if s.backendOnly(d) {
		s.kbuf = AppendTimerKey(s.kbuf[:0], d, time, s.kg, s.key, w)
		if ok, err := s.queues[d].Contains(s.kbuf); ok || err != nil {
			if err != nil {
				s.fail(err)
			}
			return
		}
	}
	s.front.add(d, time, s.frontKey(true), w)
	if s.front.n > s.frontHigh {
		// The front's memory does not shrink (reset keeps it): the
		// window states get what the largest front left.
		s.frontHigh = s.front.n
		s.objs.SetBudget(max(s.cacheBytes-s.frontHigh*frontTimerBytes, s.cacheBytes/2))
	}
	if s.front.n > s.frontLimit {
		s.spillTimers()
	}
}

// DeleteTimer implements Store.
func (s *StateStore) DeleteTimer(d Domain, time int64, w Window) {
	if !s.refresh() {
		return
	}
	if k := s.frontKey(false); k != nil {
		if ok, stored := s.front.remove(d, time, k, w); ok {
			if stored {
				s.kbuf = AppendTimerKey(s.kbuf[:0], d, time, s.kg, s.key, w)
				if err := s.queues[d].DeleteKnown(s.kbuf); err != nil {
					s.fail(err)
				}
			}
			return
		}
	}
	if !s.backendOnly(d) {
		return
	}
	s.kbuf = AppendTimerKey(s.kbuf[:0], d, time, s.kg, s.key, w)
	if _, err := s.queues[d].Delete(s.kbuf); err != nil {
		s.fail(err)
	}
}

// PopTimer implements Store. It returns the earlier of the front's and the
// backend-only timers' next.
func (s *StateStore) PopTimer(d Domain, upTo int64) (Timer, bool) {
	if !s.refresh() {
		return Timer{}, false
	}
	fk, fw, ft, inFront := s.front.peek(d, upTo)
	q := s.queues[d]
	if s.backendOnly(d) {
		if inFront {
			// Backend timers that sort before the front's: stored copies of
			// front timers sort after it, so these are backend-only.
			s.below = AppendTimerKey(s.below[:0], d, ft, fk.kg, fk.key, fw)
		} else {
			// Timer keys of d with time ≤ upTo sort below d | ordered(upTo+1).
			s.below = append(s.below[:0], byte(d))
			if upTo == math.MaxInt64 {
				s.below[0]++
			} else {
				s.below = appendOrderedInt(s.below, upTo+1)
			}
		}
		k, ok, err := q.Pop(s.below)
		if err != nil {
			s.fail(err)
			return Timer{}, false
		}
		if ok {
			t, err := ParseTimerKey(k, s.timerKey[:0])
			if err != nil {
				s.fail(err)
				return Timer{}, false
			}
			s.timerKey = t.Key
			return t, true
		}
	}
	if !inFront {
		return Timer{}, false
	}
	if s.front.take(d, fk) {
		s.below = AppendTimerKey(s.below[:0], d, ft, fk.kg, fk.key, fw)
		if err := q.DeleteKnown(s.below); err != nil {
			s.fail(err)
			return Timer{}, false
		}
	}
	return Timer{Domain: d, Time: ft, KeyGroup: fk.kg, Key: fk.key, Window: fw}, true
}

// MemoryBytes is what the store holds in front of its backend, as charged
// to StateStoreOptions.CacheBytes: its decoded window states and merging
// sets and its timer front.
func (s *StateStore) MemoryBytes() int64 {
	return int64(s.objs.Bytes() + s.frontHigh*frontTimerBytes)
}

// Counts implements Store.
func (s *StateStore) Counts() (windows, timers int) {
	if !s.refresh() {
		return 0, 0
	}
	for _, q := range s.queues[EventTime:] {
		timers += q.Len()
	}
	return s.windows, timers + s.front.unstored()
}
