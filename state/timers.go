package state

import (
	"bytes"
	"fmt"
	"slices"
)

// TimerQueue is an ordered set of keys under a prefix of one bucket, popped
// smallest first: the timer store of an operator. Encode the time right
// after the prefix (AppendOrderedTime), so that byte order is time order and
// a million pending timers cost a million bbolt entries, not a heap in RAM.
//
// Pop reads ahead a batch of keys with one Backend.Scan (which flushes the
// write-back cache, so popping costs one commit per batch, not per timer) and
// merges them with the keys added since, in memory. It is exact: a key
// added or deleted while popping is seen.
//
// Add and Delete look a key up only when it is not above the largest key the
// queue may hold (hi): timers are mostly added at ever later times, so most
// adds cost one Put.
//
// A TimerQueue belongs to the goroutine that owns its Backend. After a
// Backend.Restore it recounts itself (it watches Backend.Generation).
type TimerQueue struct {
	be     Backend
	bucket Bucket
	prefix []byte
	n      int
	gen    uint64
	hi     []byte // no key above it is in the queue; meaningful while n > 0

	// Read-ahead: keys read from the store in order, from buf.
	buf       []byte
	ends      []int // key i is buf[ends[i-1]:ends[i]]
	pos       int   // next key of the read-ahead
	covered   []byte
	hasCover  bool     // every store key ≤ covered (at read time) was read
	exhausted bool     // and there were none after it
	added     [][]byte // keys added within the read range since, sorted
	spare     [][]byte // recycled key buffers
	popped    []byte
}

const (
	timerReadAhead = 512
	maxTimerAdded  = 4096 // then the read-ahead is dropped and read again
)

// NewTimerQueue returns the queue of the keys starting with prefix in bucket
// b of be, counting those already there.
func NewTimerQueue(be Backend, b Bucket, prefix []byte) (*TimerQueue, error) {
	q := &TimerQueue{be: be, bucket: b, prefix: bytes.Clone(prefix)}
	if err := q.recount(); err != nil {
		return nil, err
	}
	return q, nil
}

func (q *TimerQueue) recount() error {
	q.reset()
	q.gen = q.be.Generation()
	q.n = 0
	q.hi = q.hi[:0]
	return q.be.Scan(q.bucket, q.prefix, func(k, _ []byte) bool {
		if !bytes.HasPrefix(k, q.prefix) {
			return false
		}
		q.n++
		q.hi = append(q.hi[:0], k...) // keys come in order: the last is the largest
		return true
	})
}

func (q *TimerQueue) sync() error {
	if q.gen != q.be.Generation() {
		return q.recount()
	}
	return nil
}

// reset drops the read-ahead.
func (q *TimerQueue) reset() {
	q.buf, q.ends, q.pos = q.buf[:0], q.ends[:0], 0
	q.covered, q.hasCover, q.exhausted = q.covered[:0], false, false
	for _, k := range q.added {
		q.spare = append(q.spare, k[:0])
	}
	clear(q.added)
	q.added = q.added[:0]
}

// Len returns the number of keys in the queue.
func (q *TimerQueue) Len() int {
	if q.sync() != nil {
		return 0
	}
	return q.n
}

// Contains reports whether key is in the queue.
func (q *TimerQueue) Contains(key []byte) (bool, error) {
	if err := q.sync(); err != nil {
		return false, err
	}
	return q.contains(key)
}

func (q *TimerQueue) contains(key []byte) (bool, error) {
	if q.n == 0 || bytes.Compare(key, q.hi) > 0 {
		return false, nil
	}
	_, ok, err := q.be.Get(q.bucket, key)
	return ok, err
}

// Add inserts key (which must start with the prefix) and reports whether it
// was new.
func (q *TimerQueue) Add(key []byte) (bool, error) {
	if err := q.sync(); err != nil {
		return false, err
	}
	if ok, err := q.contains(key); ok || err != nil {
		return false, err
	}
	return true, q.insert(key)
}

// AddNew inserts key, which the caller knows is not in the queue (Contains
// said so, and nothing was added since): it saves Add's lookup.
func (q *TimerQueue) AddNew(key []byte) error {
	if err := q.sync(); err != nil {
		return err
	}
	return q.insert(key)
}

func (q *TimerQueue) insert(key []byte) error {
	if err := q.be.Put(q.bucket, key, nil); err != nil {
		return err
	}
	if q.n == 0 || bytes.Compare(key, q.hi) > 0 {
		q.hi = append(q.hi[:0], key...)
	}
	q.n++
	if q.hasCover && (q.exhausted || bytes.Compare(key, q.covered) <= 0) {
		// Within what was read ahead: a later read would skip it.
		if len(q.added) >= maxTimerAdded {
			q.reset()
			return nil
		}
		i, _ := slices.BinarySearchFunc(q.added, key, bytes.Compare)
		var k []byte
		if n := len(q.spare); n > 0 {
			k, q.spare = q.spare[n-1], q.spare[:n-1]
		}
		q.added = slices.Insert(q.added, i, append(k, key...))
	}
	return nil
}

