package state

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// BoltOptions configure OpenBolt. The zero value is usable.
type BoltOptions struct {
	// MaxSize bounds the working file, in bytes; the mmap is reserved at this
	// size up front (InitialMmapSize), so a writer never waits for a remap
	// behind a long snapshot read. Writing past it fails with ErrFull. 0
	// means DefaultMaxSize. On 32-bit ARM the address space limits it to
	// about 1 GiB (see doc.go).
	MaxSize int
	// CacheBytes bounds the write-back cache (state { cache = "32MiB" }),
	// approximately, in bytes; 0 means 32 MiB.
	CacheBytes int
	// FlushBatch is the number of entries written per bbolt transaction
	// when the cache writes back; 0 means 4000. Larger batches commit less
	// often, and so rewrite branch pages, and leaf pages two transactions
	// share, less often (a fifth fewer bytes than 1000), but make bbolt hold
	// more B-tree nodes in memory per commit (one per page touched).
	FlushBatch int
	// Changes bound the change tracking of incremental snapshots.
	Changes ChangeLimits
	// ColdReads makes the working file hold only what the checkpoint
	// files attached with AttachCold (or restored with RestoreCold) do
	// not: cache misses are read from them, and entries they hold are
	// never written back (cold.go).
	ColdReads bool
}

// DefaultMaxSize is the MaxSize when BoltOptions leaves it 0: 512 MiB on
// 32-bit platforms, 8 GiB on 64-bit ones.
var DefaultMaxSize = func() int {
	if strconv.IntSize == 32 {
		return 512 << 20
	}
	gib := 1 << 30 // not a constant: 8 GiB overflows int where this line never runs (32-bit)
	return 8 * gib
}()

// Bolt is the bbolt Backend: one working database file behind a bounded
// write-back cache. See the package documentation for the life cycle; it is
// not safe for concurrent use, except for the Snapshots it returns.
type Bolt struct {
	path string
	opts BoltOptions
	db   *bolt.DB

	buckets bucketRegistry
	cache   *cache
	changes *changeSet
	keys    int // keys in bbolt (after the next flush), for the change-set bound

	rtx  *bolt.Tx       // read transaction serving cache misses, or nil
	rbks []*bolt.Bucket // rtx's buckets by Bucket, looked up lazily

	snapshots atomic.Int32             // open Snapshots (closed by any goroutine)
	spare     atomic.Pointer[snapBufs] // a closed Snapshot's buffers, for the next

	written  int64 // bytes written to the working file since it was opened (Usage.WrittenBytes)
	coldGets int64 // lookups the Cold answered (Usage.CheckpointReads)

	// Cold reads (cold.go).
	cold     Cold           // the checkpoint files under the working file, or nil
	coldKG   *KeyGroupRange // the key groups of cold that are this backend's; nil: all
	coldSeq  uint64         // the Snapshot whose file heads cold
	coldKeys int            // cold.Entries()
	snapSeq  uint64         // Snapshots taken
	scanUp   upperIter      // reused by scanCold
	tagged   []byte         // a write-back batch's tagged values, until its commit
	tombs    []tombstone    // deletions in the working file the Cold does not answer for yet

	gen    uint64
	err    error // sticky write error
	closed bool
}

// OpenBolt creates the working database at path, discarding any file already
// there: the working store is disposable and never trusted after a restart
// (its contents come back with Restore from the last checkpoint). The file
// runs with NoSync: a crash may corrupt it, which is harmless by that rule.
func OpenBolt(path string, opts BoltOptions) (*Bolt, error) {
	if opts.MaxSize <= 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 32 << 20
	}
	if opts.FlushBatch <= 0 {
		opts.FlushBatch = 4000
	}
	changes := newChangeSet(opts.Changes)
	s := &Bolt{
		path:    path,
		opts:    opts,
		buckets: newBucketRegistry(),
		cache:   newCache(opts.CacheBytes, changes),
		changes: changes,
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Bolt) open() error {
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state: discard old working file: %w", err)
	}
	return s.openFile()
}

// openFile opens the working file as it is (new, or just bulk loaded).
func (s *Bolt) openFile() error {
	db, err := bolt.Open(s.path, 0o600, &bolt.Options{
		Timeout:         time.Second, // another process holds the file lock
		NoSync:          true,        // disposable: rebuilt from a checkpoint after a crash
		NoGrowSync:      true,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: s.opts.MaxSize,
		MaxSize:         s.opts.MaxSize,
	})
	if err != nil {
		return fmt.Errorf("state: open working file %s: %w", s.path, err)
	}
	s.db = db
	return nil
}

