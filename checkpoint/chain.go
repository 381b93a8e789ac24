package checkpoint

import (
	"bytes"
	"container/heap"
	"slices"
	"sync/atomic"
)

// Chain is an immutable list of Tables, newest first: increments, then the
// base they apply to, read as the state they amount to (a later file's
// entry for a key wins, a tombstone deletes it). It implements state's
// Cold interface.
//
// Get tries the tables newest first and stops at the first that holds the
// key; each table's Bloom filter makes one that does not cost a cache line
// and no read. Scan merges the tables' scans.
//
// A Chain holds a reference to each of its tables and has reference
// counts of its own: Release drops the holder's, and the last one releases
// the tables. Get keeps its value in the Chain's own block cache, so Get
// must not be called concurrently on one Chain; Scan, Entries and
// Retain/Release may run concurrently with anything. Two Chains sharing
// tables (With, Rebase) are independent readers.
type Chain struct {
	tables  []*Table // newest first
	entries int
	refs    atomic.Int32
	cache   blockCache // Get's
}

// NewChain returns a Chain of tables given newest first (the base last),
// holding one reference. It takes over the caller's reference to each
// table: releasing the Chain releases them.
func NewChain(tables ...*Table) *Chain {
	c := &Chain{tables: append([]*Table(nil), tables...)}
	for _, t := range c.tables {
		c.entries += int(t.Entries())
	}
	c.refs.Store(1)
	return c
}

// With returns a new Chain of newer followed by c's tables. It takes over
// the caller's reference to newer and retains c's tables; c is unchanged
// and still needs its own Release.
func (c *Chain) With(newer *Table) *Chain {
	for _, t := range c.tables {
		t.Retain()
	}
	return NewChain(append([]*Table{newer}, c.tables...)...)
}

// Rebase returns a new Chain that starts over from base (typically a merge
// of c's files, MergeChain): base followed by those of c's tables whose
// checkpoint is newer than base's (written while the merge ran). It takes
// over the caller's reference to base and retains the tables it keeps; c
// is unchanged and still needs its own Release.
func (c *Chain) Rebase(base *Table) *Chain {
	var newer []*Table
	for _, t := range c.tables {
		if t.Header().CheckpointID > base.Header().CheckpointID {
			t.Retain()
			newer = append(newer, t)
		}
	}
	return NewChain(append(newer, base)...)
}

// MayHold reports whether a file of the chain may hold an entry (a value
// or a tombstone) for key in bucket: false is certain, true may be a
// Bloom filter's false positive. It reads nothing and is safe for
// concurrent use.
func (c *Chain) MayHold(bucket string, key []byte) bool {
	h, b := keyHash(bucket, key), stringBytes(bucket)
	for _, t := range c.tables {
		if t.ix.filter.mayContain(h) && t.ix.search(b, key) >= 0 {
			return true
		}
	}
	return false
}

// Buckets names the buckets the files hold entries of, sorted.
func (c *Chain) Buckets() []string {
	var out []string
	for _, t := range c.tables {
		for _, b := range t.Buckets() {
			if i, found := slices.BinarySearch(out, b); !found {
				out = slices.Insert(out, i, b)
			}
		}
	}
	return out
}

// Tables returns the chain's tables, newest first. The slice must not be
// modified; the tables are valid while the caller holds the Chain.
func (c *Chain) Tables() []*Table { return c.tables }

// Entries counts the entries of the files, tombstones included: an upper
// bound on the live keys.
func (c *Chain) Entries() int { return c.entries }

// IndexBytes returns the memory the tables' indexes hold.
func (c *Chain) IndexBytes() int {
	n := 0
	for _, t := range c.tables {
		n += t.IndexBytes()
	}
	return n
}

// Retain adds a reference, for a reader (a snapshot) that keeps the Chain
// after its owner has moved on to another.
func (c *Chain) Retain() {
	if c.refs.Add(1) <= 1 {
		panic("checkpoint: Retain of a released Chain")
	}
}

// Release drops a reference; the last one releases the tables, closing the
// files no other Chain holds.
func (c *Chain) Release() {
	switch n := c.refs.Add(-1); {
	case n == 0:
		for _, t := range c.tables {
			c.cache.forget(t)
			t.Release()
		}
	case n < 0:
		panic("checkpoint: Chain released more often than retained")
	}
}

// Get returns the newest value of key in bucket; ok is false if no file
// holds it or the newest entry is a tombstone. The value is valid until the
// next call to Get. A damaged block gives an error matching ErrCorrupt.
// Get allocates nothing once its cache buffers have grown.
func (c *Chain) Get(bucket string, key []byte) (value []byte, ok bool, err error) {
	h, b := keyHash(bucket, key), stringBytes(bucket)
	for _, t := range c.tables {
		v, deleted, found, err := t.get(h, b, key, &c.cache)
		if err != nil || found {
			return v, found && !deleted, err
		}
	}
	return nil, false, nil
}

// Scan calls fn for the live entries of bucket with key ≥ from, in
// bytes.Compare order, with the newest version of each key and tombstones
// hidden, until fn returns false. fn's slices are valid only during the
// call. It merges the tables' scans, holding one block per table.
func (c *Chain) Scan(bucket string, from []byte, fn func(key, value []byte) bool) error {
	b := stringBytes(bucket)
	m := &chainMerge{all: make([]chainHead, len(c.tables))}
	defer m.close()
	for i, t := range c.tables {
		m.all[i] = chainHead{index: i, it: t.scan(b, from)}
		if err := m.push(&m.all[i]); err != nil {
			return err
		}
	}
	for len(m.heads) > 0 {
		// The newest table holding the smallest key wins (it is on top:
		// Less puts newer first on equal keys); the others skip it.
		winner := m.heads[0]
		for len(m.heads) > 0 && bytes.Equal(m.heads[0].it.key, winner.it.key) {
			m.popped = append(m.popped, heap.Pop(m).(*chainHead))
		}
		if !winner.it.deleted && !fn(winner.it.key, winner.it.value) {
			return nil
		}
		for _, h := range m.popped {
			if err := m.push(h); err != nil {
				return err
			}
		}
		m.popped = m.popped[:0]
	}
	return nil
}

// chainHead is one table's scan in a merge; index is its place in the
// chain (smaller is newer).
type chainHead struct {
	index int
	it    *tableIter
}

// chainMerge is a min-heap of the tables' current entries by key, newer
// tables first on equal keys.
type chainMerge struct {
	heads  []*chainHead
	popped []*chainHead
	all    []chainHead
}

func (m *chainMerge) Len() int { return len(m.heads) }
func (m *chainMerge) Less(i, j int) bool {
	a, b := m.heads[i], m.heads[j]
	if c := bytes.Compare(a.it.key, b.it.key); c != 0 {
		return c < 0
	}
	return a.index < b.index
}
func (m *chainMerge) Swap(i, j int) { m.heads[i], m.heads[j] = m.heads[j], m.heads[i] }
func (m *chainMerge) Push(x any)    { m.heads = append(m.heads, x.(*chainHead)) }
func (m *chainMerge) Pop() any {
	h := m.heads[len(m.heads)-1]
	m.heads = m.heads[:len(m.heads)-1]
	return h
}

// push advances h's scan and puts it back on the heap unless it has ended.
func (m *chainMerge) push(h *chainHead) error {
	more, err := h.it.next()
	if more {
		heap.Push(m, h)
	}
	return err
}

func (m *chainMerge) close() {
	for _, h := range m.all {
		if h.it != nil {
			h.it.close()
		}
	}
}
