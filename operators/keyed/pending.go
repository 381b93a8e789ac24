package keyed

import (
	"math"
	"unsafe"
)

// pending is the in-memory front of the ordering buffer: the buffered
// readings' storage keys (time | seq | key group | key, see
// appendBufferKey), smallest (time, seq) first, with their payloads while
// they are in memory. An entry is written to the backend only when a
// checkpoint needs it (Operator.Flush) or memory runs short (then its
// payload leaves memory); a reading released before either never touches
// the backend. It is rebuilt from the backend after a restore.
//
// Readings mostly arrive close to time order, so most entries go to one of
// a few runs: FIFOs each in (time, seq) order, where an entry is appended
// when it is not smaller than the run's tail and popped from the head, both
// O(1). Only a reading smaller than every run's tail (a straggler) goes to
// a binary min-heap. A pop takes the smallest of the run heads and the heap
// top, so the release order is exactly (time, seq) whatever the disorder.
// The entries' keys live in one arena: no allocation per reading once the
// arena, runs and heap have grown; popped keys stay in the arena until it
// is compacted (when it holds more than twice the live bytes) or emptied
// (when the buffer is).
type pending struct {
	runs [pendingRuns]pendingRun
	// heads are the runs' smallest entries, by run; noEntry for an empty
	// run: the scan for the smallest reads one small array.
	heads [pendingRuns]pendingOrder
	// tails are the runs' largest entries, largest first (runOf names the
	// run); an empty run last with tail minEntry. Putting a reading on the
	// first run whose tail is not above it (the largest such tail, which
	// keeps the smaller tails for the readings behind it) keeps that order.
	tails [pendingRuns]pendingOrder
	runOf [pendingRuns]uint8
	heap  []pendingEntry
	n     int // entries in the runs and the heap
	arena []byte
	spare []byte // the previous arena, reused by the next compaction
	live  int    // bytes of the arena the entries use
}

// pendingRuns is the number of runs. Uniform jitter of d time units over
// readings r apart needs about d/(6r) runs to keep the stragglers out of
// the heap: readings 1 ms apart with up to 50 ms of jitter send 81% of
// them to the heap with one run, 31% with 4, 0.1% with 8. A pop compares
// every run's head, so many more runs would cost more than the heap saves.
const pendingRuns = 8

// pendingOrder is an entry's place in the release order.
type pendingOrder struct {
	time int64
	seq  uint64
}

func (a pendingOrder) less(b pendingOrder) bool {
	return a.time < b.time || (a.time == b.time && a.seq < b.seq)
}

var (
	noEntry  = pendingOrder{math.MaxInt64, math.MaxUint64} // after every entry
	minEntry = pendingOrder{math.MinInt64, 0}              // not after any entry
)

// pendingRun is a FIFO of entries in (time, seq) order: e[head:] are live.
type pendingRun struct {
	e    []pendingEntry
	head int
}

type pendingEntry struct {
	time   int64
	seq    uint64
	hash   uint64 // of the reading's key (state.Clock.Hash)
	off    int    // the key, then the payload, in the arena
	n      int    // key bytes
	pn     int    // payload bytes; -1: not in memory (read it from the backend)
	stored bool   // written to the backend
}

func (e *pendingEntry) less(o *pendingEntry) bool {
	return e.time < o.time || (e.time == o.time && e.seq < o.seq)
}

func (p *pending) len() int { return p.n }

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
	if p.n == 0 && p.runOf == [pendingRuns]uint8{} {
		p.init()
	}
	p.n++
	o := pendingOrder{t, seq}
	for j := range p.tails {
		if !o.less(p.tails[j]) {
			i := p.runOf[j]
			r := &p.runs[i]
			if r.head == len(r.e) {
				p.heads[i] = o
			}
			r.append(e)
			p.tails[j] = o
			return
		}
	}
	// Sift up with a hole: each level moves one entry, not two.
	p.heap = append(p.heap, e)
	i := len(p.heap) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !e.less(&p.heap[parent]) {
			break
		}
		p.heap[i] = p.heap[parent]
		i = parent
	}
	p.heap[i] = e
}

// init sets up the empty runs; the zero pending is empty too.
func (p *pending) init() {
	for i := range p.runs {
		p.heads[i], p.tails[i], p.runOf[i] = noEntry, minEntry, uint8(i)
	}
}

