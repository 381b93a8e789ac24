package keyed

import (
	"fmt"
	"unsafe"

	"github.com/eddy-edge/eddy/state"
)

// objCache keeps the per-key states of recently used keys decoded in
// memory, in front of the backend, as window.StateStore does for windows:
// a reading of a resident key costs one lookup for all its states, no
// backend access, decoding or encoding. A changed state is encoded into the
// backend only when it must leave memory: at a checkpoint (Operator.Flush)
// or when its key is evicted. It is pure bookkeeping of slots; the
// CachedValue states hold the values, one entry per slot.
//
// Memory is bounded by Options.CacheBytes. When it is full, a key is
// admitted only if one step of the CLOCK hand frees room (a key unused for
// a whole turn); otherwise the key's states are read and written through
// the backend, as without the cache. So a working set larger than the cache
// keeps the part that fits (cyclic access would evict every key before its
// next use under plain CLOCK), and cold keys still age out.
type objCache struct {
	index  keyIndex // key → slots index
	slots  []objSlot
	free   []int32 // unused slots
	listed []int32 // slots with a dirty state (objSlot.listed), in no order
	hand   int     // CLOCK hand
	states []cachedState
	// perSlot is the memory of one slot's entries of every state, besides
	// what cachedState.extraBytes reports.
	perSlot int
	bytes   int // approximate memory held
	budget  int
	gen     uint64 // the backend's Generation the cache is of
	touched uint64 // what touch read: stored, so its loads are not optimized away
	// touchSlots is touch's scratch: the slots of the keys it touches.
	touchSlots []int32
}

type objSlot struct {
	short  [maxShortKey]byte // the key, if it is at most maxShortKey bytes
	long   string            // else the key
	hash   uint64            // of the key (keyIndex)
	klen   int32
	kg     uint16
	used   bool // the slot holds a key
	ref    bool // CLOCK reference bit
	dirty  bool // some state's entry differs from the backend
	listed bool // the slot is in objCache.listed
	bytes  int  // memory charged for the slot
}

// objSlotOverhead approximates the memory of a slot besides a long key's
// bytes and its states' entries: the objSlot and two to four index words.
const objSlotOverhead = 104

// maxShortKey is the longest key an objSlot holds inline.
const maxShortKey = 24

// key returns the slot's key, valid while the slot holds it.
func (s *objSlot) key() []byte {
	if s.klen <= maxShortKey {
		return s.short[:s.klen]
	}
	return unsafe.Slice(unsafe.StringData(s.long), len(s.long))
}

func (s *objSlot) hasKey(key []byte) bool {
	if len(key) <= maxShortKey {
		return int(s.klen) == len(key) && string(s.short[:len(key)]) == string(key)
	}
	return s.long == string(key)
}

// longBytes is the memory of the slot's key outside the slot.
func (s *objSlot) longBytes() int { return len(s.long) }

// DefaultCacheBytes is Options.CacheBytes when it is 0: about 36,000 keys
// of one per-key function's state (a slot and a 128-byte entry).
const DefaultCacheBytes = 8 << 20

// cachedState is a CachedValue as the cache sees it.
type cachedState interface {
	// writeBack writes the slot's entry into the backend if it is dirty;
	// the context's current key is the slot's.
	writeBack(slot int32) error
	// forget drops the slot's entry (written back or not: the caller
	// decides), keeping its memory for the slot's next key.
	forget(slot int32)
	// extraBytes is the memory the slot's entry holds beyond its fixed
	// size (a string's bytes).
	extraBytes(slot int32) int
	// touch reads the entries of slots (and the memory they point to),
	// returning something of what it read.
	touch(slots []int32) uint64
}

// admit makes key, whose hash is h, resident (it must not be) and
// returns its slot.
func (c *objCache) admit(h uint64, kg uint16, key []byte) int32 {
	var i int32
	if n := len(c.free); n > 0 {
		i = c.free[n-1]
		c.free = c.free[:n-1]
	} else {
		i = int32(len(c.slots))
		c.slots = append(c.slots, objSlot{})
	}
	s := &c.slots[i]
	*s = objSlot{hash: h, klen: int32(len(key)), kg: kg, ref: true, listed: s.listed}
	if len(key) <= maxShortKey {
		copy(s.short[:], key)
	} else {
		s.long = string(key)
	}
	s.bytes = objSlotOverhead + s.longBytes() + c.perSlot
	c.index.insert(h, i, c.slots) // before used: a growing index puts the used slots back
	s.used = true
	c.bytes += s.bytes
	return i
}

