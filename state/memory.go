package state

import (
	"bytes"
	"fmt"
	"slices"
)

// Memory is the in-memory Backend (backend = "memory"): the same semantics
// as Bolt, without a file or a size bound. A Snapshot copies what it will
// yield at the barrier (every entry when full, the changed ones otherwise),
// so the copy costs memory and time proportional to that. Not safe for
// concurrent use, except for the Snapshots it returns.
type Memory struct {
	buckets bucketRegistry
	data    []memBucket // by Bucket
	changes *changeSet
	keys    int
	bytes   int64 // keys and values held, for Usage
	gen     uint64
	closed  bool
}

type memBucket struct {
	m        map[string][]byte
	sorted   []string // keys in order; may hold deleted keys, skipped by Scan
	unsorted []string // keys added since sorted was last merged
}

// NewMemory returns an empty in-memory backend with the default change
// limits.
func NewMemory() *Memory {
	return NewMemoryWithLimits(ChangeLimits{})
}

// NewMemoryWithLimits returns an empty in-memory backend with the given
// change-tracking bounds.
func NewMemoryWithLimits(l ChangeLimits) *Memory {
	return &Memory{buckets: newBucketRegistry(), changes: newChangeSet(l)}
}

// Bucket implements Backend.
func (s *Memory) Bucket(name string, keyGroupOf KeyGroupFunc) (Bucket, error) {
	if s.closed {
		return 0, ErrClosed
	}
	b, err := s.buckets.register(name, keyGroupOf)
	if err != nil {
		return 0, err
	}
	s.bucket(b)
	return b, nil
}

func (s *Memory) bucket(b Bucket) *memBucket {
	for int(b) >= len(s.data) {
		s.data = append(s.data, memBucket{m: make(map[string][]byte)})
	}
	return &s.data[b]
}

// Get implements Backend.
func (s *Memory) Get(b Bucket, key []byte) ([]byte, bool, error) {
	if s.closed {
		return nil, false, ErrClosed
	}
	if int(b) >= len(s.data) {
		return nil, false, nil
	}
	v, ok := s.data[b].m[string(key)]
	return v, ok, nil
}

// Put implements Backend.
func (s *Memory) Put(b Bucket, key, value []byte) error {
	if s.closed {
		return ErrClosed
	}
	mb := s.bucket(b)
	old, ok := mb.m[string(key)]
	if ok {
		mb.m[string(key)] = append(old[:0], value...)
		s.bytes += int64(len(value) - len(old))
	} else {
		k := string(key)
		mb.m[k] = append(make([]byte, 0, len(value)), value...)
		mb.unsorted = append(mb.unsorted, k)
		s.keys++
		s.bytes += int64(len(key) + len(value))
	}
	s.changes.add(b, key, s.keys)
	return nil
}

// Delete implements Backend.
func (s *Memory) Delete(b Bucket, key []byte) error {
	if s.closed {
		return ErrClosed
	}
	mb := s.bucket(b)
	old, ok := mb.m[string(key)]
	if !ok {
		return nil
	}
	delete(mb.m, string(key))
	s.keys--
	s.bytes -= int64(len(key) + len(old))
	s.changes.add(b, key, s.keys)
	return nil
}

// Scan implements Backend. It merges the keys added since the last Scan of
// b into its sorted key list: O(keys) when there are new ones.
func (s *Memory) Scan(b Bucket, from []byte, fn func(key, value []byte) bool) error {
	if s.closed {
		return ErrClosed
	}
	if int(b) >= len(s.data) {
		return nil
	}
	mb := &s.data[b]
	mb.merge()
	i, _ := slices.BinarySearch(mb.sorted, string(from))
	for ; i < len(mb.sorted); i++ {
		k := mb.sorted[i]
		v, ok := mb.m[k]
		if !ok {
			continue
		}
		if !fn(unsafeBytes(k), v) {
			return nil
		}
	}
	return nil
}

