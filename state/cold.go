package state

import (
	"bytes"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Cold is a read-only tier of state under the working file: the checkpoint
// files (a base and its increments) that already hold what a Bolt backend
// with BoltOptions.ColdReads would otherwise write back into its working
// file. Package checkpoint's Chain implements it.
//
// A Cold is immutable: attaching newer files means a new Cold. Its
// methods are called by the backend's owner and, for a Retained Cold, by a
// Snapshot's reader in another goroutine, each on its own reference;
// implementations make that safe.
type Cold interface {
	// Get returns the newest value of key in bucket; ok is false if no
	// file holds it or the newest entry is a deletion. The value is valid
	// until the next call on the Cold.
	Get(bucket string, key []byte) (value []byte, ok bool, err error)
	// Scan calls fn for the live entries of bucket with key ≥ from, in
	// bytes.Compare order, the newest version of each key, deletions
	// hidden, until fn returns false. key and value are valid only
	// during fn.
	Scan(bucket string, from []byte, fn func(key, value []byte) bool) error
	// Entries counts the entries of the files: an upper bound on the keys
	// they hold.
	Entries() int
	// Buckets names the buckets the files hold entries of.
	Buckets() []string
	// MayHold reports whether a file may hold an entry for key in bucket,
	// a deletion included; false must be certain, true may be wrong. It
	// reads no block.
	MayHold(bucket string, key []byte) bool
	// Retain adds a reference, for a reader that outlives the holder's.
	Retain()
	// Release drops a reference; the files close when the last one goes.
	Release()
}

// Cold reads: the working file holds what no checkpoint file holds.
//
// Without them the working file is the whole state: every update of a key
// that has left the cache is written back into it, page by page, although
// the checkpoint taken next writes the same change again, compressed.
// With 1M keys and an 8 MiB cache that is about an entry's bytes per
// update, 13 times the checkpoint increments (BENCHMARKS.md (f)).
//
// With BoltOptions.ColdReads the backend reads, beneath its cache and its
// working file, an attached Cold: the checkpoint files it last wrote (or
// restored). The tiers, newest first, are the cache, the working file and
// the Cold; the first that has a key decides, a deletion included. So:
//
//   - The working file stores deletions too: in cold mode every value in
//     it is tagged, coldPut then the value, or coldTombstone alone.
//   - An entry is covered when the Cold holds its current value: the file
//     of the last Snapshot is attached (AttachCold with that Snapshot's
//     number) and the entry has not changed since. A dirty covered entry
//     the working file does not hold is clean, and the cache may drop it:
//     its next read comes from the Cold. One the working file holds (an
//     older version, written back before) is deleted from it at the next
//     write-back instead of rewritten, so the working file never holds a
//     version older than the Cold's.
//   - Entries that have changed since the last attached file are written
//     back as before, tagged, when the cache needs room: the working file
//     holds only what the cache could not keep between two checkpoints.
//   - A deletion stays in the cache until it is covered or written back:
//     dropped earlier, the Cold's older value would show through.
//   - Scan merges the three tiers instead of writing the cache back.
//
// A snapshot's file is attached only once it is written whole, so a
// checkpoint that then fails to complete costs nothing: its file still
// holds the state as of its barrier, which is all a read needs, and the
// next checkpoint is a full one.
const (
	coldPut       byte = 0
	coldTombstone byte = 1
)

// untag splits a tagged working-file value: the value and whether it is
// live (false for a tombstone). A value without a tag byte is corrupt.
func untag(v []byte) ([]byte, bool, error) {
	if len(v) == 0 {
		return nil, false, fmt.Errorf("%w: untagged value in the working file", ErrCorrupt)
	}
	if v[0] == coldTombstone {
		return nil, false, nil
	}
	return v[1:], true, nil
}

// Snapshots returns the number of Snapshots taken so far: the number
// AttachCold wants for the file written from the last one.
func (s *Bolt) Snapshots() uint64 { return s.snapSeq }

// AttachCold makes c the tier under the working file, releasing the one
// before, and takes over the caller's reference to c. c must hold the
// state as of Snapshot number seq (Snapshots just after that Snapshot was
// taken): its file, written whole, on top of the files the previous Cold
// held, or a base merged from them. If no Snapshot was taken since, the
// entries that have not changed since it are covered: the dirty ones the
// working file does not hold become clean, deletions among them leave the
// cache. An older seq only replaces the files reads go to.
func (s *Bolt) AttachCold(c Cold, seq uint64) error {
	if err := s.canTakeCold(c, "attach checkpoint files"); err != nil {
		return err
	}
	if s.cold != nil {
		s.cold.Release()
	}
	s.cold, s.coldSeq, s.coldKeys = c, seq, c.Entries()
	if s.err != nil {
		return s.err
	}
	if err := s.dropCoveredTombstones(); err != nil {
		s.err = err
		return err
	}
	if seq != s.snapSeq {
		return nil
	}
	return s.sweepCovered()
}

// covered reports whether the Cold holds entry e's current value.
func (s *Bolt) covered(e *entry) bool {
	return s.cold != nil && s.coldSeq == s.snapSeq && e.flags&flagChanged == 0
}

// nothingUnder reports, for a deletion a Snapshot just took (so its file
// will hold it), that no tier under the cache holds the key nor will
// before that file is attached: the working file does not, the attached
// files do not (their Bloom filters say so), and no earlier Snapshot's
// file is still to be attached. The cache may then drop the deletion at
// once, as a whole copy drops a window opened and fired between two
// write-backs, instead of holding it until that file is attached.
func (s *Bolt) nothingUnder(e *entry) bool {
	if s.coldSeq+1 != s.snapSeq {
		return false // an earlier snapshot's file may still hold the key
	}
	if e.flags&flagKnown == 0 {
		_, ok, err := s.read(e.bucket, unsafeBytes(e.key))
		if err != nil {
			return false
		}
		e.flags |= flagKnown
		if ok {
			e.flags |= flagOnDisk
		}
	}
	if e.flags&flagOnDisk != 0 {
		return false
	}
	return s.cold == nil || !s.cold.MayHold(s.buckets.names[e.bucket], unsafeBytes(e.key))
}

// sweepCovered makes the covered dirty entries the working file does not
// hold clean, and drops the deletions among them.
func (s *Bolt) sweepCovered() error {
	c := s.cache
	kept := c.dirty[:0]
	for _, i := range c.dirty {
		e := &c.entries[i]
		if e.flags&flagUsed == 0 || e.flags&flagDirty == 0 {
			continue
		}
		if !s.covered(e) {
			kept = append(kept, i)
			continue
		}
		if e.flags&flagKnown == 0 {
			_, ok, err := s.read(e.bucket, unsafeBytes(e.key))
			if err != nil {
				s.err = err
				return err
			}
			e.flags |= flagKnown
			if ok {
				e.flags |= flagOnDisk
			}
		}
		if e.flags&flagOnDisk != 0 {
			kept = append(kept, i) // an older version to delete at the next write-back
			continue
		}
		e.flags &^= flagDirty
		if e.flags&flagAbsent != 0 {
			c.remove(i)
		}
	}
	clear(c.dirty[len(kept):])
	c.dirty = kept
	return nil
}

// RestoreCold is Restore for cold reads: the working file starts empty
// and c (whose reference it takes over) holds the state, the checkpoint
// files themselves, so nothing is copied. opts.KeyGroups, for a restore
// with a changed parallelism, hides the other key groups' entries of c
// from Scan and full snapshots. As after Restore, the next Snapshot is
// full.
func (s *Bolt) RestoreCold(c Cold, opts RestoreOptions) error {
	if err := s.canTakeCold(c, "restore from checkpoint files"); err != nil {
		return err
	}
	if err := s.checkNoSnapshots("restore"); err != nil {
		c.Release()
		return err
	}
	// Buckets nothing registered yet are carried on, as Restore does,
	// unless their key groups must be told apart.
	for _, name := range c.Buckets() {
		if _, ok := s.buckets.byName[name]; ok {
			continue
		}
		var err error
		if opts.KeyGroups != nil {
			err = fmt.Errorf("%w: %q (register it before a key-group-filtered restore)", ErrUnknownBucket, name)
		} else {
			_, err = s.buckets.register(name, nil)
		}
		if err != nil {
			c.Release()
			return fmt.Errorf("state: restore: %w", err)
		}
	}
	s.endRead()
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			c.Release()
			return fmt.Errorf("state: restore: close working file: %w", err)
		}
		s.db = nil
	}
	s.dropCold()
	s.gen++
	s.cache.clear()
	s.changes.reset()
	s.keys, s.err = 0, nil
	if err := s.open(); err != nil {
		c.Release()
		s.closeAfterFailedRestore(err)
		s.err = err
		return err
	}
	if opts.KeyGroups != nil {
		kg := *opts.KeyGroups
		s.coldKG = &kg
	}
	s.cold, s.coldSeq, s.coldKeys = c, s.snapSeq, c.Entries()
	return nil
}

