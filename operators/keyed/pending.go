package keyed

// pending is the in-memory front of the ordering buffer: the buffered
// readings' storage keys (time | seq | key group | key, see
// appendBufferKey), smallest (time, seq) first, with their payloads while
// they are in memory. An entry is written to the backend only when a
// checkpoint needs it (Operator.Flush) or memory runs short (then its
// payload leaves memory); a reading released before either never touches
// the backend. It is rebuilt from the backend after a restore.
//
// A binary min-heap of entries whose keys live in one arena: no
// allocation per reading once the arena and heap have grown; popped keys
// stay in the arena until it is compacted (when it holds more than twice
// the live bytes) or emptied (when the heap is).
type pending struct {
	heap  []pendingEntry
	arena []byte
	spare []byte // the previous arena, reused by the next compaction
	live  int    // bytes of the arena the heap's entries use
}

type pendingEntry struct {
	time   int64
	seq    uint64
	hash   uint64 // of the reading's key (keyIndex.hash)
	off    int    // the key, then the payload, in the arena
	n      int    // key bytes
	pn     int    // payload bytes; -1: not in memory (read it from the backend)
	stored bool   // written to the backend
}

func (e pendingEntry) less(o pendingEntry) bool {
	return e.time < o.time || (e.time == o.time && e.seq < o.seq)
}

func (p *pending) len() int { return len(p.heap) }

// push adds the buffer key k of a reading of time t and sequence seq, whose
// key hashes to h, with its payload (nil and stored for an entry read back
// from the backend).
func (p *pending) push(t int64, seq uint64, h uint64, k, payload []byte, stored bool) {
	if len(p.arena) > 2*p.live+64<<10 {
		p.compact()
	}
	e := pendingEntry{time: t, seq: seq, hash: h, off: len(p.arena), n: len(k), pn: len(payload), stored: stored}
	if payload == nil {
		e.pn = -1
	}
	p.arena = append(p.arena, k...)
	p.arena = append(p.arena, payload...)
	p.live += e.size()
	// Sift up with a hole: each level moves one entry, not two.
	p.heap = append(p.heap, e)
	i := len(p.heap) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !e.less(p.heap[parent]) {
			break
		}
		p.heap[i] = p.heap[parent]
		i = parent
	}
	p.heap[i] = e
}

func (e *pendingEntry) size() int { return e.n + max(e.pn, 0) }

func (p *pending) key(e *pendingEntry) []byte { return p.arena[e.off : e.off+e.n : e.off+e.n] }

// payload returns e's payload, or nil when it is not in memory.
func (p *pending) payload(e *pendingEntry) []byte {
	if e.pn < 0 {
		return nil
	}
	s := e.off + e.n
	return p.arena[s : s+e.pn : s+e.pn]
}

// pop removes the smallest entry and returns it; its key and payload stay
// readable until the next push.
func (p *pending) pop() pendingEntry {
	e := p.heap[0]
	last := len(p.heap) - 1
	x := p.heap[last]
	p.heap = p.heap[:last]
	if last > 0 {
		// Sift the last entry down from the root with a hole.
		i := 0
		for {
			m := 2*i + 1
			if m >= last {
				break
			}
			if r := m + 1; r < last && p.heap[r].less(p.heap[m]) {
				m = r
			}
			if !p.heap[m].less(x) {
				break
			}
			p.heap[i] = p.heap[m]
			i = m
		}
		p.heap[i] = x
	}
	p.live -= e.size()
	if len(p.heap) == 0 {
		p.arena, p.live = p.arena[:0], 0 // e's bytes stay readable until the next push
	}
	return e
}

// popUpTo appends to dst, smallest first, the entries of time ≤ t, at
// most n of them, removing them; their keys and payloads stay readable
// until the next push.
func (p *pending) popUpTo(t int64, dst []pendingEntry, n int) []pendingEntry {
	for len(dst) < n && len(p.heap) > 0 && p.heap[0].time <= t {
		dst = append(dst, p.pop())
	}
	return dst
}

// dropPayloads forgets the payloads of stored entries (memory ran short);
// the next compaction reclaims them.
func (p *pending) dropPayloads() {
	for i := range p.heap {
		e := &p.heap[i]
		if e.stored && e.pn >= 0 {
			p.live -= e.pn
			e.pn = -1
		}
	}
}

// compact copies the live keys into a fresh arena.
func (p *pending) compact() {
	arena := p.spare[:0]
	for i := range p.heap {
		e := &p.heap[i]
		off := len(arena)
		arena = append(arena, p.arena[e.off:e.off+e.size()]...)
		e.off = off
	}
	p.arena, p.spare = arena, p.arena
}

// reset empties the index.
func (p *pending) reset() { p.heap, p.arena, p.live = p.heap[:0], p.arena[:0], 0 }