// Delete removes key and reports whether it was there.
func (q *TimerQueue) Delete(key []byte) (bool, error) {
	if err := q.sync(); err != nil {
		return false, err
	}
	if ok, err := q.contains(key); !ok || err != nil {
		return false, err
	}
	if err := q.be.Delete(q.bucket, key); err != nil {
		return false, err
	}
	q.n--
	// A read-ahead or added copy is skipped by Pop's existence check.
	return true, nil
}

// DeleteKnown removes key, which the caller knows is in the queue: it saves
// Delete's lookup.
func (q *TimerQueue) DeleteKnown(key []byte) error {
	if err := q.sync(); err != nil {
		return err
	}
	if err := q.be.Delete(q.bucket, key); err != nil {
		return err
	}
	q.n--
	return nil
}

// Pop removes and returns the smallest key below the exclusive bound below
// (nil: no bound), or false if there is none. The key is valid until the next
// call on the queue.
func (q *TimerQueue) Pop(below []byte) ([]byte, bool, error) {
	if err := q.sync(); err != nil {
		return nil, false, err
	}
	for q.n > 0 {
		// The read-ahead's next live key.
		var head []byte
		for head == nil && q.pos < len(q.ends) {
			k := q.bufKey(q.pos)
			_, ok, err := q.be.Get(q.bucket, k)
			if err != nil {
				return nil, false, err
			}
			if ok {
				head = k
			} else {
				q.pos++
			}
		}
		if head == nil && !q.exhausted {
			if err := q.readAhead(); err != nil {
				return nil, false, err
			}
			continue
		}
		// The smallest live added key.
		var add []byte
		for add == nil && len(q.added) > 0 {
			_, ok, err := q.be.Get(q.bucket, q.added[0])
			if err != nil {
				return nil, false, err
			}
			if ok {
				add = q.added[0]
			} else {
				q.dropAdded()
			}
		}
		k, fromBuf := head, true
		if head == nil || (add != nil && bytes.Compare(add, head) < 0) {
			k, fromBuf = add, false
		}
		if k == nil || (below != nil && bytes.Compare(k, below) >= 0) {
			return nil, false, nil
		}
		q.popped = append(q.popped[:0], k...)
		if fromBuf {
			q.pos++
		} else {
			q.dropAdded()
		}
		if err := q.be.Delete(q.bucket, q.popped); err != nil {
			return nil, false, err
		}
		q.n--
		return q.popped, true, nil
	}
	return nil, false, nil
}

func (q *TimerQueue) dropAdded() {
	q.spare = append(q.spare, q.added[0][:0])
	q.added[0] = nil
	q.added = q.added[1:]
	if len(q.added) == 0 {
		q.added = q.added[:0:0] // let the backing array shrink back to reuse
	}
}

func (q *TimerQueue) bufKey(i int) []byte {
	lo := 0
	if i > 0 {
		lo = q.ends[i-1]
	}
	return q.buf[lo:q.ends[i]]
}

// readAhead reads the next keys after covered from the store.
func (q *TimerQueue) readAhead() error {
	from := q.prefix
	var after []byte
	if q.hasCover {
		after = q.covered
		from = append(append([]byte(nil), q.covered...), 0) // the successor of covered
	}
	q.buf, q.ends, q.pos = q.buf[:0], q.ends[:0], 0
	err := q.be.Scan(q.bucket, from, func(k, _ []byte) bool {
		if !bytes.HasPrefix(k, q.prefix) {
			return false
		}
		if after != nil && bytes.Compare(k, after) <= 0 {
			return true
		}
		q.buf = append(q.buf, k...)
		q.ends = append(q.ends, len(q.buf))
		return len(q.ends) < timerReadAhead
	})
	if err != nil {
		return err
	}
	q.hasCover = true
	if len(q.ends) < timerReadAhead {
		q.exhausted = true
	}
	if len(q.ends) > 0 {
		q.covered = append(q.covered[:0], q.bufKey(len(q.ends)-1)...)
	}
	return nil
}

// AppendOrderedTime appends t as 8 bytes, big-endian with the sign bit
// flipped, so that bytes.Compare orders times numerically (negative ones
// first).
func AppendOrderedTime(dst []byte, t int64) []byte {
	u := uint64(t) ^ (1 << 63)
	return append(dst, byte(u>>56), byte(u>>48), byte(u>>40), byte(u>>32), byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
}

// OrderedTime decodes the first 8 bytes of b written by AppendOrderedTime.
func OrderedTime(b []byte) (int64, error) {
	if len(b) < 8 {
		return 0, fmt.Errorf("%w: time of %d bytes", ErrCorrupt, len(b))
	}
	u := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 | uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	return int64(u ^ (1 << 63)), nil
}
