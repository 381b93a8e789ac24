package state

// changeSet records which (bucket, key) entries were written or deleted since
// the last snapshot, for incremental checkpoints. It is bounded: once it
// would hold more than maxBytes of keys, or more than maxFraction of the
// store's keys (but at least minKeys), it drops what it has and only
// remembers that a full snapshot is needed — past that point a full snapshot
// is cheaper than tracking more.
//
// Memory adds every changed key. Bolt keeps a "changed" flag on its cache
// entries instead and only counts them (count), so a checkpoint of hot keys
// holds and allocates nothing here; a changed entry leaving the cache before
// the snapshot moves its key into the set (evicted).
type changeSet struct {
	keys     []map[string]struct{} // by Bucket
	n        int                   // keys tracked
	bytes    int                   // approximate memory held
	overflow bool                  // a full snapshot is needed

	maxBytes    int
	maxFraction float64
	minKeys     int
}

// changeOverhead approximates the memory of one tracked key besides its
// bytes: the map slot and string header.
const changeOverhead = 48

// ChangeLimits bound change tracking (see BoltOptions.Changes).
type ChangeLimits struct {
	// MaxBytes is the memory (approximate, in bytes) change tracking may
	// hold; 0 means 4 MiB.
	MaxBytes int
	// MaxFraction of the store's keys may be tracked; beyond it the next
	// snapshot is full. 0 means 0.25 (Flink's heuristics differ; a quarter of
	// the keys is where rewriting everything starts to cost less).
	MaxFraction float64
	// MinKeys are always tracked, whatever MaxFraction says; 0 means 1024.
	MinKeys int
}

func newChangeSet(l ChangeLimits) *changeSet {
	c := &changeSet{maxBytes: l.MaxBytes, maxFraction: l.MaxFraction, minKeys: l.MinKeys}
	if c.maxBytes <= 0 {
		c.maxBytes = 4 << 20
	}
	if c.maxFraction <= 0 {
		c.maxFraction = 0.25
	}
	if c.minKeys <= 0 {
		c.minKeys = 1024
	}
	return c
}

// add records key of b; storeKeys is the store's current key count (an
// estimate is fine). It reports whether tracking is still on.
func (c *changeSet) add(b Bucket, key []byte, storeKeys int) {
	if c.overflow {
		return
	}
	for int(b) >= len(c.keys) {
		c.keys = append(c.keys, nil)
	}
	m := c.keys[b]
	if m == nil {
		m = make(map[string]struct{})
		c.keys[b] = m
	}
	if _, ok := m[string(key)]; ok {
		return
	}
	m[string(key)] = struct{}{}
	c.bytes += len(key) + changeOverhead
	c.count(storeKeys)
}

// count counts a changed key that is tracked elsewhere (a Bolt cache
// entry's flag) against the bounds.
func (c *changeSet) count(storeKeys int) {
	if c.overflow {
		return
	}
	c.n++
	if c.bytes > c.maxBytes || (c.n > c.minKeys && float64(c.n) > c.maxFraction*float64(storeKeys)) {
		c.keys = nil
		c.n, c.bytes, c.overflow = 0, 0, true
	}
}

// evicted moves a counted key (a changed cache entry leaving the cache)
// into the set, keeping the cache's string (never modified) as it is.
func (c *changeSet) evicted(b Bucket, key string) {
	if c.overflow {
		return
	}
	for int(b) >= len(c.keys) {
		c.keys = append(c.keys, nil)
	}
	if c.keys[b] == nil {
		c.keys[b] = make(map[string]struct{})
	}
	c.keys[b][key] = struct{}{}
	c.bytes += len(key) + changeOverhead // the cache's string, no longer the cache's to count
	if c.bytes > c.maxBytes {
		c.keys = nil
		c.n, c.bytes, c.overflow = 0, 0, true
	}
}

// take returns the tracked keys by bucket and whether a full snapshot is
// needed, and starts a new, empty change set.
func (c *changeSet) take() (keys []map[string]struct{}, full bool) {
	keys, full = c.keys, c.overflow
	c.keys = nil
	c.n, c.bytes, c.overflow = 0, 0, false
	return keys, full
}

// reset forgets everything and requires a full snapshot next (after a
// Restore the previous snapshot chain no longer describes the store).
func (c *changeSet) reset() {
	c.keys = nil
	c.n, c.bytes, c.overflow = 0, 0, true
}
