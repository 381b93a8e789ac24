package state

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// Snapshot implements Backend without writing the cache back: the view is a
// bbolt read transaction (everything flushed before the barrier) overlaid
// with a copy of the cache's dirty entries (everything written since), which
// together are exactly the state as of this call. At the barrier it costs a
// pass over the changed entries (the whole cache after the change set
// overflowed) that clears their change flags, and a copy of the entries the
// snapshot needs (for an incremental one, the changed entries still cached;
// for a full one, the dirty entries). Sorting and reading happen later
// in Entries, from the transaction and the copy, while the Backend goes on;
// the dirty entries are written back by the cache's normal eviction, so a
// barrier never waits for bbolt commits.
func (s *Bolt) Snapshot(full bool) (Snapshot, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.closed {
		return nil, ErrClosed
	}
	keys, overflow := s.changes.take()
	full = full || overflow
	s.snapSeq++
	bufs := s.spare.Swap(nil)
	if bufs == nil {
		bufs = new(snapBufs)
	}
	snap := &boltSnapshot{full: full, names: s.buckets.names, keys: keys, open: &s.snapshots, spare: &s.spare, bufs: bufs,
		tagged: s.opts.ColdReads}
	if full && s.cold != nil {
		// The files under the working file are part of the state a full
		// snapshot writes.
		s.cold.Retain()
		snap.cold, snap.coldKeep = s.cold, s.coldKeepFunc()
	}
	c := s.cache
	// Incremental: copy every changed entry still cached, dirty or not, so
	// that Entries reads bbolt only for changed keys evicted since. Full:
	// copy the dirty entries, the only ones bbolt does not hold yet.
	from, flag := c.changed, flagChanged
	if full {
		from, flag = c.dirty, flagDirty
	}
	size := 0
	for _, i := range from {
		if e := &c.entries[i]; e.flags&flagUsed != 0 && e.flags&flag != 0 {
			size += len(e.key) + len(e.val)
		}
	}
	arena, overlay := bufs.arena[:0], bufs.overlay[:0]
	if cap(arena) < size {
		arena = make([]byte, 0, size) // the overlay's slices point into it: never regrown below
	}
	for _, i := range from {
		e := &c.entries[i]
		if e.flags&flagUsed == 0 || e.flags&flag == 0 {
			continue
		}
		start := len(arena)
		arena = append(arena, e.key...)
		arena = append(arena, e.val...)
		overlay = append(overlay, overlayEntry{
			bucket: e.bucket,
			key:    arena[start : start+len(e.key) : start+len(e.key)],
			val:    arena[start+len(e.key) : len(arena) : len(arena)],
			absent: e.flags&flagAbsent != 0,
		})
		if !full {
			e.flags &^= flagChanged // a repeat of i in the list is skipped
		}
	}
	bufs.arena, bufs.overlay = arena, overlay
	snap.overlay, snap.arena = overlay, arena
	s.clearChanged(overflow)
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("state: snapshot: begin read: %w", err)
	}
	snap.tx = tx
	s.snapshots.Add(1)
	return snap, nil
}

// clearChanged ends the cache's part of the change set at a snapshot: the
// changed flags are cleared (on every entry if the change set overflowed,
// as it stopped listing them), and deletions the snapshot has recorded
// leave the cache when bbolt needs nothing more of them: written back
// already (Flush lets unchanged ones go itself), or of keys bbolt does not
// hold (a window opened and fired between two write-backs; a blind Put
// leaves that unknown, so it is looked up here, once per deletion). So the
// cache holds live state, not the keys of fired windows and popped timers.
func (s *Bolt) clearChanged(overflow bool) {
	c := s.cache
	dropped := false
	clear1 := func(i int32) {
		e := &c.entries[i]
		if e.flags&flagUsed == 0 {
			return
		}
		e.flags &^= flagChanged
		if e.flags&flagAbsent == 0 {
			return
		}
		if s.opts.ColdReads && e.flags&flagDirty != 0 {
			if !s.nothingUnder(e) {
				// The checkpoint files may hold the key: the deletion
				// stays until they answer for it or it is written back.
				return
			}
			e.flags &^= flagDirty // nothing holds the key: nothing to delete
			dropped = true
			c.remove(i)
			return
		}
		if e.flags&(flagDirty|flagKnown) == flagDirty {
			_, ok, err := s.read(e.bucket, unsafeBytes(e.key))
			if err != nil {
				return // Flush will look again
			}
			e.flags |= flagKnown
			if ok {
				e.flags |= flagOnDisk
			}
		}
		switch {
		case e.flags&flagDirty == 0:
		case e.flags&(flagKnown|flagOnDisk) == flagKnown:
			e.flags &^= flagDirty
			dropped = true
		default:
			return // a deletion still to write back
		}
		c.remove(i)
	}
	if overflow {
		for i := range c.entries {
			clear1(int32(i))
		}
	} else {
		for _, i := range c.changed {
			clear1(i)
		}
	}
	c.changed = c.changed[:0]
	if dropped {
		c.dirty = slices.DeleteFunc(c.dirty, func(i int32) bool { return c.entries[i].flags&flagDirty == 0 })
	}
}