// Bucket implements Backend.
func (s *Bolt) Bucket(name string, keyGroupOf KeyGroupFunc) (Bucket, error) {
	if s.closed {
		return 0, ErrClosed
	}
	return s.buckets.register(name, keyGroupOf)
}

// Get implements Backend.
func (s *Bolt) Get(b Bucket, key []byte) ([]byte, bool, error) {
	if s.err != nil {
		return nil, false, s.err
	}
	if i := s.cache.lookup(b, key); i >= 0 {
		e := &s.cache.entries[i]
		e.flags |= flagRef
		if e.flags&flagAbsent != 0 {
			return nil, false, nil
		}
		return e.val, true, nil
	}
	var v []byte
	var ok, onDisk bool
	var err error
	if s.opts.ColdReads {
		v, ok, onDisk, err = s.readCold(b, key)
	} else {
		v, ok, err = s.read(b, key)
		onDisk = ok
	}
	if err != nil {
		return nil, false, err
	}
	flags := flagKnown
	if onDisk {
		flags |= flagOnDisk
	}
	if !ok {
		flags |= flagAbsent // remember the miss: new windows are looked up before they are created
	}
	i := s.cache.insert(b, key, v, flags)
	if err := s.makeRoom(i); err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, nil
	}
	return s.cache.entries[i].val, true, nil
}

// read looks key up in bbolt. The value aliases the mmap: valid until the
// read transaction ends.
func (s *Bolt) read(b Bucket, key []byte) ([]byte, bool, error) {
	bk, err := s.readBucket(b)
	if bk == nil || err != nil {
		return nil, false, err
	}
	k, v := bk.Cursor().Seek(key)
	if k == nil || !bytes.Equal(k, key) {
		return nil, false, nil
	}
	return v, true, nil
}

// readBucket returns b in the read transaction (opened on demand), or nil if
// it was never flushed.
func (s *Bolt) readBucket(b Bucket) (*bolt.Bucket, error) {
	if _, err := s.readTx(); err != nil {
		return nil, err
	}
	for int(b) >= len(s.rbks) {
		s.rbks = append(s.rbks, nil)
	}
	bk := s.rbks[b]
	if bk == nil {
		if bk = s.rtx.Bucket([]byte(s.buckets.names[b])); bk != nil {
			s.rbks[b] = bk
		}
	}
	return bk, nil
}

// readTx returns the read transaction, opened on demand; Flush ends it, so
// it always sees the file as last written.
func (s *Bolt) readTx() (*bolt.Tx, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if s.rtx == nil {
		tx, err := s.db.Begin(false)
		if err != nil {
			return nil, fmt.Errorf("state: begin read: %w", err)
		}
		s.rtx = tx
	}
	return s.rtx, nil
}

func (s *Bolt) endRead() {
	if s.rtx != nil {
		_ = s.rtx.Rollback() // a read transaction has nothing to lose
		s.rtx = nil
		clear(s.rbks)
	}
}

// Put implements Backend.
func (s *Bolt) Put(b Bucket, key, value []byte) error {
	return s.write(b, key, value, false)
}

// Delete implements Backend.
func (s *Bolt) Delete(b Bucket, key []byte) error {
	return s.write(b, key, nil, true)
}

func (s *Bolt) write(b Bucket, key, value []byte, del bool) error {
	if s.err != nil {
		return s.err
	}
	if s.closed {
		return ErrClosed
	}
	i := s.cache.lookup(b, key)
	if i < 0 && del {
		// Look the key up, so that deleting a missing key is no change
		// (and costs no write).
		if _, ok, err := s.Get(b, key); err != nil || !ok {
			return err
		}
		i = s.cache.lookup(b, key)
	}
	if i < 0 {
		i = s.cache.insert(b, key, value, flagDirty)
	} else {
		e := &s.cache.entries[i]
		if del && e.flags&flagAbsent != 0 {
			e.flags |= flagRef
			return nil // already absent: nothing changes
		}
		s.cache.set(i, value, del)
	}
	if s.cache.markChanged(i) {
		// The store's size: bbolt's keys plus, at most, the dirty ones not
		// written back yet (a Snapshot no longer flushes them).
		s.changes.count(s.keys + s.coldKeys + len(s.cache.dirty))
	}
	return s.makeRoom(i)
}

