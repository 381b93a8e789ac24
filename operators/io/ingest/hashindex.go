package ingest

import (
	"math/bits"
	"slices"
)

// indexBlockLen is how many hashes one block of a hashIndex holds (512 KiB):
// the unit in which the index grows, is bounded and shrinks.
const indexBlockLen = 1 << 16

// DefaultIndexMax is DedupOptions.IndexMax's default: 393,216 entries (six
// blocks), 3 MiB of hashes outside the Go heap. It is six times the 65,536
// entries an earlier, window-only filter remembered, and 1.8 times the
// largest block of redeliveries seen from a broker (mosquitto re-sending
// 217,000 already logged messages after a reconnect, with its CPU
// saturated), while the agent stays within its 40 MiB budget at 10,000
// readings/s: eight blocks (4 MiB) took its peak RSS from 36.6 to 39.6 MiB.
const DefaultIndexMax = 6 * indexBlockLen

// IndexBytesPerMillion is the memory the redelivery index takes per million
// entries: one 64-bit hash each (plus the last block's unused part).
const IndexBytesPerMillion = 8 << 20

// hashIndex holds a 64-bit hash of each of the log's newest entries, at
// most max of them (a multiple of indexBlockLen), in blocks of
// indexBlockLen covering consecutive offsets; a full index lets its oldest
// block go when the next one is needed. Adding appends to the newest block: a block is sorted only when
// a lookup needs it (a burst of redeliveries), so the steady stream pays
// one store per entry. A block's hashes live outside the Go heap where the
// platform allows (an anonymous mapping): the GC neither scans them nor
// doubles them into its heap goal.
type hashIndex struct {
	max    int
	blocks []*hashBlock // oldest first; the last one takes new entries
	n      int          // hashes held
	spare  *hashBlock   // a dropped block, kept for the next one needed
	tmp    []uint64     // merge buffer of sortBlock
}

type hashBlock struct {
	h      []uint64 // cap indexBlockLen
	first  uint64   // offset of the entry of h[0]
	sorted int      // h[:sorted] is in ascending order
	mem    []byte   // the mapping behind h; nil on the heap
}

func (x *hashIndex) add(h, off uint64) {
	var b *hashBlock
	if k := len(x.blocks); k > 0 {
		b = x.blocks[k-1]
	}
	if b == nil || len(b.h) == cap(b.h) {
		if x.n >= x.max && len(x.blocks) > 0 {
			x.dropOldest() // first, so the new block reuses its memory
		}
		b = x.newBlock(off)
	}
	b.h = append(b.h, h) // within its capacity: no allocation
	x.n++
}

func (x *hashIndex) newBlock(first uint64) *hashBlock {
	b := x.spare
	x.spare = nil
	if b == nil {
		b = &hashBlock{}
		b.h, b.mem = mapHashes(indexBlockLen)
	}
	b.h, b.first, b.sorted = b.h[:0], first, 0
	x.blocks = append(x.blocks, b)
	return b
}

func (x *hashIndex) dropOldest() {
	b := x.blocks[0]
	x.n -= len(b.h)
	x.blocks[0] = nil
	x.blocks = x.blocks[1:]
	if x.spare == nil {
		x.spare = b
	} else {
		unmapHashes(b.mem)
	}
}

// truncate drops the blocks whose entries all lie below offset below.
func (x *hashIndex) truncate(below uint64) {
	for len(x.blocks) > 1 && x.blocks[1].first <= below {
		x.dropOldest()
	}
}

// reset drops everything, releasing the memory.
func (x *hashIndex) reset() {
	for _, b := range x.blocks {
		unmapHashes(b.mem)
	}
	if x.spare != nil {
		unmapHashes(x.spare.mem)
	}
	*x = hashIndex{max: x.max}
}

// oldest is the offset of the oldest entry indexed, 0 when empty.
func (x *hashIndex) oldest() uint64 {
	if len(x.blocks) == 0 {
		return 0
	}
	return x.blocks[0].first
}

// bytes is the memory the blocks reserve (touched only as they fill).
func (x *hashIndex) bytes() int64 {
	n := len(x.blocks)
	if x.spare != nil {
		n++
	}
	return int64(n) * indexBlockLen * 8
}

// contains reports whether an entry with hash h is indexed, sorting the
// blocks that are not yet.
func (x *hashIndex) contains(h uint64) bool {
	for _, b := range x.blocks {
		x.sortBlock(b)
		if searchSorted(b.h, h) {
			return true
		}
	}
	return false
}

// sortBlock sorts b's hashes. A short unsorted tail (what a burst appends
// between lookups) is sorted alone and merged in from the back, in one pass
// over the block.
func (x *hashIndex) sortBlock(b *hashBlock) {
	n := len(b.h)
	tail := n - b.sorted
	if tail == 0 {
		return
	}
	if tail > 4096 || tail > b.sorted {
		slices.Sort(b.h)
		b.sorted = n
		return
	}
	x.tmp = append(x.tmp[:0], b.h[b.sorted:]...)
	t := x.tmp
	slices.Sort(t)
	i, j := b.sorted-1, len(t)-1
	for k := n - 1; j >= 0; k-- {
		if i >= 0 && b.h[i] > t[j] {
			b.h[k] = b.h[i]
			i--
		} else {
			b.h[k] = t[j]
			j--
		}
	}
	b.sorted = n
}

// searchSorted reports whether h is in a, sorted. Hashes are uniform, so
// h's position is close to h/2^64 of the way in (within a few times √n):
// the binary search starts on that stretch and widens only if h lies
// outside it.
func searchSorted(a []uint64, h uint64) bool {
	n := len(a)
	if n == 0 {
		return false
	}
	g, _ := bits.Mul64(h, uint64(n))
	w := 4*bits.Len(uint(n))*bits.Len(uint(n)) + 64 // > 4√n for n ≤ 2^16
	lo, hi := max(int(g)-w, 0), min(int(g)+w, n)
	switch {
	case a[lo] > h:
		lo, hi = 0, lo
	case a[hi-1] < h:
		lo, hi = hi, n
	}
	_, found := slices.BinarySearch(a[lo:hi], h)
	return found
}