// merge folds unsorted into sorted, dropping deleted and repeated keys.
func (mb *memBucket) merge() {
	if len(mb.unsorted) == 0 {
		return
	}
	slices.Sort(mb.unsorted)
	merged := make([]string, 0, len(mb.sorted)+len(mb.unsorted))
	i, j := 0, 0
	for i < len(mb.sorted) || j < len(mb.unsorted) {
		var k string
		if j >= len(mb.unsorted) || (i < len(mb.sorted) && mb.sorted[i] <= mb.unsorted[j]) {
			k = mb.sorted[i]
			i++
		} else {
			k = mb.unsorted[j]
			j++
		}
		if _, ok := mb.m[k]; !ok || (len(merged) > 0 && merged[len(merged)-1] == k) {
			continue
		}
		merged = append(merged, k)
	}
	mb.sorted, mb.unsorted = merged, mb.unsorted[:0]
}

// Flush implements Backend (nothing to write).
func (s *Memory) Flush() error {
	if s.closed {
		return ErrClosed
	}
	return nil
}

// Snapshot implements Backend.
func (s *Memory) Snapshot(full bool) (Snapshot, error) {
	if s.closed {
		return nil, ErrClosed
	}
	keys, overflow := s.changes.take()
	snap := &memSnapshot{full: full || overflow}
	if snap.full {
		for b := range s.data {
			mb := &s.data[b]
			mb.merge()
			name := []byte(s.buckets.names[b])
			for _, k := range mb.sorted {
				if v, ok := mb.m[k]; ok {
					snap.entries = append(snap.entries, memEntry{bucket: name, key: []byte(k), value: bytes.Clone(v)})
				}
			}
		}
	} else {
		for _, bc := range sortedChanges(s.buckets.names, keys) {
			b := s.buckets.byName[bc.name]
			name := []byte(bc.name)
			for _, k := range bc.keys {
				v, ok := s.data[b].m[k]
				snap.entries = append(snap.entries, memEntry{bucket: name, key: []byte(k), value: bytes.Clone(v), deleted: !ok})
			}
		}
	}
	slices.SortStableFunc(snap.entries, func(a, b memEntry) int { return bytes.Compare(a.bucket, b.bucket) })
	return snap, nil
}

type memEntry struct {
	bucket, key, value []byte
	deleted            bool
}

type memSnapshot struct {
	full    bool
	entries []memEntry
	closed  bool
}

func (sn *memSnapshot) Incremental() bool { return !sn.full }

func (sn *memSnapshot) Entries(fn func(bucket, key, value []byte, deleted bool) error) error {
	if sn.closed {
		return ErrClosed
	}
	for _, e := range sn.entries {
		if err := fn(e.bucket, e.key, e.value, e.deleted); err != nil {
			return err
		}
	}
	return nil
}

func (sn *memSnapshot) Close() error {
	sn.closed, sn.entries = true, nil
	return nil
}

// Restore implements Backend.
func (s *Memory) Restore(entries Entries, opts RestoreOptions) error {
	if s.closed {
		return ErrClosed
	}
	s.gen++
	s.data = nil
	s.keys, s.bytes = 0, 0
	s.changes.reset()
	err := entries(func(bucket, key, value []byte, deleted bool) error {
		b, keep, err := s.buckets.keep(bucket, key, opts)
		if err != nil || !keep {
			return err
		}
		mb := s.bucket(b)
		old, had := mb.m[string(key)]
		if had {
			s.bytes -= int64(len(key) + len(old))
		}
		switch {
		case deleted && had:
			delete(mb.m, string(key))
			s.keys--
		case !deleted:
			if !had {
				mb.unsorted = append(mb.unsorted, string(key))
				s.keys++
			}
			mb.m[string(key)] = bytes.Clone(value)
			s.bytes += int64(len(key) + len(value))
		}
		return nil
	})
	s.changes.reset()
	if err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	return nil
}

// Generation implements Backend.
func (s *Memory) Generation() uint64 { return s.gen }

// Usage implements Backend.
func (s *Memory) Usage() Usage { return Usage{Keys: s.keys, MemoryBytes: s.bytes} }

// Close implements Backend.
func (s *Memory) Close() error {
	s.closed = true
	return nil
}
