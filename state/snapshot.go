package state

import (
	"bytes"
	"fmt"
	"slices"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// Snapshot implements Backend: flush, capture the change set, open a bbolt
// read transaction. The cost at the barrier is the flush plus clearing the
// cache's change flags; the entries are read later, from the transaction,
// while the Backend goes on.
func (s *Bolt) Snapshot(full bool) (Snapshot, error) {
	if err := s.Flush(); err != nil {
		return nil, err
	}
	keys, overflow := s.changes.take()
	for i := range s.cache.entries {
		s.cache.entries[i].flags &^= flagChanged
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("state: snapshot: begin read: %w", err)
	}
	s.snapshots.Add(1)
	snap := &boltSnapshot{tx: tx, full: full || overflow, open: &s.snapshots}
	if !snap.full {
		snap.changes = sortedChanges(s.buckets.names, keys)
	}
	return snap, nil
}

// bucketChanges are the changed keys of one bucket, sorted.
type bucketChanges struct {
	name string
	keys []string
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

type boltSnapshot struct {
	tx      *bolt.Tx
	open    *atomic.Int32 // the Bolt's count of open snapshots
	full    bool
	changes []bucketChanges
}

func (sn *boltSnapshot) Incremental() bool { return !sn.full }

func (sn *boltSnapshot) Entries(fn func(bucket, key, value []byte, deleted bool) error) error {
	if sn.tx == nil {
		return ErrClosed
	}
	if sn.full {
		return sn.tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			cur := bk.Cursor()
			for k, v := cur.First(); k != nil; k, v = cur.Next() {
				if err := fn(name, k, v, false); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for _, bc := range sn.changes {
		name := []byte(bc.name)
		bk := sn.tx.Bucket(name)
		var cur *bolt.Cursor
		if bk != nil {
			cur = bk.Cursor()
		}
		for _, ks := range bc.keys {
			key := unsafeBytes(ks)
			var v []byte
			found := false
			if cur != nil {
				var k []byte
				k, v = cur.Seek(key)
				found = k != nil && bytes.Equal(k, key)
			}
			var err error
			if found {
				err = fn(name, key, v, false)
			} else {
				err = fn(name, key, nil, true)
			}
			if err != nil {
				return err
			}
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