// touch reads the index words, the slots and the states' entries of the
// keys of es ahead of their lookups. Past the CPU caches (100,000 keys) a
// reading's lookup and state are a chain of cache misses in turn (index
// word, slot, entry, the entry's own memory); loads issued together here,
// one link of the chain for every key at a time, wait for memory together,
// so the lookups and steps that follow find the lines cached (Go has no
// prefetch).
func (c *objCache) touch(es []pendingEntry) {
	t := c.index.table
	if c.index.n < touchMinKeys {
		return
	}
	mask := uint64(len(t) - 1)
	var sum uint64
	for i := range es {
		sum += t[es[i].hash&mask]
	}
	slots := c.touchSlots[:0]
	for i := range es {
		// The key's first probe: its slot unless it collided, and then
		// only this read is wasted.
		if s := uint32(t[es[i].hash&mask]); s != 0 && int(s) <= len(c.slots) {
			sl := &c.slots[s-1]
			sum += sl.hash + uint64(sl.short[0]) // an objSlot may straddle two lines
			slots = append(slots, int32(s-1))
		}
	}
	c.touchSlots = slots
	for _, st := range c.states {
		sum += st.touch(slots)
	}
	c.touched = sum
}

// touchMinKeys is the number of resident keys below which touch does
// nothing: their index and slots (some 100 bytes a key) stay in the CPU
// caches, so there is no miss to overlap.
const touchMinKeys = 4096

// markDirty records that a state's entry of slot differs from the backend.
func (c *objCache) markDirty(slot int32) {
	s := &c.slots[slot]
	s.dirty = true
	if !s.listed {
		s.listed = true
		c.listed = append(c.listed, slot)
	}
}

// recharge updates the memory charged for slot after a state's entry grew
// or shrank.
func (c *objCache) recharge(slot int32) {
	s := &c.slots[slot]
	n := objSlotOverhead + s.longBytes() + c.perSlot
	for _, st := range c.states {
		n += st.extraBytes(slot)
	}
	c.bytes += n - s.bytes
	s.bytes = n
}

// step moves the CLOCK hand by one resident key: it clears the key's
// reference bit, or, if the key was not used since the hand last passed,
// returns its slot for eviction. It never returns skip.
func (c *objCache) step(skip int32) (int32, bool) {
	if c.index.n == 0 || c.index.n == 1 && skip >= 0 {
		return -1, false
	}
	for {
		if c.hand >= len(c.slots) {
			c.hand = 0
		}
		i := int32(c.hand)
		s := &c.slots[i]
		c.hand++
		if !s.used || i == skip {
			continue
		}
		if s.ref {
			s.ref = false
			return -1, false
		}
		return i, true
	}
}

// drop forgets the key in slot and its entries (the caller wrote back what
// had to be written).
func (c *objCache) drop(slot int32) {
	s := &c.slots[slot]
	for _, st := range c.states {
		st.forget(slot)
	}
	c.index.remove(s.hash, slot, c.slots)
	c.bytes -= s.bytes
	s.long, s.used, s.ref, s.dirty, s.bytes = "", false, false, false, 0 // listed stays: the slot is still in c.listed
	c.free = append(c.free, slot)
}

// reset forgets every key without writing anything back (the backend was
// restored).
func (c *objCache) reset() {
	for i := range c.slots {
		if c.slots[i].used {
			c.drop(int32(i))
		}
		c.slots[i].listed = false
	}
	c.listed = c.listed[:0]
	c.hand = 0
}