// overlayEntry is a cache entry as of the snapshot: it overrides what the
// snapshot's bbolt transaction holds for its key.
type overlayEntry struct {
	bucket   Bucket
	key, val []byte
	absent   bool // deleted (or never written): overrides bbolt with no entry
}

// bucketChanges are, for one bucket, the overlay entries sorted by key and,
// for an incremental snapshot, the changed keys missing from the overlay,
// sorted (sortedChanges, for Memory, fills keys instead).
type bucketChanges struct {
	name    string
	keys    []string
	overlay []overlayEntry
	evicted []string
}

type boltSnapshot struct {
	tx *bolt.Tx
	// Cold reads: the working file's values are tagged, and a full
	// snapshot merges in the checkpoint files (retained until Close),
	// entries coldKeep refuses left out.
	tagged   bool
	cold     Cold
	coldKeep func(name string, key []byte) bool
	open     *atomic.Int32 // the Bolt's count of open snapshots
	full     bool
	names    []string // bucket names by Bucket, as of the snapshot

	// Captured at the barrier, ordered on first use by prepare.
	keys    []map[string]struct{} // changed keys evicted from the cache, by Bucket (incremental)
	overlay []overlayEntry
	arena   []byte // the overlay's keys and values

	once    sync.Once
	buckets []bucketChanges // by bucket name

	bufs  *snapBufs                 // the memory of overlay, arena and buckets
	spare *atomic.Pointer[snapBufs] // where Close hands bufs back to the Bolt
}

// snapBufs are a snapshot's buffers. Close hands them back to the Bolt for
// the next Snapshot, so checkpoints of about the same size allocate no
// buffers; a snapshot using less than a quarter of larger ones lets them
// go, so one large checkpoint does not pin its memory.
type snapBufs struct {
	arena   []byte
	overlay []overlayEntry
	buckets []bucketChanges
	evicted []string
	order   []Bucket
	rank    []int
}

// prepare orders the capture: buckets by name, keys within each. A full
// snapshot covers every bucket of the transaction or the overlay. An
// incremental one covers the changed keys: mostly the overlay (they were
// cached at the barrier), plus those evicted since they changed, which only
// the transaction holds. It sorts the overlay in place and slices it by
// bucket.
func (sn *boltSnapshot) prepare() {
	b := sn.bufs
	b.order, b.rank = b.order[:0], b.rank[:0]
	for i := range sn.names {
		b.order = append(b.order, Bucket(i))
		b.rank = append(b.rank, 0)
	}
	slices.SortFunc(b.order, func(x, y Bucket) int { return strings.Compare(sn.names[x], sn.names[y]) })
	for r, bk := range b.order {
		b.rank[bk] = r
	}
	slices.SortFunc(sn.overlay, func(x, y overlayEntry) int {
		if x.bucket != y.bucket {
			return b.rank[x.bucket] - b.rank[y.bucket]
		}
		return bytes.Compare(x.key, y.key)
	})
	b.buckets, b.evicted = b.buckets[:0], b.evicted[:0]
	o := 0
	for _, bk := range b.order {
		bc := bucketChanges{name: sn.names[bk]}
		start := o
		for o < len(sn.overlay) && sn.overlay[o].bucket == bk {
			o++
		}
		bc.overlay = sn.overlay[start:o]
		if !sn.full && int(bk) < len(sn.keys) {
			from := len(b.evicted)
			for k := range sn.keys[bk] {
				if _, found := slices.BinarySearchFunc(bc.overlay, k, func(oe overlayEntry, k string) int {
					return bytes.Compare(oe.key, unsafeBytes(k))
				}); !found {
					b.evicted = append(b.evicted, k)
				}
			}
			bc.evicted = b.evicted[from:len(b.evicted):len(b.evicted)]
			slices.Sort(bc.evicted)
		}
		if len(bc.overlay) > 0 || len(bc.evicted) > 0 || sn.full && (sn.cold != nil || sn.tx.Bucket([]byte(bc.name)) != nil) {
			b.buckets = append(b.buckets, bc)
		}
	}
	sn.keys = nil
	sn.buckets = b.buckets
}

