package state

import (
	"hash/maphash"
	"unsafe"
)

// Clock is a bounded cache of values of type V by byte-string key, evicted
// with the CLOCK (second-chance) algorithm. It is the object cache in front
// of a Backend: the window operator's StateStore and the keyed operator use
// it to keep the decoded state of recently used keys. It is bookkeeping only:
// it never reads or writes a Backend, and never evicts on its own. The
// caller asks Step for a victim when Bytes is over Budget, writes the
// victim back if it must, and Drops it.
//
// Slots: a resident key has a slot, an int32 that stays its own until Drop
// and indexes the caller's side arrays (a slot is reused by a later key).
// Slots of dropped keys are reused before new ones are made, so the slots
// in use stay dense and the arrays small.
//
// Eviction order: the hand visits resident slots in slot order, cyclically.
// A slot whose reference bit is set (Admit, Lookup and Use set it) has it
// cleared and is passed over; the first slot found without it is the
// victim. One Step looks at one resident slot, so a key used at least once
// per turn of the hand is never chosen.
//
// Byte budget: Bytes is, for every resident slot, SlotBytes (the slot and
// its index words), the key's bytes when it is longer than the slot holds
// inline, and what the caller charged for the value (Admit, Recharge,
// AddSlotBytes); plus what the caller charged to no slot (AddShared). It is
// an estimate; nothing is allocated or freed to match it. Budget is only
// compared with it: Over reports Bytes > Budget.
//
// Dirty slots: MarkDirty records that a slot's value differs from the
// backend; Flush and Clean take the mark off. Eviction does not look at it:
// Step may return a dirty slot, and Drop forgets a dirty slot's mark with
// its key, so the caller writes a dirty victim back before dropping it.
//
// No method allocates once the slots, the index and the dirty list have
// grown to the working set, except Admit copying a key longer than a slot
// holds inline into a slot that never held one as long.
//
// Clock is not safe for concurrent use.
type Clock[V any] struct {
	table  []uint64 // index: 0 empty; else hash tag:u32 | slot+1:u32
	n      int      // resident slots
	seed   maphash.Seed
	slots  []clockSlot[V]
	free   []int32 // unused slots
	listed []int32 // slots marked dirty since the last Flush, in first-mark order
	hand   int
	bytes  int
	budget int
}

type clockSlot[V any] struct {
	// The hash and the key first: a lookup reads them; then the value, which
	// a hit reads next (and a small one fills the padding after flags).
	hash  uint64
	short [clockInlineKey]byte // the key, if at most clockInlineKey bytes
	klen  int32
	flags uint8
	val   V
	long  []byte // the key, if longer; its buffer is kept for the slot's next key
	bytes int    // charged for the slot
}

const (
	slotUsed   uint8 = 1 << iota // the slot holds a key
	slotRef                      // CLOCK reference bit
	slotDirty                    // MarkDirty'd since the last Clean or Flush
	slotListed                   // in Clock.listed
)

// clockInlineKey is the longest key a slot holds inline: device ids,
// sensor names and the like fit, and a lookup then compares the key in the
// slot the index pointed to, not in memory elsewhere.
const clockInlineKey = 24

// NewClock returns an empty Clock bounded by budget bytes. Its hash seed
// is random, as a Go map's: keys come from devices, and a fixed hash could
// be flooded with colliding ones. Only the index's layout depends on the
// seed, never a result or the eviction order.
func NewClock[V any](budget int) *Clock[V] {
	return &Clock[V]{seed: maphash.MakeSeed(), budget: budget}
}

// SlotBytes is what a resident slot is charged besides a long key's bytes
// and the caller's charge: the slot itself and two index words (the index
// is at most half full).
func (c *Clock[V]) SlotBytes() int { return int(unsafe.Sizeof(clockSlot[V]{})) + 16 }

// Cost is what admitting a key of keyLen bytes whose value is charged n
// would add to Bytes.
func (c *Clock[V]) Cost(keyLen, n int) int {
	if keyLen > clockInlineKey {
		n += keyLen
	}
	return c.SlotBytes() + n
}

// Hash returns the hash of key that Lookup and Admit take. A caller that
// holds a key for a while hashes it once.
func (c *Clock[V]) Hash(key []byte) uint64 { return maphash.Bytes(c.seed, key) }

// Lookup returns the slot of key, whose hash is h, or -1. A hit counts as a
// use (it sets the slot's reference bit).
func (c *Clock[V]) Lookup(h uint64, key []byte) int32 {
	s := c.find(h, key)
	if s >= 0 {
		c.slots[s].flags |= slotRef
	}
	return s
}

