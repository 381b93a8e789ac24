package window

import (
	"bytes"
	"slices"
)

// timerID names a timer of one domain apart from its time: the key's record
// (K, a pointer owned by the store) and the window.
type timerID[K comparable] struct {
	k K
	w Window
}

type timerKey[K comparable] struct {
	t  int64
	id timerID[K]
}

// timerQueue holds the timers of one domain in memory: the set of timers
// (set), a bucket per distinct time listing the timers added at that time,
// and a min-heap of those times (a time is in the heap iff it has a bucket).
// remove only removes from the set; a bucket may thus hold stale or repeated
// entries, which popping skips by checking the set. Bucket slots and their
// slices are recycled, so a steady state allocates nothing.
//
// Timers come out ordered by (time, key bytes, window start, window end):
// the order of the encoded timer keys of statekey.go, so a queue can be
// merged with timers kept in a state.Backend. keyOf gives a record's key
// bytes.
type timerQueue[K comparable] struct {
	keyOf func(K) []byte
	set   map[timerKey[K]]bool // a mark per timer, for the owner's use

	byTime  map[int64]int32 // time → index into buckets
	buckets []timerBucket[K]
	free    []int32 // unused bucket slots
	times   timeHeap

	// The bucket being popped, copied and sorted into drain.
	draining bool
	drainAt  int64
	drain    []drainEntry[K]
	drainPos int
	drainLCP int // the length of the key prefix common to the bucket's keys
}

type timerBucket[K comparable] struct {
	ids []timerID[K]
}

func newTimerQueue[K comparable](keyOf func(K) []byte) timerQueue[K] {
	return timerQueue[K]{keyOf: keyOf, set: make(map[timerKey[K]]bool), byTime: make(map[int64]int32)}
}

func (q *timerQueue[K]) len() int { return len(q.set) }

func (q *timerQueue[K]) has(t int64, id timerID[K]) bool {
	_, ok := q.set[timerKey[K]{t, id}]
	return ok
}

// add registers the timer, unmarked, and reports whether it was new.
func (q *timerQueue[K]) add(t int64, id timerID[K]) bool {
	n := len(q.set)
	k := timerKey[K]{t, id}
	if q.set[k] {
		return false // there and marked: keep the mark
	}
	q.set[k] = false
	if len(q.set) == n {
		return false // already registered
	}
	if q.draining && t == q.drainAt {
		q.insertDrain(id)
		return true
	}
	slot, ok := q.byTime[t]
	if !ok {
		if n := len(q.free); n > 0 {
			slot = q.free[n-1]
			q.free = q.free[:n-1]
		} else {
			slot = int32(len(q.buckets))
			q.buckets = append(q.buckets, timerBucket[K]{})
		}
		q.byTime[t] = slot
		q.times.push(t)
	}
	b := &q.buckets[slot]
	b.ids = append(b.ids, id)
	return true
}

// remove unregisters the timer and reports whether it was there, and its
// mark.
func (q *timerQueue[K]) remove(t int64, id timerID[K]) (ok, marked bool) {
	k := timerKey[K]{t, id}
	if marked, ok = q.set[k]; ok {
		delete(q.set, k)
	}
	return ok, marked
}

// pop removes and returns the earliest timer with time ≤ upTo.
func (q *timerQueue[K]) pop(upTo int64) (timerID[K], int64, bool) {
	id, t, ok := q.peek(upTo)
	if ok {
		q.take()
	}
	return id, t, ok
}

// peek returns the earliest timer with time ≤ upTo without removing it;
// take removes it, if no other call came between.
func (q *timerQueue[K]) peek(upTo int64) (timerID[K], int64, bool) {
	for {
		if q.draining {
			if q.times[0] < q.drainAt {
				// A timer was added below the time being drained: put the
				// rest back into its bucket and drain the earlier time first.
				b := &q.buckets[q.byTime[q.drainAt]]
				for _, e := range q.drain[q.drainPos:] {
					b.ids = append(b.ids, e.id)
				}
				q.draining = false
				continue
			}
			for q.drainPos < len(q.drain) {
				id := q.drain[q.drainPos].id
				if q.drainAt > upTo {
					return timerID[K]{}, 0, false
				}
				if q.has(q.drainAt, id) {
					return id, q.drainAt, true
				}
				q.drainPos++
			}
			slot := q.byTime[q.drainAt]
			if len(q.buckets[slot].ids) > 0 {
				q.startDrain(slot) // timers added to this time while draining
				continue
			}
			q.draining = false
			q.dropBucket(q.drainAt)
			continue
		}
		if len(q.times) == 0 || q.times[0] > upTo {
			return timerID[K]{}, 0, false
		}
		q.drainAt, q.draining = q.times[0], true
		q.startDrain(q.byTime[q.drainAt])
	}
}

// take removes the timer peek returned and returns its mark.
func (q *timerQueue[K]) take() bool {
	k := timerKey[K]{q.drainAt, q.drain[q.drainPos].id}
	marked := q.set[k]
	delete(q.set, k)
	q.drainPos++
	return marked
}

