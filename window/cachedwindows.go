package window

import (
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window/aggregate"
)

// objCache holds decoded window states of recently used keys for StateStore,
// so a reading of a live window folds into objects instead of decoding and
// re-encoding the window's bytes. It is pure memory bookkeeping: StateStore
// decides what to read from and write back to the backend.
//
// Layout: a state.Clock keeps the resident keys (found without allocating),
// evicted whole by CLOCK when the approximate memory exceeds the budget;
// each holds its resident windows in a small slice scanned linearly.
// Accumulator slices of deleted windows are kept (and charged, to no key)
// for reuse, so a steady state of windows opening and closing does not
// allocate.
type objCache struct {
	*state.Clock[objKey]

	nAccs   int
	sketchy bool // some func keeps a sketch: window sizes change as it grows

	spare [][]aggregate.Acc // accumulators of deleted windows, for reuse
}

// objKey is what the cache keeps of a resident key besides the key itself.
// Its slot in the Clock is charged its windows' bytes and its merging set's.
type objKey struct {
	kg   uint16
	wins []objWin

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

// Memory charged besides accumulators' bytes: an objWin, an accumulator
// and a merging set's window.
const (
	objWinOverhead = 96
	accBytes       = 40 // unsafe.Sizeof(aggregate.Acc{})
	setWindowBytes = 16 // unsafe.Sizeof(Window{})
)

func newObjCache(budget int, funcs []aggregate.Func) objCache {
	c := objCache{Clock: state.NewClock[objKey](budget), nAccs: len(funcs)}
	for _, f := range funcs {
		c.sketchy = c.sketchy || f.UsesSketch()
	}
	return c
}

// admit makes key, whose hash is h, resident (it must not be) and returns
// its slot.
func (c *objCache) admit(h uint64, kg uint16, key []byte) int32 {
	slot := c.Admit(h, key, 0)
	c.Val(slot).kg = kg // drop left the rest empty
	return slot
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
		c.AddShared(-c.accsBytes(accs))
		for i := range accs {
			accs[i].Reset()
		}
	} else {
		accs = make([]aggregate.Acc, c.nAccs)
	}
	k := c.Val(slot)
	k.wins = append(k.wins, objWin{w: w, st: WindowState{NextEarly: NoTimer, Accs: accs}})
	ow := &k.wins[len(k.wins)-1]
	c.charge(slot, ow)
	return ow
}

// charge updates the memory charged for ow, a window of the key in slot (a
// sketch may have grown).
func (c *objCache) charge(slot int32, ow *objWin) {
	n := objWinOverhead + c.accsBytes(ow.st.Accs)
	c.AddSlotBytes(slot, n-ow.bytes)
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
	c.Val(slot).wins[i].dirty = true
	c.MarkDirty(slot)
}

// putSet makes ws the cached merging set of the key in slot; dirty says it
// differs from the backend.
func (c *objCache) putSet(slot int32, ws []Window, dirty bool) {
	k := c.Val(slot)
	k.set = append(k.set[:0], ws...)
	k.setKnown = true
	n := setWindowBytes * cap(k.set)
	c.AddSlotBytes(slot, n-k.setBytes)
	k.setBytes = n
	if dirty {
		k.setDirty = true
		c.MarkDirty(slot)
	}
}

// removeWin deletes window i of the key in slot, keeping its accumulators
// for reuse.
func (c *objCache) removeWin(slot int32, i int) {
	k := c.Val(slot)
	ow := &k.wins[i]
	accs := c.accsBytes(ow.st.Accs)
	c.AddSlotBytes(slot, -ow.bytes)
	c.AddShared(accs) // the accumulators stay, as a spare
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
	c.AddShared(-c.accsBytes(c.spare[n-1]))
	c.spare[n-1] = nil
	c.spare = c.spare[:n-1]
	return true
}

// drop forgets the key in slot and its windows (the caller wrote back what
// had to be written).
func (c *objCache) drop(slot int32) {
	k := c.Val(slot)
	clear(k.wins)
	k.wins = k.wins[:0]
	k.set, k.setKnown, k.setDirty, k.setBytes = k.set[:0], false, false, 0
	c.Drop(slot) // its charge goes, the windows' and the set's with it
}

// reset forgets everything (after a Backend.Restore).
func (c *objCache) reset() {
	for i := range c.Slots() {
		if c.Resident(int32(i)) {
			c.drop(int32(i))
		}
	}
	c.Reset()
	for c.dropSpare() {
	}
}
