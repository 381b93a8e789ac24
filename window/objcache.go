package window

import (
	"github.com/eddy-edge/eddy/window/aggregate"
)

// objCache holds decoded window states of recently used keys for StateStore,
// so a reading of a live window folds into objects instead of decoding and
// re-encoding the window's bytes. It is pure memory bookkeeping: StateStore
// decides what to read from and write back to the backend.
//
// Layout: one objKey per resident key (found without allocating through
// map[string]int32 indexed by string(key)), holding the key's resident
// windows in a small slice scanned linearly. Keys are evicted whole, chosen
// by the CLOCK algorithm, when the approximate memory exceeds the budget.
// Accumulator slices of deleted windows are kept (and charged) for reuse,
// so a steady state of windows opening and closing does not allocate.
type objCache struct {
	index  map[string]int32 // key → keys index
	keys   []objKey
	free   []int32 // unused keys slots
	listed []int32 // slots with a dirty window (objKey.listed), in no order
	hand   int     // CLOCK hand

	nAccs   int
	sketchy bool // some func keeps a sketch: window sizes change as it grows

	spare  [][]aggregate.Acc // accumulators of deleted windows, for reuse
	bytes  int               // approximate memory held, spares included
	budget int
}

type objKey struct {
	kg     uint16
	key    []byte // the index key's bytes; kept (for reuse) in a free slot
	wins   []objWin
	used   bool // the slot holds a key
	ref    bool // CLOCK reference bit
	dirty  bool // some window, or the merging set, is dirty
	listed bool // the slot is in objCache.listed

	// The key's merging set (sessions), when setKnown; else only the
	// backend knows it. setDirty: it differs from the backend.
	set                []Window
	setKnown, setDirty bool
	setBytes           int // memory charged for set
}

type objWin struct {
	w      Window
	st     WindowState
	bytes  int  // memory charged for st
	dirty  bool // differs from the backend
	stored bool // the backend holds a version of w (maybe an older one)
}

// Memory charged besides keys' and accumulators' bytes: an objKey with its
// map entry, and an objWin.
const (
	objKeyOverhead = 160
	objWinOverhead = 96
	accBytes       = 40 // unsafe.Sizeof(aggregate.Acc{})
	setWindowBytes = 16 // unsafe.Sizeof(Window{})
)

func newObjCache(budget int, funcs []aggregate.Func) objCache {
	c := objCache{index: make(map[string]int32), nAccs: len(funcs), budget: budget}
	for _, f := range funcs {
		c.sketchy = c.sketchy || f.UsesSketch()
	}
	return c
}

// lookup returns the slot of key, or -1.
func (c *objCache) lookup(key []byte) int32 {
	i, ok := c.index[string(key)]
	if !ok {
		return -1
	}
	return i
}

// admit makes key resident (it must not be) and returns its slot.
func (c *objCache) admit(kg uint16, key []byte) int32 {
	var i int32
	if n := len(c.free); n > 0 {
		i = c.free[n-1]
		c.free = c.free[:n-1]
	} else {
		i = int32(len(c.keys))
		c.keys = append(c.keys, objKey{})
	}
	k := &c.keys[i]
	k.kg, k.key = kg, append(k.key[:0], key...)
	k.used, k.ref = true, true
	c.index[string(k.key)] = i
	c.bytes += objKeyOverhead + 2*len(key)
	return i
}

// find returns the index of w among k's windows, or -1.
func (k *objKey) find(w Window) int {
	return k.findFrom(w, 0)
}

// findNear is find trying the neighbours of index i first. Windows are
// created in ascending order; a reading's windows come latest start first,
// so the next is usually the one before i, and a key's timers pop in
// ascending order, so the next is then the one after i.
func (k *objKey) findNear(w Window, i int) int {
	if i > 0 && i <= len(k.wins) && k.wins[i-1].w == w {
		return i - 1
	}
	return k.findFrom(w, i+1)
}

// findFrom is find trying index hint first.
func (k *objKey) findFrom(w Window, hint int) int {
	if hint >= 0 && hint < len(k.wins) && k.wins[hint].w == w {
		return hint
	}
	for i := range k.wins {
		if k.wins[i].w == w {
			return i
		}
	}
	return -1
}