// slot returns the cache slot of the context's current key, admitting the
// key if there is room, or -1: the key is not cached (its states are read
// and written through the backend).
func (o *Operator) slot() (int32, error) {
	c := &o.objs
	if g := o.be.Generation(); g != c.gen {
		c.reset() // restored: the backend holds the state now
		c.gen = g
		o.curKey, o.curKnown = o.curKey[:0], false
	}
	kg, key := o.kc.CurrentKey()
	if o.curKnown && kg == o.curKG && string(key) == string(o.curKey) {
		if o.cur >= 0 {
			c.slots[o.cur].ref = true
		}
		return o.cur, nil
	}
	o.curKG, o.curKey, o.curKnown = kg, append(o.curKey[:0], key...), true
	var h uint64
	if o.hashKey != nil && string(key) == string(o.hashKey) {
		h = o.hash
	} else {
		h = c.index.hash(key)
	}
	o.cur = c.index.find(h, key, c.slots)
	if o.cur >= 0 {
		c.slots[o.cur].ref = true
		return o.cur, nil
	}
	need := objSlotOverhead + c.perSlot
	if len(key) > maxShortKey {
		need += len(key)
	}
	if c.bytes+need > c.budget {
		victim, ok := c.step(-1)
		if !ok {
			return -1, nil
		}
		if err := o.evict(victim); err != nil {
			return -1, err
		}
		if c.bytes+need > c.budget {
			return -1, nil
		}
	}
	o.cur = c.admit(h, o.curKG, o.curKey)
	return o.cur, nil
}

// trim evicts keys other than keep while the cache is over its budget (a
// key's entry grew), for at most two turns of the CLOCK hand.
func (o *Operator) trim(keep int32) error {
	c := &o.objs
	for steps := 0; c.bytes > c.budget && steps < 2*len(c.slots); steps++ {
		if victim, ok := c.step(keep); ok {
			if err := o.evict(victim); err != nil {
				return err
			}
		}
	}
	return nil
}

// evict writes slot's dirty entries back and drops it.
func (o *Operator) evict(slot int32) error {
	if err := o.writeBack(slot); err != nil {
		return err
	}
	o.objs.drop(slot)
	return nil
}

// writeBack writes the dirty entries of slot into the backend, with the
// slot's key current for the time being.
func (o *Operator) writeBack(slot int32) error {
	c := &o.objs
	s := &c.slots[slot]
	if !s.dirty {
		return nil
	}
	s.dirty = false
	kg, key := o.kc.CurrentKey()
	o.saveKey = append(o.saveKey[:0], key...)
	o.kc.SetCurrentKey(s.kg, s.key())
	var err error
	for _, st := range c.states {
		if err = st.writeBack(slot); err != nil {
			break
		}
	}
	o.kc.SetCurrentKey(kg, o.saveKey)
	return err
}

// flushCache writes every dirty entry into the backend; they stay cached.
func (o *Operator) flushCache() error {
	c := &o.objs
	if g := o.be.Generation(); g != c.gen {
		c.reset()
		c.gen = g
		o.curKey, o.curKnown = o.curKey[:0], false
		return nil
	}
	for _, slot := range c.listed {
		c.slots[slot].listed = false
		if err := o.writeBack(slot); err != nil {
			return err
		}
	}
	c.listed = c.listed[:0]
	return nil
}

// CachedValue is a per-key value state of an Operator (the pipeline's
// state_ttl applies) whose values stay decoded in the operator's object
// cache between readings: Value and Update cost no backend access while
// the key is resident. The backend gets the value at the next Flush (a
// checkpoint) or when the key leaves the cache, stamped with the time it
// was last written, so TTL expires it exactly as a state.ValueState would:
// an expired value is never returned.
type CachedValue[T any] struct {
	op      *Operator
	vs      *state.ValueState[T]
	ttlMs   int64
	ents    []cachedEntry[T] // by slot
	scratch cachedEntry[T]   // the entry of a key not cached
	// load copies a decoded value (which may alias the codec's memory)
	// into dst; extra is the memory a value holds beyond its size.
	load  func(dst *T, src T)
	extra func(v *T) int
	// deep reads the memory a value points to (objCache.touch); nil: none.
	deep func(v *T) uint64
}

type cachedEntry[T any] struct {
	// The flags first: a lookup reads them, then v's beginning.
	loaded bool  // v, has and at are known; else only the backend knows
	has    bool  // the key has a value
	dirty  bool  // differs from the backend
	at     int64 // when v was written (TTL stamp), or state.NoExpiry
	v      T
}

// NewCachedValue registers the per-key value state name of op, cached.
// Call it before the first reading.
func NewCachedValue[T any](op *Operator, name string, codec state.Codec[T]) (*CachedValue[T], error) {
	return newCachedValue(op, name, codec, func(dst *T, src T) { *dst = src }, nil, false)
}