// find is Lookup without the use.
func (c *Clock[V]) find(h uint64, key []byte) int32 {
	if len(c.table) == 0 {
		return -1
	}
	// Open addressing with linear probing: a probe is one word holding a
	// tag of the hash, so a miss rarely touches a slot, and a hit reads
	// the one slot (a map would also read the key's bytes elsewhere).
	mask := uint64(len(c.table) - 1)
	tag := uint32(h >> 32)
	for i := h & mask; ; i = (i + 1) & mask {
		v := c.table[i]
		if v == 0 {
			return -1
		}
		if uint32(v>>32) == tag {
			if s := int32(uint32(v) - 1); c.slots[s].hasKey(key) {
				return s
			}
		}
	}
}

func (s *clockSlot[V]) hasKey(key []byte) bool {
	if len(key) <= clockInlineKey {
		return int(s.klen) == len(key) && string(s.short[:len(key)]) == string(key)
	}
	return string(s.long) == string(key)
}

// Use sets the reference bit of slot, resident: it counts as used.
func (c *Clock[V]) Use(slot int32) { c.slots[slot].flags |= slotRef }

// Admit makes key, whose hash is h and which must not be resident,
// resident with its reference bit set, charged Cost(len(key), n), and
// returns its slot. The slot's value is what the slot's previous key left
// (or V's zero value): the caller resets it. Admit never evicts; the
// caller makes room first if it must.
func (c *Clock[V]) Admit(h uint64, key []byte, n int) int32 {
	var i int32
	if k := len(c.free); k > 0 {
		i = c.free[k-1]
		c.free = c.free[:k-1]
	} else {
		i = int32(len(c.slots))
		c.slots = append(c.slots, clockSlot[V]{})
	}
	if 2*(c.n+1) > len(c.table) {
		c.grow() // before the slot is used: grow puts the used slots back
	}
	s := &c.slots[i]
	s.hash, s.klen = h, int32(len(key))
	s.flags = s.flags&slotListed | slotUsed | slotRef // a dropped slot may still be listed
	if len(key) <= clockInlineKey {
		copy(s.short[:], key)
		s.long = s.long[:0]
	} else {
		s.long = append(s.long[:0], key...)
	}
	c.put(h, i)
	c.n++
	s.bytes = c.Cost(len(key), n)
	c.bytes += s.bytes
	return i
}

func (c *Clock[V]) put(h uint64, slot int32) {
	mask := uint64(len(c.table) - 1)
	i := h & mask
	for c.table[i] != 0 {
		i = (i + 1) & mask
	}
	c.table[i] = h>>32<<32 | uint64(uint32(slot)+1)
}

// grow doubles the index and puts the resident slots back.
func (c *Clock[V]) grow() {
	c.table = make([]uint64, max(64, 2*len(c.table)))
	for i := range c.slots {
		if c.slots[i].flags&slotUsed != 0 {
			c.put(c.slots[i].hash, int32(i))
		}
	}
}

// unindex removes slot from the index, shifting the words after it back so
// no probe sequence is broken (no tombstones to clean up later).
func (c *Clock[V]) unindex(slot int32) {
	mask := uint64(len(c.table) - 1)
	want := uint64(uint32(slot) + 1)
	i := c.slots[slot].hash & mask
	for uint64(uint32(c.table[i])) != want {
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		v := c.table[j]
		if v == 0 {
			break
		}
		home := c.slots[uint32(v)-1].hash & mask
		// v may move to the hole at i unless its home lies cyclically in (i, j].
		if (j-home)&mask >= (j-i)&mask {
			c.table[i] = v
			i = j
		}
	}
	c.table[i] = 0
}

// Key returns the key of slot, resident; valid until the slot is dropped.
func (c *Clock[V]) Key(slot int32) []byte {
	s := &c.slots[slot]
	if s.klen <= clockInlineKey {
		return s.short[:s.klen]
	}
	return s.long
}

// Val returns the value of slot. It stays valid until the next Admit, which
// may move the slots.
func (c *Clock[V]) Val(slot int32) *V { return &c.slots[slot].val }

// Recharge sets the caller's charge for slot, resident, to n.
func (c *Clock[V]) Recharge(slot int32, n int) {
	s := &c.slots[slot]
	m := c.Cost(int(s.klen), n)
	c.bytes += m - s.bytes
	s.bytes = m
}

// AddSlotBytes adds delta (which may be negative) to the caller's charge
// for slot, resident.
func (c *Clock[V]) AddSlotBytes(slot int32, delta int) {
	c.slots[slot].bytes += delta
	c.bytes += delta
}

// AddShared adds delta (which may be negative) to the memory charged to no
// slot: what the caller keeps for the cache's sake, such as buffers for
// reuse. Drop and Reset leave it.
func (c *Clock[V]) AddShared(delta int) { c.bytes += delta }

// MarkDirty records that the value of slot, resident, differs from the
// backend, until Clean or Flush.
func (c *Clock[V]) MarkDirty(slot int32) {
	s := &c.slots[slot]
	s.flags |= slotDirty
	if s.flags&slotListed == 0 {
		s.flags |= slotListed
		c.listed = append(c.listed, slot)
	}
}