// addWin appends window w to the key in slot with empty accumulators and
// returns it.
func (c *objCache) addWin(slot int32, w Window) *objWin {
	var accs []aggregate.Acc
	if n := len(c.spare); n > 0 {
		accs = c.spare[n-1]
		c.spare[n-1] = nil
		c.spare = c.spare[:n-1]
		c.bytes -= c.accsBytes(accs)
		for i := range accs {
			accs[i].Reset()
		}
	} else {
		accs = make([]aggregate.Acc, c.nAccs)
	}
	k := &c.keys[slot]
	k.wins = append(k.wins, objWin{w: w, st: WindowState{NextEarly: NoTimer, Accs: accs}})
	ow := &k.wins[len(k.wins)-1]
	c.charge(ow)
	return ow
}

// charge updates the memory charged for ow (a sketch may have grown).
func (c *objCache) charge(ow *objWin) {
	n := objWinOverhead + c.accsBytes(ow.st.Accs)
	c.bytes += n - ow.bytes
	ow.bytes = n
}

func (c *objCache) accsBytes(accs []aggregate.Acc) int {
	n := accBytes * len(accs)
	if c.sketchy {
		for i := range accs {
			if s := accs[i].Sketch; s != nil {
				n += s.MemBytes()
			}
		}
	}
	return n
}

// markDirty records that window i of the key in slot differs from the
// backend.
func (c *objCache) markDirty(slot int32, i int) {
	k := &c.keys[slot]
	k.wins[i].dirty = true
	k.dirty = true
	if !k.listed {
		k.listed = true
		c.listed = append(c.listed, slot)
	}
}

// putSet makes ws the cached merging set of the key in slot; dirty says it
// differs from the backend.
func (c *objCache) putSet(slot int32, ws []Window, dirty bool) {
	k := &c.keys[slot]
	k.set = append(k.set[:0], ws...)
	k.setKnown = true
	c.bytes -= k.setBytes
	k.setBytes = setWindowBytes * cap(k.set)
	c.bytes += k.setBytes
	if dirty {
		k.setDirty, k.dirty = true, true
		if !k.listed {
			k.listed = true
			c.listed = append(c.listed, slot)
		}
	}
}

// removeWin deletes window i of the key in slot, keeping its accumulators
// for reuse.
func (c *objCache) removeWin(slot int32, i int) {
	k := &c.keys[slot]
	ow := &k.wins[i]
	c.bytes -= ow.bytes - c.accsBytes(ow.st.Accs) // the accumulators stay, as a spare
	c.spare = append(c.spare, ow.st.Accs)
	last := len(k.wins) - 1
	k.wins[i] = k.wins[last]
	k.wins[last] = objWin{}
	k.wins = k.wins[:last]
}

// dropSpare releases one spare accumulator slice; false if there is none.
func (c *objCache) dropSpare() bool {
	n := len(c.spare)
	if n == 0 {
		return false
	}
	c.bytes -= c.accsBytes(c.spare[n-1])
	c.spare[n-1] = nil
	c.spare = c.spare[:n-1]
	return true
}

// step moves the CLOCK hand by one resident key other than skip: it clears
// the key's reference bit, or, if the key was not used since the hand last
// passed, returns its slot for eviction.
func (c *objCache) step(skip int32) (int32, bool) {
	if len(c.index) == 0 || len(c.index) == 1 && skip >= 0 {
		return -1, false
	}
	for {
		if c.hand >= len(c.keys) {
			c.hand = 0
		}
		i := int32(c.hand)
		k := &c.keys[i]
		c.hand++
		if !k.used || i == skip {
			continue
		}
		if k.ref {
			k.ref = false
			return -1, false
		}
		return i, true
	}
}

// drop forgets the key in slot and its windows (the caller wrote back what
// had to be written).
func (c *objCache) drop(slot int32) {
	k := &c.keys[slot]
	for i := range k.wins {
		c.bytes -= k.wins[i].bytes
	}
	clear(k.wins)
	k.wins = k.wins[:0]
	k.set, k.setKnown, k.setDirty = k.set[:0], false, false
	c.bytes -= k.setBytes
	k.setBytes = 0
	delete(c.index, string(k.key))
	c.bytes -= objKeyOverhead + 2*len(k.key)
	k.used, k.ref, k.dirty = false, false, false // listed stays: the slot is still in c.listed
	c.free = append(c.free, slot)
}

// reset forgets everything (after a Backend.Restore).
func (c *objCache) reset() {
	for i := range c.keys {
		if c.keys[i].used {
			c.drop(int32(i))
		}
		c.keys[i].listed = false
	}
	c.listed = c.listed[:0]
	for c.dropSpare() {
	}
	c.hand = 0
}
