package state

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// Snapshot implements Backend without writing the cache back: the view is a
// bbolt read transaction (everything flushed before the barrier) overlaid
// with a copy of the cache's dirty entries (everything written since), which
// together are exactly the state as of this call. At the barrier it costs a
// pass over the cache that clears its change flags and copies the entries
// the snapshot needs from it (for an incremental one, the changed entries
// still cached; for a full one, the dirty entries). Sorting and reading happen later
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
	snap := &boltSnapshot{full: full, names: s.buckets.names, keys: keys, open: &s.snapshots}
	c := s.cache
	// Incremental: copy every changed entry still cached, dirty or not, so
	// that Entries reads bbolt only for changed keys evicted since. Full:
	// copy the dirty entries, the only ones bbolt does not hold yet.
	copyIf := func(e *entry) bool { return e.flags&flagChanged != 0 }
	if full {
		copyIf = func(e *entry) bool { return e.flags&flagDirty != 0 }
	}
	size, n := 0, 0
	for i := range c.entries {
		if e := &c.entries[i]; e.flags&flagUsed != 0 && copyIf(e) {
			size += len(e.key) + len(e.val)
			n++
		}
	}
	snap.arena = make([]byte, 0, size)
	snap.overlay = make([]overlayEntry, 0, n)
	for i := range c.entries {
		e := &c.entries[i]
		if e.flags&flagUsed != 0 && copyIf(e) {
			start := len(snap.arena)
			snap.arena = append(snap.arena, e.key...)
			snap.arena = append(snap.arena, e.val...)
			snap.overlay = append(snap.overlay, overlayEntry{
				bucket: e.bucket,
				key:    snap.arena[start : start+len(e.key) : start+len(e.key)],
				val:    snap.arena[start+len(e.key) : len(snap.arena) : len(snap.arena)],
				absent: e.flags&flagAbsent != 0,
			})
		}
		e.flags &^= flagChanged
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("state: snapshot: begin read: %w", err)
	}
	snap.tx = tx
	s.snapshots.Add(1)
	return snap, nil
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
	tx    *bolt.Tx
	open  *atomic.Int32 // the Bolt's count of open snapshots
	full  bool
	names []string // bucket names by Bucket, as of the snapshot

	// Captured at the barrier, ordered on first use by prepare.
	keys    []map[string]struct{} // changed keys by Bucket (incremental)
	overlay []overlayEntry
	arena   []byte // the overlay's keys and values

	once    sync.Once
	buckets []bucketChanges // by bucket name
}

// prepare orders the capture: buckets by name, keys within each. A full
// snapshot covers every bucket of the transaction or the overlay. An
// incremental one covers the changed keys: mostly the overlay (they were
// cached at the barrier), plus those evicted since they changed, which only
// the transaction holds.
func (sn *boltSnapshot) prepare() {
	byName := map[string]*bucketChanges{}
	get := func(name string) *bucketChanges {
		bc := byName[name]
		if bc == nil {
			bc = &bucketChanges{name: name}
			byName[name] = bc
		}
		return bc
	}
	if sn.full {
		_ = sn.tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			get(string(name))
			return nil
		})
	}
	for _, oe := range sn.overlay {
		bc := get(sn.names[oe.bucket])
		bc.overlay = append(bc.overlay, oe)
	}
	for _, bc := range byName {
		slices.SortFunc(bc.overlay, func(x, y overlayEntry) int { return bytes.Compare(x.key, y.key) })
	}
	if !sn.full {
		for b, m := range sn.keys {
			if len(m) == 0 {
				continue
			}
			bc := get(sn.names[b])
			if len(bc.overlay) == len(m) {
				continue // every changed key was cached: the overlay is the change set
			}
			for k := range m {
				if _, found := slices.BinarySearchFunc(bc.overlay, k, func(oe overlayEntry, k string) int {
					return bytes.Compare(oe.key, unsafeBytes(k))
				}); !found {
					bc.evicted = append(bc.evicted, k)
				}
			}
			slices.Sort(bc.evicted)
		}
	}
	sn.keys, sn.overlay = nil, nil
	for _, bc := range byName {
		sn.buckets = append(sn.buckets, *bc)
	}
	slices.SortFunc(sn.buckets, func(a, b bucketChanges) int { return bytes.Compare([]byte(a.name), []byte(b.name)) })
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
		if sn.full {
			err = fullEntries(name, cur, bc.overlay, fn)
		} else {
			err = changedEntries(name, cur, bc, fn)
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
func changedEntries(name []byte, cur *bolt.Cursor, bc bucketChanges, fn func(bucket, key, value []byte, deleted bool) error) error {
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
			if k != nil && bytes.Equal(k, key) {
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
	if err != nil {
		return fmt.Errorf("state: snapshot close: %w", err)
	}
	return nil
}