// sortedChanges orders a change set by (bucket name, key).
func sortedChanges(names []string, keys []map[string]struct{}) []bucketChanges {
	var out []bucketChanges
	for b, m := range keys {
		if len(m) == 0 {
			continue
		}
		bc := bucketChanges{name: names[b], keys: make([]string, 0, len(m))}
		for k := range m {
			bc.keys = append(bc.keys, k)
		}
		slices.Sort(bc.keys)
		out = append(out, bc)
	}
	slices.SortFunc(out, func(a, b bucketChanges) int { return bytes.Compare([]byte(a.name), []byte(b.name)) })
	return out
}

func (sn *boltSnapshot) Incremental() bool { return !sn.full }

func (sn *boltSnapshot) Entries(fn func(bucket, key, value []byte, deleted bool) error) error {
	if sn.tx == nil {
		return ErrClosed
	}
	sn.once.Do(sn.prepare)
	for _, bc := range sn.buckets {
		name := []byte(bc.name)
		var cur *bolt.Cursor
		if bk := sn.tx.Bucket(name); bk != nil {
			cur = bk.Cursor()
		}
		var err error
		switch {
		case sn.full && sn.tagged:
			err = sn.fullColdEntries(name, cur, bc.overlay, fn)
		case sn.full:
			err = fullEntries(name, cur, bc.overlay, fn)
		default:
			err = changedEntries(name, cur, bc, sn.tagged, fn)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fullEntries merges the bucket's entries in the transaction with the
// overlay, which wins on equal keys.
func fullEntries(name []byte, cur *bolt.Cursor, overlay []overlayEntry, fn func(bucket, key, value []byte, deleted bool) error) error {
	var k, v []byte
	if cur != nil {
		k, v = cur.First()
	}
	o := 0
	for k != nil || o < len(overlay) {
		c := 1 // which comes first: -1 the transaction, 1 the overlay, 0 both
		switch {
		case k == nil:
		case o == len(overlay):
			c = -1
		default:
			c = bytes.Compare(k, overlay[o].key)
		}
		if c < 0 {
			if err := fn(name, k, v, false); err != nil {
				return err
			}
			k, v = cur.Next()
			continue
		}
		if oe := &overlay[o]; !oe.absent {
			if err := fn(name, oe.key, oe.val, false); err != nil {
				return err
			}
		}
		o++
		if c == 0 {
			k, v = cur.Next()
		}
	}
	return nil
}

// changedEntries yields the bucket's changed keys in order, merging the
// overlay (keys cached at the barrier) with the evicted keys, read from the
// transaction; an evicted key the transaction lacks is a deletion.
func changedEntries(name []byte, cur *bolt.Cursor, bc bucketChanges, tagged bool, fn func(bucket, key, value []byte, deleted bool) error) error {
	o, e := 0, 0
	for o < len(bc.overlay) || e < len(bc.evicted) {
		var err error
		if e == len(bc.evicted) || (o < len(bc.overlay) && bytes.Compare(bc.overlay[o].key, unsafeBytes(bc.evicted[e])) < 0) {
			oe := &bc.overlay[o]
			o++
			if oe.absent {
				err = fn(name, oe.key, nil, true)
			} else {
				err = fn(name, oe.key, oe.val, false)
			}
		} else {
			key := unsafeBytes(bc.evicted[e])
			e++
			var k, v []byte
			if cur != nil {
				k, v = cur.Seek(key)
			}
			live := k != nil && bytes.Equal(k, key)
			if live && tagged {
				if v, live, err = untag(v); err != nil {
					return err
				}
			}
			if live {
				err = fn(name, key, v, false)
			} else {
				err = fn(name, key, nil, true)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (sn *boltSnapshot) Close() error {
	if sn.tx == nil {
		return nil
	}
	err := sn.tx.Rollback()
	sn.tx = nil
	sn.open.Add(-1)
	if sn.cold != nil {
		sn.cold.Release()
		sn.cold = nil
	}
	if b := sn.bufs; cap(b.arena) <= 4*len(b.arena)+64<<10 && cap(b.overlay) <= 4*len(b.overlay)+1024 {
		clear(b.evicted) // the change set's keys: not ours to keep
		clear(b.buckets)
		sn.spare.Store(b)
	}
	sn.bufs, sn.overlay, sn.arena, sn.buckets = nil, nil, nil, nil
	if err != nil {
		return fmt.Errorf("state: snapshot close: %w", err)
	}
	return nil
}