// Dirty reports whether slot is marked dirty.
func (c *Clock[V]) Dirty(slot int32) bool { return c.slots[slot].flags&slotDirty != 0 }

// Clean takes the dirty mark off slot and reports whether it was there.
func (c *Clock[V]) Clean(slot int32) bool {
	s := &c.slots[slot]
	d := s.flags&slotDirty != 0
	s.flags &^= slotDirty
	return d
}

// Flush takes the dirty mark off every dirty slot and calls write with it,
// in the order the slots were first marked since the previous Flush, and
// stops at the first error write returns (the slots after it keep their
// marks for the next Flush). The slots stay resident.
func (c *Clock[V]) Flush(write func(slot int32) error) error {
	for i, slot := range c.listed {
		s := &c.slots[slot]
		s.flags &^= slotListed
		if s.flags&slotDirty == 0 {
			continue // cleaned or dropped since it was marked
		}
		s.flags &^= slotDirty
		if err := write(slot); err != nil {
			c.listed = c.listed[:copy(c.listed, c.listed[i+1:])]
			return err
		}
	}
	c.listed = c.listed[:0]
	return nil
}

// Step moves the hand by one resident slot other than skip (-1: none): it
// clears the slot's reference bit and returns false, or, if the slot was
// not used since the hand last passed it, returns it as the victim. It
// returns false when no slot but skip is resident.
func (c *Clock[V]) Step(skip int32) (int32, bool) {
	if c.n == 0 || c.n == 1 && skip >= 0 {
		return -1, false
	}
	for {
		if c.hand >= len(c.slots) {
			c.hand = 0
		}
		i := int32(c.hand)
		s := &c.slots[i]
		c.hand++
		if s.flags&slotUsed == 0 || i == skip {
			continue
		}
		if s.flags&slotRef != 0 {
			s.flags &^= slotRef
			return -1, false
		}
		return i, true
	}
}

// Drop makes slot, resident, free: its key leaves the index, its charge
// leaves Bytes, and its dirty mark is forgotten unwritten. Its value stays
// as it is for the slot's next key (so buffers in it are reused).
func (c *Clock[V]) Drop(slot int32) {
	c.unindex(slot)
	c.n--
	s := &c.slots[slot]
	c.bytes -= s.bytes
	s.bytes = 0
	s.flags &= slotListed // still in c.listed, if it was: Flush passes over it
	c.free = append(c.free, slot)
}

// Reset drops every slot and forgets the dirty marks without writing
// anything (the backend was restored). The hand goes back to the first
// slot; AddShared's charge stays.
func (c *Clock[V]) Reset() {
	for i := range c.slots {
		if c.slots[i].flags&slotUsed != 0 {
			c.Drop(int32(i))
		}
		c.slots[i].flags = 0
	}
	c.listed = c.listed[:0]
	c.hand = 0
}

// Len returns the number of resident keys.
func (c *Clock[V]) Len() int { return c.n }

// Slots returns one more than the largest slot ever returned: a bound for
// the caller's side arrays and for loops over the slots.
func (c *Clock[V]) Slots() int { return len(c.slots) }

// Resident reports whether slot holds a key.
func (c *Clock[V]) Resident(slot int32) bool { return c.slots[slot].flags&slotUsed != 0 }

// Bytes returns the memory charged (see Clock).
func (c *Clock[V]) Bytes() int { return c.bytes }

// Budget returns the bound Over compares Bytes with.
func (c *Clock[V]) Budget() int { return c.budget }

// SetBudget changes the bound; nothing is evicted.
func (c *Clock[V]) SetBudget(budget int) { c.budget = budget }

// Over reports whether Bytes is above Budget.
func (c *Clock[V]) Over() bool { return c.bytes > c.budget }

// ReadAhead loads, for each hash in hashes, the index word and the slot of
// the hash's first probe position, and appends those slots to dst. Past the
// CPU caches a lookup is a chain of misses (index word, slot, then the
// caller's data); loads issued together here, one link of the chain for
// every key at a time, wait for memory together, so the lookups that follow
// find the lines cached (Go has no prefetch). The returned sum is what was
// read: the caller stores it so the loads are not optimized away. A slot
// appended may hold another key (its hash collided); only time is lost.
func (c *Clock[V]) ReadAhead(hashes []uint64, dst []int32) ([]int32, uint64) {
	t := c.table
	if len(t) == 0 {
		return dst, 0
	}
	mask := uint64(len(t) - 1)
	var sum uint64
	for _, h := range hashes {
		sum += t[h&mask]
	}
	for _, h := range hashes {
		if s := uint32(t[h&mask]); s != 0 && int(s) <= len(c.slots) {
			sl := &c.slots[s-1]
			sum += sl.hash + uint64(sl.klen) // the words a lookup reads first, maybe on two lines
			dst = append(dst, int32(s-1))
		}
	}
	return dst, sum
}