// reset empties the queue, keeping its memory.
func (q *timerQueue[K]) reset() {
	clear(q.set)
	clear(q.byTime)
	for i := range q.buckets {
		clear(q.buckets[i].ids)
		q.buckets[i].ids = q.buckets[i].ids[:0]
	}
	q.free = q.free[:0]
	for i := len(q.buckets) - 1; i >= 0; i-- {
		q.free = append(q.free, int32(i))
	}
	q.times = q.times[:0]
	q.draining = false
	clear(q.drain)
	q.drain, q.drainPos = q.drain[:0], 0
}

// startDrain moves the bucket's timers into drain, sorted by (key, window).
// Each entry carries its key and 8 distinguishing key bytes, so the sort
// compares mostly integers in one array instead of chasing a pointer per
// comparison (a tumbling bucket holds one timer per key).
func (q *timerQueue[K]) startDrain(slot int32) {
	b := &q.buckets[slot]
	// Keys often share a long prefix ("device-…"): take the 8 bytes after
	// the prefix common to all keys of the bucket.
	lcp := 0
	if len(b.ids) > 0 {
		first := q.keyOf(b.ids[0].k)
		lcp = len(first)
		for _, id := range b.ids[1:] {
			k := q.keyOf(id.k)
			n := min(lcp, len(k))
			i := 0
			for i < n && k[i] == first[i] {
				i++
			}
			lcp = i
		}
	}
	q.drain = q.drain[:0]
	for _, id := range b.ids {
		q.drain = append(q.drain, q.drainEntry(id, lcp))
	}
	clear(b.ids)
	b.ids = b.ids[:0]
	slices.SortFunc(q.drain, compareDrain[K])
	q.drainPos, q.drainLCP = 0, lcp
}

func (q *timerQueue[K]) drainEntry(id timerID[K], lcp int) drainEntry[K] {
	k := q.keyOf(id.k)
	return drainEntry[K]{prefix: keyPrefix(k[min(lcp, len(k)):]), key: k, id: id}
}

// insertDrain adds a timer of the time being drained in its place among the
// entries not popped yet, so the order holds for timers added while popping.
func (q *timerQueue[K]) insertDrain(id timerID[K]) {
	// Its key may not share the prefix the entries were keyed on: key them
	// again without it.
	rest := q.drain[q.drainPos:]
	if q.drainLCP > 0 {
		k := q.keyOf(id.k)
		first := q.keyOf(q.drain[0].id.k)
		if len(k) < q.drainLCP || !bytes.Equal(k[:q.drainLCP], first[:q.drainLCP]) {
			for i := range rest {
				rest[i].prefix = keyPrefix(rest[i].key)
			}
			q.drainLCP = 0
		}
	}
	e := q.drainEntry(id, q.drainLCP)
	i, _ := slices.BinarySearchFunc(rest, e, compareDrain[K])
	q.drain = slices.Insert(q.drain, q.drainPos+i, e)
}

// compareDrain orders timers of one time by (key bytes, window start, window
// end).
func compareDrain[K comparable](a, b drainEntry[K]) int {
	if a.prefix != b.prefix {
		if a.prefix < b.prefix {
			return -1
		}
		return 1
	}
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c
	}
	if a.id.w.Start != b.id.w.Start {
		if a.id.w.Start < b.id.w.Start {
			return -1
		}
		return 1
	}
	switch {
	case a.id.w.End < b.id.w.End:
		return -1
	case a.id.w.End > b.id.w.End:
		return 1
	}
	return 0
}

// drainEntry is a timer being popped with its sort key.
type drainEntry[K comparable] struct {
	prefix uint64 // 8 key bytes after the bucket's common prefix, big-endian, zero-padded: orders as bytes.Compare where it differs
	key    []byte
	id     timerID[K]
}

func keyPrefix(k []byte) uint64 {
	var p uint64
	for i := range 8 {
		p <<= 8
		if i < len(k) {
			p |= uint64(k[i])
		}
	}
	return p
}

// dropBucket removes the (empty) bucket of t and t from the heap.
func (q *timerQueue[K]) dropBucket(t int64) {
	q.times.remove(t)
	slot := q.byTime[t]
	delete(q.byTime, t)
	q.free = append(q.free, slot)
}

// timeHeap is a binary min-heap of distinct timer times. (container/heap
// would box every pushed int64.)
type timeHeap []int64

func (h *timeHeap) push(t int64) {
	*h = append(*h, t)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p] <= a[i] {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

// remove deletes t (usually the minimum; a time added below a bucket being
// drained is the only other case).
func (h *timeHeap) remove(t int64) {
	a := *h
	i := 0
	if a[0] != t {
		i = slices.Index(a, t)
		if i < 0 {
			panic("window: timer heap lost a time")
		}
	}
	last := len(a) - 1
	a[i] = a[last]
	a = a[:last]
	*h = a
	if i == last {
		return
	}
	// Restore the heap at i: up, then down.
	for i > 0 && a[(i-1)/2] > a[i] {
		p := (i - 1) / 2
		a[p], a[i] = a[i], a[p]
		i = p
	}
	for {
		l, m := 2*i+1, i
		if l < len(a) && a[l] < a[m] {
			m = l
		}
		if r := l + 1; r < len(a) && a[r] < a[m] {
			m = r
		}
		if m == i {
			return
		}
		a[m], a[i] = a[i], a[m]
		i = m
	}
}