// makeRoom brings the cache back under budget, keeping entry keep: clean
// entries go first; if too many are dirty, they are flushed first.
func (s *Bolt) makeRoom(keep int32) error {
	c := s.cache
	if !c.over() {
		return nil
	}
	target := c.budget - c.budget/8 // evict in bulk, not one entry per call
	// Write back only when 7 entries in 8 are dirty. Changed keys are
	// spread over the whole file, so a write-back rewrites about every page
	// of the buckets it touches whatever its size: the working file's wear
	// per hour falls with the dirty entries one write-back gathers. Clean
	// entries are evicted first; they cost a read, never a write.
	if 8*len(c.dirty) > 7*(len(c.entries)-len(c.free)) {
		if err := s.Flush(); err != nil {
			return err
		}
	}
	c.evict(target, keep)
	if c.over() {
		if err := s.Flush(); err != nil {
			return err
		}
		c.evict(target, keep)
	}
	return nil
}

// Flush implements Backend: dirty entries are written in (bucket, key) order
// in transactions of FlushBatch entries.
func (s *Bolt) Flush() error {
	if s.err != nil {
		return s.err
	}
	if s.closed {
		return ErrClosed
	}
	c := s.cache
	if len(c.dirty) == 0 {
		return nil
	}
	s.endRead()
	c.sortDirty()
	for start := 0; start < len(c.dirty); start += s.opts.FlushBatch {
		batch := c.dirty[start:min(start+s.opts.FlushBatch, len(c.dirty))]
		if err := s.flushBatch(batch); err != nil {
			s.err = err
			return err
		}
	}
	c.dirty = c.dirty[:0]
	return nil
}