// canTakeCold checks that the backend can take c for op, releasing c if
// not.
func (s *Bolt) canTakeCold(c Cold, op string) error {
	var err error
	switch {
	case !s.opts.ColdReads:
		err = fmt.Errorf("state: %s into a working file without cold reads (BoltOptions.ColdReads)", op)
	case s.closed:
		err = ErrClosed
	}
	if err != nil {
		c.Release()
	}
	return err
}

// dropCold releases the Cold, if any.
func (s *Bolt) dropCold() {
	if s.cold != nil {
		s.cold.Release()
	}
	s.cold, s.coldKG, s.coldKeys = nil, nil, 0
	clear(s.tombs)
	s.tombs = s.tombs[:0]
}

// coldKeep reports whether a Cold entry of bucket b belongs to this
// backend's key groups (a restore with a changed parallelism reads files
// holding others).
func (s *Bolt) coldKeep(b Bucket, key []byte) bool {
	if s.coldKG == nil || s.buckets.kgOf[b] == nil {
		return true
	}
	kg, ok := s.buckets.kgOf[b](key)
	return !ok || s.coldKG.Contains(kg)
}

// readCold looks key up under the cache: the working file, then the Cold.
// onDisk reports whether the working file holds the key (a tombstone
// included). The value is valid until the next read.
func (s *Bolt) readCold(b Bucket, key []byte) (v []byte, ok, onDisk bool, err error) {
	raw, onDisk, err := s.read(b, key)
	if err != nil {
		return nil, false, false, err
	}
	if onDisk {
		v, ok, err = untag(raw)
		return v, ok, true, err
	}
	if s.cold == nil || !s.coldKeep(b, key) {
		return nil, false, false, nil
	}
	s.coldGets++
	v, ok, err = s.cold.Get(s.buckets.names[b], key)
	if err != nil {
		return nil, false, false, fmt.Errorf("state: read checkpoint files: %w", err)
	}
	return v, ok, false, nil
}