func (r *pendingRun) append(e pendingEntry) {
	if r.head == len(r.e) {
		r.e, r.head = r.e[:0], 0
	} else if len(r.e) == cap(r.e) && r.head >= len(r.e)/2 {
		// Reuse the popped half rather than grow.
		r.e = r.e[:copy(r.e, r.e[r.head:])]
		r.head = 0
	}
	r.e = append(r.e, e)
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

// min returns the smallest entry: the run it heads (-1: the heap's top),
// nil when the buffer is empty.
func (p *pending) min() (*pendingEntry, int) {
	if p.n == 0 {
		return nil, -1
	}
	from := 0
	for i := 1; i < len(p.heads); i++ {
		if p.heads[i].less(p.heads[from]) {
			from = i
		}
	}
	if len(p.heap) > 0 && (p.heads[from] == noEntry || p.heap[0].less(&p.runs[from].e[p.runs[from].head])) {
		return &p.heap[0], -1
	}
	r := &p.runs[from]
	return &r.e[r.head], from
}

// take removes the smallest entry, which min found in from.
func (p *pending) take(from int) pendingEntry {
	var e pendingEntry
	if from >= 0 {
		r := &p.runs[from]
		e = r.e[r.head]
		r.head++
		if r.head < len(r.e) {
			p.heads[from] = pendingOrder{r.e[r.head].time, r.e[r.head].seq}
		} else {
			p.emptied(from)
		}
	} else {
		e = p.popHeap()
	}
	p.live -= e.size()
	p.n--
	if p.n == 0 {
		p.arena, p.live = p.arena[:0], 0 // e's bytes stay readable until the next push
	}
	return e
}

// pop removes the smallest entry and returns it; its key and payload stay
// readable until the next push.
func (p *pending) pop() pendingEntry {
	_, from := p.min()
	return p.take(from)
}

// emptied moves run i, now empty, to the end of the tails.
func (p *pending) emptied(i int) {
	p.heads[i] = noEntry
	j := 0
	for int(p.runOf[j]) != i {
		j++
	}
	copy(p.tails[j:], p.tails[j+1:])
	copy(p.runOf[j:], p.runOf[j+1:])
	p.tails[len(p.tails)-1], p.runOf[len(p.runOf)-1] = minEntry, uint8(i)
}

func (p *pending) popHeap() pendingEntry {
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
			if r := m + 1; r < last && p.heap[r].less(&p.heap[m]) {
				m = r
			}
			if !p.heap[m].less(&x) {
				break
			}
			p.heap[i] = p.heap[m]
			i = m
		}
		p.heap[i] = x
	}
	return e
}

// popUpTo appends to dst, smallest first, the entries of time ≤ t, at
// most n of them, removing them; their keys and payloads stay readable
// until the next push.
func (p *pending) popUpTo(t int64, dst []pendingEntry, n int) []pendingEntry {
	for len(dst) < n {
		m, from := p.min()
		if m == nil || m.time > t {
			break
		}
		dst = append(dst, p.take(from))
	}
	return dst
}

// each calls f on every entry, in no particular order, until f fails.
func (p *pending) each(f func(e *pendingEntry) error) error {
	for i := range p.runs {
		r := &p.runs[i]
		for j := r.head; j < len(r.e); j++ {
			if err := f(&r.e[j]); err != nil {
				return err
			}
		}
	}
	for i := range p.heap {
		if err := f(&p.heap[i]); err != nil {
			return err
		}
	}
	return nil
}

// dropPayloads forgets the payloads of stored entries (memory ran short);
// the next compaction reclaims them.
func (p *pending) dropPayloads() {
	p.each(func(e *pendingEntry) error {
		if e.stored && e.pn >= 0 {
			p.live -= e.pn
			e.pn = -1
		}
		return nil
	})
}

// compact copies the live keys into a fresh arena.
func (p *pending) compact() {
	arena := p.spare[:0]
	p.each(func(e *pendingEntry) error {
		off := len(arena)
		arena = append(arena, p.arena[e.off:e.off+e.size()]...)
		e.off = off
		return nil
	})
	p.arena, p.spare = arena, p.arena
}

// memoryBytes is what the index holds: its arenas, runs and heap.
func (p *pending) memoryBytes() int {
	n := cap(p.heap)
	for i := range p.runs {
		n += cap(p.runs[i].e)
	}
	return cap(p.arena) + cap(p.spare) + n*int(unsafe.Sizeof(pendingEntry{}))
}

// reset empties the index.
func (p *pending) reset() {
	for i := range p.runs {
		p.runs[i].e, p.runs[i].head = p.runs[i].e[:0], 0
	}
	p.init()
	p.heap, p.n, p.arena, p.live = p.heap[:0], 0, p.arena[:0], 0
}