// newCachedValue is NewCachedValue; unused (a state no reading will
// read or write) takes no room in the object cache's slots.
func newCachedValue[T any](op *Operator, name string, codec state.Codec[T], load func(*T, T), extra func(*T) int, unused bool) (*CachedValue[T], error) {
	vs, err := state.NewValueState[T](op.kc, name, codec, op.StateTTL())
	if err != nil {
		return nil, fmt.Errorf("keyed: %w", err)
	}
	c := &CachedValue[T]{op: op, vs: vs, ttlMs: op.opts.TTL.Milliseconds(), load: load, extra: extra}
	if !unused {
		op.objs.states = append(op.objs.states, c)
		op.objs.perSlot += int(unsafe.Sizeof(cachedEntry[T]{}))
	}
	return c, nil
}

// entry returns the current key's entry, loaded, and its slot (-1: the
// key is not cached, the entry is a scratch one).
func (c *CachedValue[T]) entry() (*cachedEntry[T], int32, error) {
	slot, err := c.op.slot()
	if err != nil {
		return nil, -1, err
	}
	e := &c.scratch
	if slot >= 0 {
		for int(slot) >= len(c.ents) {
			c.ents = append(c.ents, cachedEntry[T]{})
		}
		e = &c.ents[slot]
	} else {
		e.loaded = false // read through every time
	}
	if !e.loaded {
		v, at, ok, err := c.vs.ValueStamped()
		if err != nil {
			return nil, -1, err
		}
		e.loaded, e.has, e.dirty, e.at = true, ok, false, at
		if ok {
			c.load(&e.v, v)
		}
	}
	if e.has && c.ttlMs > 0 && e.at <= c.op.now-c.ttlMs && c.op.now-c.ttlMs <= c.op.now {
		e.has = false // expired: never returned (the backend's copy expires alike)
	}
	return e, slot, nil
}

// Value returns the value of the current key, or false if there is none
// (or it expired).
func (c *CachedValue[T]) Value() (T, bool, error) {
	e, _, err := c.entry()
	if err != nil || !e.has {
		var zero T
		return zero, false, err
	}
	return e.v, true, nil
}

// Update sets the value of the current key.
func (c *CachedValue[T]) Update(v T) error {
	slot, err := c.op.slot()
	if err != nil {
		return err
	}
	if slot < 0 {
		return c.vs.Update(v)
	}
	for int(slot) >= len(c.ents) {
		c.ents = append(c.ents, cachedEntry[T]{})
	}
	e := &c.ents[slot]
	e.v, e.loaded = v, true
	return c.written(e, slot)
}

// written records that e, the entry of slot, was set now.
func (c *CachedValue[T]) written(e *cachedEntry[T], slot int32) error {
	if slot < 0 {
		return c.vs.Update(e.v)
	}
	e.has, e.at = true, state.NoExpiry
	if c.ttlMs > 0 {
		e.at = c.op.now
	}
	if !e.dirty {
		e.dirty = true
		c.op.objs.markDirty(slot)
	}
	if c.extra != nil {
		c.op.objs.recharge(slot)
		return c.op.trim(slot)
	}
	return nil
}

func (c *CachedValue[T]) writeBack(slot int32) error {
	if int(slot) >= len(c.ents) {
		return nil
	}
	e := &c.ents[slot]
	if !e.dirty {
		return nil
	}
	e.dirty = false
	return c.vs.UpdateStamped(e.v, e.at)
}

func (c *CachedValue[T]) forget(slot int32) {
	if int(slot) < len(c.ents) {
		e := &c.ents[slot]
		e.loaded, e.has, e.dirty = false, false, false
	}
}

func (c *CachedValue[T]) touch(slots []int32) uint64 {
	var sum uint64
	for _, s := range slots {
		if int(s) < len(c.ents) && c.ents[s].loaded {
			sum++
		}
	}
	if c.deep == nil {
		return sum
	}
	for _, s := range slots {
		if int(s) < len(c.ents) && c.ents[s].loaded {
			sum += c.deep(&c.ents[s].v)
		}
	}
	return sum
}

func (c *CachedValue[T]) extraBytes(slot int32) int {
	if c.extra == nil || int(slot) >= len(c.ents) || !c.ents[slot].loaded {
		return 0
	}
	return c.extra(&c.ents[slot].v)
}