// scanCold is Scan in cold mode: the cached entries of b, the working
// file's and the Cold's, merged without writing anything back.
func (s *Bolt) scanCold(b Bucket, from []byte, fn func(key, value []byte) bool) error {
	up, err := s.upperScan(b, from)
	if err != nil {
		return err
	}
	stopped := false
	// emit passes the upper tiers' entries before key (all of them if key
	// is nil) to fn; false if fn stopped.
	emit := func(key []byte) bool {
		for up.valid() && (key == nil || bytes.Compare(up.key, key) < 0) {
			if up.live && !fn(up.key, up.val) {
				return false
			}
			if err = up.next(); err != nil {
				return false
			}
		}
		return true
	}
	if s.cold != nil {
		cerr := s.cold.Scan(s.buckets.names[b], from, func(k, v []byte) bool {
			if !s.coldKeep(b, k) {
				return true
			}
			if !emit(k) {
				stopped = true
				return false
			}
			if up.valid() && bytes.Equal(up.key, k) {
				live, key, val := up.live, up.key, up.val
				if live && !fn(key, val) {
					stopped = true
					return false
				}
				if err = up.next(); err != nil {
					stopped = true
					return false
				}
				return true
			}
			if !fn(k, v) {
				stopped = true
				return false
			}
			return true
		})
		if err != nil {
			return err
		}
		if cerr != nil {
			return fmt.Errorf("state: scan checkpoint files: %w", cerr)
		}
	}
	if !stopped {
		emit(nil)
	}
	return err
}

// upperIter merges the cache's entries of one bucket (sorted at the
// start) with the working file's, the cache's winning on equal keys.
type upperIter struct {
	s       *Bolt
	cached  []int32 // cache entries of the bucket with key ≥ from, by key
	ci      int
	cur     cursor
	bk, bv  []byte // the working file's current entry, nil at its end
	key     []byte // the merged current entry
	val     []byte
	live    bool
	isValid bool
}

// cursor is the part of *bolt.Cursor upperIter uses.
type cursor interface {
	Seek([]byte) ([]byte, []byte)
	Next() ([]byte, []byte)
}

