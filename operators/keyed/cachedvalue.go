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
// or when its key is evicted. The state.Clock keeps the keys and their
// slots; the CachedValue states hold the values, one entry per slot.
//
// Memory is bounded by Options.CacheBytes. When it is full, a key is
// admitted only if one step of the CLOCK hand frees room (a key unused for
// a whole turn); otherwise the key's states are read and written through
// the backend, as without the cache. So a working set larger than the cache
// keeps the part that fits (cyclic access would evict every key before its
// next use under plain CLOCK), and cold keys still age out.
type objCache struct {
	*state.Clock[objSlot]
	states []cachedState
	// perSlot is the memory of one slot's entries of every state, besides
	// what cachedState.extraBytes reports: the Clock's charge for a slot.
	perSlot int
	gen     uint64 // the backend's Generation the cache is of
	touched uint64 // what touch read: stored, so its loads are not optimized away
	// touchSlots and touchHashes are touch's scratch.
	touchSlots  []int32
	touchHashes []uint64
}

// objSlot is what the Clock keeps of a key besides the key itself.
type objSlot struct {
	kg uint16
}

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

// touch reads the index words, the slots and the states' entries of the
// keys of es ahead of their lookups (state.Clock.ReadAhead): past the CPU
// caches (100,000 keys) a reading's lookup and state are a chain of cache
// misses, and taken together for a group of readings they overlap.
func (c *objCache) touch(es []pendingEntry) {
	if c.Len() < touchMinKeys {
		return
	}
	hs := c.touchHashes[:0]
	for i := range es {
		hs = append(hs, es[i].hash)
	}
	c.touchHashes = hs
	slots, sum := c.ReadAhead(hs, c.touchSlots[:0])
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

// recharge updates the memory charged for slot after a state's entry grew
// or shrank.
func (c *objCache) recharge(slot int32) {
	n := c.perSlot
	for _, st := range c.states {
		n += st.extraBytes(slot)
	}
	c.Recharge(slot, n)
}

// drop forgets the key in slot and its entries (the caller wrote back what
// had to be written).
func (c *objCache) drop(slot int32) {
	for _, st := range c.states {
		st.forget(slot)
	}
	c.Drop(slot)
}

// reset forgets every key without writing anything back (the backend was
// restored).
func (c *objCache) reset() {
	for i := range c.Slots() {
		if c.Resident(int32(i)) {
			c.drop(int32(i))
		}
	}
	c.Reset()
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
			c.Use(o.cur)
		}
		return o.cur, nil
	}
	o.curKG, o.curKey, o.curKnown = kg, append(o.curKey[:0], key...), true
	var h uint64
	if o.hashKey != nil && string(key) == string(o.hashKey) {
		h = o.hash
	} else {
		h = c.Hash(key)
	}
	if o.cur = c.Lookup(h, key); o.cur >= 0 {
		return o.cur, nil
	}
	if need := c.Cost(len(key), c.perSlot); c.Bytes()+need > c.Budget() {
		victim, ok := c.Step(-1)
		if !ok {
			return -1, nil
		}
		if err := o.evict(victim); err != nil {
			return -1, err
		}
		if c.Bytes()+need > c.Budget() {
			return -1, nil
		}
	}
	o.cur = c.Admit(h, o.curKey, c.perSlot)
	c.Val(o.cur).kg = o.curKG
	return o.cur, nil
}

// trim evicts keys other than keep while the cache is over its budget (a
// key's entry grew), for at most two turns of the CLOCK hand.
func (o *Operator) trim(keep int32) error {
	c := &o.objs
	for steps := 0; c.Over() && steps < 2*c.Slots(); steps++ {
		if victim, ok := c.Step(keep); ok {
			if err := o.evict(victim); err != nil {
				return err
			}
		}
	}
	return nil
}

// evict writes slot's dirty entries back and drops it.
func (o *Operator) evict(slot int32) error {
	if o.objs.Clean(slot) {
		if err := o.writeBack(slot); err != nil {
			return err
		}
	}
	o.objs.drop(slot)
	return nil
}

// writeBack writes the dirty entries of slot into the backend, with the
// slot's key current for the time being.
func (o *Operator) writeBack(slot int32) error {
	c := &o.objs
	kg, key := o.kc.CurrentKey()
	o.saveKey = append(o.saveKey[:0], key...)
	o.kc.SetCurrentKey(c.Val(slot).kg, c.Key(slot))
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
	return c.Flush(o.writeBack)
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
		c.op.objs.MarkDirty(slot)
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
