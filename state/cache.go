package state

import (
	"bytes"
	"slices"
)

// cache is the bounded write-back cache in front of bbolt: entries (present,
// or known absent) indexed per bucket by key, dirty ones written back in
// batched transactions, clean ones evicted with the CLOCK algorithm when the
// cache outgrows its budget.
//
// Hot keys cost no allocation: the per-bucket maps are looked up with
// string(key) conversions the compiler does not allocate for, and an update
// reuses the entry's value buffer when it fits.
//
// It is not a Clock, though both evict by CLOCK: a Clock's owner writes a
// victim back at once, but a dirty entry here can only go out in a batched
// bbolt transaction, so eviction passes over dirty entries; and its entries
// (raw bytes by bucket and key) are also the change tracking's record of
// what the next snapshot copies.
type cache struct {
	index   []map[string]int32 // by Bucket: key → entries index
	entries []entry
	free    []int32 // unused entries slots
	dirty   []int32 // entries with flagDirty, in no order
	changed []int32 // entries given flagChanged, in no order; may repeat or be stale (check the flag)
	hand    int     // CLOCK hand

	// changes receives the key of a changed entry leaving the cache (the
	// snapshot then reads it from bbolt).
	changes *changeSet

	bytes  int // approximate memory held
	budget int
}

type entry struct {
	key    string // shared with the index map; never modified
	val    []byte
	bucket Bucket
	flags  uint8
}

const (
	flagUsed    uint8 = 1 << iota // the slot holds an entry
	flagDirty                     // differs from bbolt
	flagAbsent                    // the key does not exist (deleted or never written)
	flagRef                       // CLOCK reference bit
	flagChanged                   // recorded in the change set since the last snapshot
	flagKnown                     // whether the key exists in bbolt is known (flagOnDisk)
	flagOnDisk                    // the key exists in bbolt (valid with flagKnown)
)

// entryOverhead approximates the memory of an entry besides its key and value
// bytes: the entry struct, the map slot, the index and dirty slots.
const entryOverhead = 112

func newCache(budget int, changes *changeSet) *cache {
	return &cache{budget: budget, changes: changes}
}

// lookup returns the index of key in b, or -1.
func (c *cache) lookup(b Bucket, key []byte) int32 {
	if int(b) >= len(c.index) || c.index[b] == nil {
		return -1
	}
	i, ok := c.index[b][string(key)]
	if !ok {
		return -1
	}
	return i
}

// insert adds a new entry for key in b (which must not be cached) and returns
// its index.
func (c *cache) insert(b Bucket, key, val []byte, flags uint8) int32 {
	for int(b) >= len(c.index) {
		c.index = append(c.index, nil)
	}
	if c.index[b] == nil {
		c.index[b] = make(map[string]int32)
	}
	var i int32
	if n := len(c.free); n > 0 {
		i = c.free[n-1]
		c.free = c.free[:n-1]
	} else {
		i = int32(len(c.entries))
		c.entries = append(c.entries, entry{})
	}
	e := &c.entries[i]
	e.key = string(key)
	e.val = append(e.val[:0], val...)
	e.bucket = b
	e.flags = flags | flagUsed | flagRef
	c.index[b][e.key] = i
	c.bytes += len(key) + cap(e.val) + entryOverhead
	if flags&flagDirty != 0 {
		c.dirty = append(c.dirty, i)
	}
	return i
}

// set replaces the value of entry i (absent if val is nil and absent).
func (c *cache) set(i int32, val []byte, absent bool) {
	e := &c.entries[i]
	old := cap(e.val)
	e.val = append(e.val[:0], val...)
	c.bytes += cap(e.val) - old
	if absent {
		e.flags |= flagAbsent
	} else {
		e.flags &^= flagAbsent
	}
	e.flags |= flagRef
	if e.flags&flagDirty == 0 {
		e.flags |= flagDirty
		c.dirty = append(c.dirty, i)
	}
}

// markChanged gives entry i flagChanged, the change set's mark for the next
// snapshot, and reports whether it was new. The entry is listed for the
// snapshot only while the change set tracks keys: once it overflowed, the
// next snapshot is full and passes over every entry.
func (c *cache) markChanged(i int32) bool {
	e := &c.entries[i]
	if e.flags&flagChanged != 0 {
		return false
	}
	e.flags |= flagChanged
	if !c.changes.overflow {
		c.changed = append(c.changed, i)
	}
	return true
}

// remove drops clean entry i; a changed one leaves its key in the change
// set.
func (c *cache) remove(i int32) {
	e := &c.entries[i]
	if e.flags&flagChanged != 0 {
		c.changes.evicted(e.bucket, e.key)
	}
	delete(c.index[e.bucket], e.key)
	c.bytes -= len(e.key) + cap(e.val) + entryOverhead
	// Keep a small value buffer for reuse by the next insert into this slot.
	if cap(e.val) > 64 {
		e.val = nil
	}
	e.key, e.flags = "", 0
	c.free = append(c.free, i)
}

// over reports whether the cache is above its budget.
func (c *cache) over() bool { return c.bytes > c.budget }

// sortDirty orders the dirty list by (bucket, key), so that a flush writes
// bbolt pages in order.
func (c *cache) sortDirty() {
	slices.SortFunc(c.dirty, func(a, b int32) int {
		ea, eb := &c.entries[a], &c.entries[b]
		if ea.bucket != eb.bucket {
			if ea.bucket < eb.bucket {
				return -1
			}
			return 1
		}
		return bytes.Compare(unsafeBytes(ea.key), unsafeBytes(eb.key))
	})
}

// evict removes clean entries with CLOCK until the cache is at most target
// bytes, never removing entry keep (-1 for none). Dirty entries are skipped,
// so flush first to make room.
func (c *cache) evict(target int, keep int32) {
	n := len(c.entries)
	for scanned := 0; c.bytes > target && scanned < 2*n; scanned++ {
		if c.hand >= n {
			c.hand = 0
		}
		i := int32(c.hand)
		c.hand++
		e := &c.entries[i]
		if e.flags&flagUsed == 0 || e.flags&flagDirty != 0 || i == keep {
			continue
		}
		if e.flags&flagRef != 0 {
			e.flags &^= flagRef
			continue
		}
		c.remove(i)
	}
}

// clear drops every entry.
func (c *cache) clear() {
	*c = cache{budget: c.budget, changes: c.changes}
}