func (s *Bolt) upperScan(b Bucket, from []byte) (*upperIter, error) {
	u := &s.scanUp
	*u = upperIter{s: s, cached: u.cached[:0]}
	if int(b) < len(s.cache.index) {
		for k, i := range s.cache.index[b] {
			if k >= string(from) {
				u.cached = append(u.cached, i)
			}
		}
	}
	c := s.cache
	slices.SortFunc(u.cached, func(x, y int32) int {
		return bytes.Compare(unsafeBytes(c.entries[x].key), unsafeBytes(c.entries[y].key))
	})
	bk, err := s.readBucket(b)
	if err != nil {
		return nil, err
	}
	if bk != nil {
		u.cur = bk.Cursor()
		u.bk, u.bv = u.cur.Seek(from)
	}
	return u, u.next()
}

func (u *upperIter) valid() bool { return u.isValid }

// next moves to the next key of either tier.
func (u *upperIter) next() error {
	c := u.s.cache
	var ck []byte
	if u.ci < len(u.cached) {
		ck = unsafeBytes(c.entries[u.cached[u.ci]].key)
	}
	switch {
	case ck == nil && u.bk == nil:
		u.isValid = false
		return nil
	case u.bk == nil || ck != nil && bytes.Compare(ck, u.bk) <= 0:
		if u.bk != nil && bytes.Equal(ck, u.bk) {
			u.bk, u.bv = u.cur.Next() // shadowed by the cache
		}
		e := &c.entries[u.cached[u.ci]]
		u.ci++
		u.key, u.val, u.live, u.isValid = ck, e.val, e.flags&flagAbsent == 0, true
		return nil
	default:
		v, live, err := untag(u.bv)
		if err != nil {
			return err
		}
		u.key, u.val, u.live, u.isValid = u.bk, v, live, true
		u.bk, u.bv = u.cur.Next()
		return nil
	}
}

// reserveTagged sizes the buffer of a write-back batch's tagged values
// once, so the slices handed to bbolt (which copies values only at the
// commit) never move.
func (s *Bolt) reserveTagged(batch []int32) {
	n := 0
	for _, i := range batch {
		n += 1 + len(s.cache.entries[i].val)
	}
	if cap(s.tagged) < n {
		s.tagged = make([]byte, 0, n)
	}
	s.tagged = s.tagged[:0]
}

// tag appends v's tagged form to the batch's buffer and returns it.
func (s *Bolt) tag(t byte, v []byte) []byte {
	start := len(s.tagged)
	s.tagged = append(s.tagged, t)
	s.tagged = append(s.tagged, v...)
	return s.tagged[start:len(s.tagged):len(s.tagged)]
}

// writeBackCold writes dirty entry e back in cold mode, in bk, and
// reports whether the working file holds the key after it (a tombstone
// included). onDisk says whether it did before.
func (s *Bolt) writeBackCold(bk boltBucket, e *entry, key []byte, onDisk bool) (bool, error) {
	switch {
	case s.covered(e):
		// The checkpoint files hold the current value: the working
		// file's older version goes.
		if onDisk {
			if err := bk.Delete(key); err != nil {
				return false, s.writeErr("delete", err)
			}
		}
		return false, nil
	case e.flags&flagAbsent != 0:
		if err := bk.Put(key, s.tag(coldTombstone, nil)); err != nil {
			return false, s.writeErr("put", err)
		}
		s.tombs = append(s.tombs, tombstone{bucket: e.bucket, key: e.key, seq: s.snapSeq})
		return true, nil
	default:
		if err := bk.Put(key, s.tag(coldPut, e.val)); err != nil {
			return false, s.writeErr("put", err)
		}
		return true, nil
	}
}

// boltBucket is the part of *bolt.Bucket a write-back uses.
type boltBucket interface {
	Put(key, value []byte) error
	Delete(key []byte) error
}

// tombstone is a deletion written into the working file after Snapshot
// number seq: once a file of a later Snapshot is attached, the checkpoint
// files answer for it and it can go.
type tombstone struct {
	bucket Bucket
	key    string // the cache entry's, never modified
	seq    uint64
}