func (s *Bolt) flushBatch(batch []int32) error {
	c := s.cache
	if s.opts.ColdReads {
		s.reserveTagged(batch)
	}
	tx, err := s.db.Begin(true)
	if err != nil {
		return fmt.Errorf("state: begin write: %w", err)
	}
	var bk *bolt.Bucket
	cur := Bucket(^uint32(0))
	keys := s.keys
	for _, i := range batch {
		e := &c.entries[i]
		if e.bucket != cur || bk == nil {
			cur = e.bucket
			if bk, err = tx.CreateBucketIfNotExists([]byte(s.buckets.names[cur])); err != nil {
				_ = tx.Rollback()
				return s.writeErr("create bucket", err)
			}
			// Split full pages full: a write-back inserts sorted keys
			// all over the file, and bbolt's default (half) leaves every
			// split page half empty, so the file, which every later
			// write-back rewrites, grows to twice its data.
			bk.FillPercent = 1.0
		}
		key := unsafeBytes(e.key)
		onDisk := e.flags&flagOnDisk != 0
		if e.flags&flagKnown == 0 {
			k, _ := bk.Cursor().Seek(key)
			onDisk = k != nil && bytes.Equal(k, key)
		}
		if s.opts.ColdReads {
			wrote, err := s.writeBackCold(bk, e, key, onDisk)
			if err != nil {
				_ = tx.Rollback()
				return err
			}
			switch {
			case wrote && !onDisk:
				keys++
			case !wrote && onDisk:
				keys--
			}
			e.flags &^= flagKnown | flagOnDisk
			if wrote {
				e.flags |= flagKnown | flagOnDisk // checked below
			}
			continue
		}
		if e.flags&flagAbsent != 0 {
			if onDisk {
				if err := bk.Delete(key); err != nil {
					_ = tx.Rollback()
					return s.writeErr("delete", err)
				}
				keys--
			}
			continue
		}
		if !onDisk {
			keys++
		}
		if err := bk.Put(key, e.val); err != nil {
			_ = tx.Rollback()
			return s.writeErr("put", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.writeErr("commit", err)
	}
	s.committed(tx)
	s.keys = keys
	s.tagged = s.tagged[:0]
	for _, i := range batch {
		e := &c.entries[i]
		if s.opts.ColdReads {
			// writeBackCold left flagOnDisk as written.
			onDisk := e.flags&flagOnDisk != 0
			e.flags &^= flagDirty
			e.flags |= flagKnown
			if e.flags&flagAbsent != 0 && e.flags&flagChanged == 0 && (onDisk || s.cold == nil) {
				c.remove(i) // the tombstone, or nothing under it, answers for it
			}
			continue
		}
		e.flags &^= flagDirty | flagOnDisk
		e.flags |= flagKnown
		switch {
		case e.flags&flagAbsent == 0:
			e.flags |= flagOnDisk
		case e.flags&flagChanged == 0:
			// A deletion written back (a fired window, a popped timer):
			// the cache holds live state, not the keys it deleted. A
			// changed one stays until the snapshot has copied it.
			c.remove(i)
		}
	}
	return nil
}

// committed counts what a committed write transaction wrote: the pages it
// allocated (bbolt rewrites every page it touches at a new place) plus the
// meta page. The freelist is not written (NoFreelistSync).
func (s *Bolt) committed(tx *bolt.Tx) {
	st := tx.Stats()
	s.written += st.GetPageAlloc() + int64(s.db.Info().PageSize)
}

// writeErr wraps a failed write; a full file becomes ErrFull.
func (s *Bolt) writeErr(step string, err error) error {
	if errors.Is(err, bolterrors.ErrMaxSizeReached) {
		return fmt.Errorf("%w: %s reached max_size of %d bytes with %d keys: raise state.max_size or reduce the keys, window size or allowed lateness (%s: %w)",
			ErrFull, s.path, s.opts.MaxSize, s.keys, step, err)
	}
	// The working file's path goes with the error: bbolt's fdatasync
	// returns a bare errno, and a caller that waits out a full disk polls
	// the file system of the path the error names.
	return fmt.Errorf("state: %w", &fs.PathError{Op: step, Path: s.path, Err: err})
}

// Scan implements Backend. With cold reads it merges the cache, the
// working file and the checkpoint files, writing nothing back.
func (s *Bolt) Scan(b Bucket, from []byte, fn func(key, value []byte) bool) error {
	if s.opts.ColdReads {
		if s.err != nil {
			return s.err
		}
		if s.closed {
			return ErrClosed
		}
		return s.scanCold(b, from, fn)
	}
	if err := s.Flush(); err != nil {
		return err
	}
	bk, err := s.readBucket(b)
	if bk == nil || err != nil {
		return err
	}
	cur := bk.Cursor()
	for k, v := cur.Seek(from); k != nil; k, v = cur.Next() {
		if !fn(k, v) {
			return nil
		}
	}
	return nil
}

// Generation implements Backend.
func (s *Bolt) Generation() uint64 { return s.gen }

// Usage implements Backend. Whether a dirty entry's key is already in the
// file is looked up here if the cache does not know it yet, and
// remembered, so the next Flush need not look again.
func (s *Bolt) Usage() Usage {
	u := Usage{Keys: s.keys + s.coldKeys, MemoryBytes: int64(s.cache.bytes), WrittenBytes: s.written, CheckpointReads: s.coldGets}
	if s.closed || s.err != nil {
		return u
	}
	c := s.cache
	for _, i := range c.dirty {
		e := &c.entries[i]
		if e.flags&flagKnown == 0 {
			_, ok, err := s.read(e.bucket, unsafeBytes(e.key))
			if err != nil {
				return u
			}
			e.flags |= flagKnown
			if ok {
				e.flags |= flagOnDisk
			}
		}
		switch onDisk, absent := e.flags&flagOnDisk != 0, e.flags&flagAbsent != 0; {
		case onDisk && absent:
			u.Keys--
		case !onDisk && !absent:
			u.Keys++
		}
	}
	if tx, err := s.readTx(); err == nil {
		u.FileBytes = tx.Size()
	}
	if ix, ok := s.cold.(interface{ IndexBytes() int }); ok {
		u.MemoryBytes += int64(ix.IndexBytes()) // the checkpoint files' block indexes and Bloom filters
	}
	return u
}

// Close implements Backend. Snapshots must be closed first: their read
// transactions hold the file, so Close fails with an error (rather than
// wait for them) while one is open.
func (s *Bolt) Close() error {
	if s.closed {
		return nil
	}
	if err := s.checkNoSnapshots("close"); err != nil {
		return err
	}
	s.endRead()
	s.dropCold()
	s.closed = true
	if s.db == nil { // a restore found the disk full
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("state: close working file: %w", err)
	}
	return nil
}

func (s *Bolt) checkNoSnapshots(op string) error {
	if n := s.snapshots.Load(); n > 0 {
		return fmt.Errorf("state: %s with %d open snapshots: close them first", op, n)
	}
	return nil
}

// Path returns the working file's path.
func (s *Bolt) Path() string { return s.path }

// CacheBytes returns the approximate memory the write-back cache holds.
func (s *Bolt) CacheBytes() int { return s.cache.bytes }

// CacheBudget returns the bound of the write-back cache (BoltOptions.CacheBytes).
func (s *Bolt) CacheBudget() int { return s.opts.CacheBytes }