// dropCoveredTombstones deletes from the working file the tombstones the
// attached files now answer for (those written before Snapshot coldSeq),
// unless the key was written since.
func (s *Bolt) dropCoveredTombstones() error {
	n := 0
	for _, t := range s.tombs {
		if t.seq < s.coldSeq {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	s.endRead()
	tx, err := s.db.Begin(true)
	if err != nil {
		return fmt.Errorf("state: begin write: %w", err)
	}
	kept := s.tombs[:0]
	for _, t := range s.tombs {
		if t.seq >= s.coldSeq {
			kept = append(kept, t)
			continue
		}
		bk := tx.Bucket([]byte(s.buckets.names[t.bucket]))
		if bk == nil {
			continue
		}
		key := unsafeBytes(t.key)
		if v := bk.Get(key); len(v) == 1 && v[0] == coldTombstone {
			if err := bk.Delete(key); err != nil {
				_ = tx.Rollback()
				return s.writeErr("delete", err)
			}
			s.keys--
			if i := s.cache.lookup(t.bucket, key); i >= 0 {
				s.cache.entries[i].flags &^= flagOnDisk
			}
		}
	}
	clear(s.tombs[len(kept):])
	s.tombs = kept
	if err := tx.Commit(); err != nil {
		return s.writeErr("commit", err)
	}
	s.committed(tx)
	return nil
}

// coldKeepFunc is coldKeep for a Snapshot read in another goroutine: by
// bucket name, on a copy of what it needs; nil when every entry is kept.
func (s *Bolt) coldKeepFunc() func(name string, key []byte) bool {
	if s.coldKG == nil {
		return nil
	}
	kg := *s.coldKG
	kgOf := make(map[string]KeyGroupFunc, len(s.buckets.names))
	for b, name := range s.buckets.names {
		if f := s.buckets.kgOf[b]; f != nil {
			kgOf[name] = f
		}
	}
	return func(name string, key []byte) bool {
		f := kgOf[name]
		if f == nil {
			return true
		}
		g, ok := f(key)
		return !ok || kg.Contains(g)
	}
}

// fullColdEntries is fullEntries in cold mode: the overlay wins over the
// working file's tagged entries (tombstones hide what is under them),
// which win over the checkpoint files'.
func (sn *boltSnapshot) fullColdEntries(name []byte, cur *bolt.Cursor, overlay []overlayEntry, fn func(bucket, key, value []byte, deleted bool) error) error {
	// The upper tiers, overlay over working file, as one ordered stream.
	var k, v []byte
	if cur != nil {
		k, v = cur.First()
	}
	o := 0
	var upKey, upVal []byte
	upLive, upValid := false, false
	var err error
	advance := func() {
		upValid = false
		c := 1 // -1 the working file first, 1 the overlay, 0 both
		switch {
		case k == nil && o == len(overlay):
			return
		case k == nil:
		case o == len(overlay):
			c = -1
		default:
			c = bytes.Compare(k, overlay[o].key)
		}
		upValid = true
		if c < 0 {
			upKey = k
			if upVal, upLive, err = untag(v); err != nil {
				upValid = false
			}
			k, v = cur.Next()
			return
		}
		oe := &overlay[o]
		o++
		upKey, upVal, upLive = oe.key, oe.val, !oe.absent
		if c == 0 {
			k, v = cur.Next()
		}
	}
	advance()
	var ferr error
	// emit passes the upper entries before key (all if nil) to fn.
	emit := func(key []byte) bool {
		for upValid && (key == nil || bytes.Compare(upKey, key) < 0) {
			if upLive {
				if ferr = fn(name, upKey, upVal, false); ferr != nil {
					return false
				}
			}
			advance()
		}
		return err == nil
	}
	if sn.cold != nil {
		bucket := string(name)
		cerr := sn.cold.Scan(bucket, nil, func(ck, cv []byte) bool {
			if sn.coldKeep != nil && !sn.coldKeep(bucket, ck) {
				return true
			}
			if !emit(ck) {
				return false
			}
			if upValid && bytes.Equal(upKey, ck) {
				if upLive {
					if ferr = fn(name, upKey, upVal, false); ferr != nil {
						return false
					}
				}
				advance()
				return err == nil
			}
			if ferr = fn(name, ck, cv, false); ferr != nil {
				return false
			}
			return true
		})
		if ferr != nil {
			return ferr
		}
		if err != nil {
			return err
		}
		if cerr != nil {
			return fmt.Errorf("state: snapshot: read checkpoint files: %w", cerr)
		}
	}
	emit(nil)
	if ferr != nil {
		return ferr
	}
	return err
}

// ColdReads reports whether the backend reads from checkpoint files
// (BoltOptions.ColdReads).
func (s *Bolt) ColdReads() bool { return s.opts.ColdReads }

// Cold returns the checkpoint files attached under the working file, or
// nil. The backend keeps its reference: a caller building the next Cold
// from it (adding a file) takes references of its own.
func (s *Bolt) Cold() Cold { return s.cold }
