package state

// Backend is a byte-level keyed store organized in named buckets (one per
// operator and state), with change tracking for incremental checkpoints.
// Bolt (bbolt under a write-back cache) and Memory implement it.
//
// Keys are opaque to the Backend; by convention (see doc.go) keyed state is
// laid out keyGroup | key | namespace and timers domain | time | …, so that
// byte order is the order the callers need.
//
// Memory and lifetime: a value returned by Get aliases backend memory and is
// valid until the next call to any Backend method; never modify it. Put and
// Delete copy what they keep.
//
// Concurrency: a Backend is owned by one goroutine (one operator subtask),
// except that a Snapshot it returned may be read and closed by another
// goroutine while the owner goes on using the Backend.
//
// Errors: a failed write (ErrFull, an I/O error) is sticky: every later call
// returns it, and the state must be rebuilt with Restore from the last
// checkpoint (the working store is disposable, see doc.go).
type Backend interface {
	// Bucket returns the handle of the named bucket, registering it on first
	// use. keyGroupOf tells Restore how to find the key group of a key in
	// this bucket (KeyGroupPrefix for the keygroup | key | namespace layout);
	// nil means the bucket is not keyed (operator state).
	Bucket(name string, keyGroupOf KeyGroupFunc) (Bucket, error)

	// Get returns the value of key in b and whether it exists.
	Get(b Bucket, key []byte) (value []byte, ok bool, err error)
	// Put sets key to value in b (value may be empty, never nil-vs-empty
	// distinguished).
	Put(b Bucket, key, value []byte) error
	// Delete removes key from b; deleting a missing key is not an error.
	Delete(b Bucket, key []byte) error
	// Scan calls fn for the keys of b at or after from, in bytes.Compare
	// order, until fn returns false. It sees every Put and Delete made
	// before it. key and value are valid only during fn, and fn must not
	// call the Backend. Scan flushes the write-back cache first, so use it
	// for batches (as TimerQueue does), not per reading.
	Scan(b Bucket, from []byte, fn func(key, value []byte) bool) error

	// Flush writes the write-back cache through (no-op for Memory).
	Flush() error
	// Snapshot captures and resets the change set and returns a consistent
	// view of the store as of this call, without writing the cache back
	// (Bolt copies the cached entries it needs). It is incremental
	// (changes since the previous Snapshot or Restore) unless full is set
	// or the change set overflowed its bound. The caller must Close it.
	Snapshot(full bool) (Snapshot, error)
	// Restore clears the store and loads entries in order (a base, then
	// increments: a later entry overrides an earlier one, deleted removes).
	// Entries outside opts.KeyGroups are skipped. The change set is empty
	// after, so the next Snapshot must be full (it is made full
	// automatically). Restore invalidates handles held by TimerQueues; they
	// notice through Generation.
	Restore(entries Entries, opts RestoreOptions) error
	// Generation is incremented by every Restore, so layers that cache
	// derived facts (counts, read buffers) know to recompute them.
	Generation() uint64

	// Usage reports how much the store holds, for metrics. It costs O(1)
	// for Memory and, for Bolt, a read transaction and a pass over the
	// write-back cache's dirty entries: call it per checkpoint, not per
	// reading.
	Usage() Usage

	// Close releases the store. A Bolt backend's working file stays on
	// disk but is never trusted again (OpenBolt discards it).
	Close() error
}

// Usage is what a Backend holds.
type Usage struct {
	// Keys counts the entries in every bucket, written back or not. It is
	// an estimate after an incremental Restore (see Bolt's restore).
	Keys int
	// FileBytes is, for Bolt, the size of the working file in use: its
	// pages up to the highest one written, what BoltOptions.MaxSize
	// bounds (freed pages are reused, not returned). 0 for Memory.
	FileBytes int64
	// MemoryBytes is what the store keeps in memory: for Memory every key
	// and value (not Go's map overhead), for Bolt its write-back cache and,
	// with cold reads, the indexes of the checkpoint files it reads.
	MemoryBytes int64
	// WrittenBytes counts, for Bolt, the bytes written to the working file
	// since it was opened: the bulk-loaded base of a restore and, per
	// committed transaction, every page it touched (bbolt writes a changed
	// page whole, at a new place) plus the meta page. What reaches the
	// device may be less: the file runs without fsync, so the kernel can
	// write a page rewritten twice once. 0 for Memory.
	WrittenBytes int64
	// CheckpointReads counts, for Bolt with cold reads, the lookups the
	// checkpoint files answered (found or not) since the backend was
	// opened: the misses of the cache and the working file.
	CheckpointReads int64
}

// Bucket is the handle of a named bucket of one Backend.
type Bucket uint32

// Entries yields entries to Restore: it calls fn for each entry in order and
// stops at the first error fn returns, returning it. bucket, key and value may
// be reused by the producer after fn returns.
type Entries func(fn func(bucket, key, value []byte, deleted bool) error) error

// Snapshot is a consistent view taken at a checkpoint barrier. Its methods
// may run in another goroutine than the Backend's owner, concurrently with
// writes to the Backend, which they never see.
type Snapshot interface {
	// Incremental reports whether Entries yields only the changes since the
	// previous snapshot (with deletions) rather than every entry.
	Incremental() bool
	// Entries calls fn for each entry, ordered by (bucket name, key); deleted
	// entries (incremental only) have a nil value. The arguments are valid
	// only during fn. It stops at and returns the first error of fn. It may
	// be called more than once.
	Entries(fn func(bucket, key, value []byte, deleted bool) error) error
	// Close releases the view (the bbolt read transaction). Idempotent.
	Close() error
}

// KeyGroupFunc returns the key group of a key stored in a bucket, or false if
// the key carries none (an entry every subtask keeps).
type KeyGroupFunc func(key []byte) (uint16, bool)

// KeyGroupPrefix is the KeyGroupFunc of the keygroup | key | namespace layout:
// the first two bytes, big-endian.
func KeyGroupPrefix(key []byte) (uint16, bool) {
	if len(key) < 2 {
		return 0, false
	}
	return uint16(key[0])<<8 | uint16(key[1]), true
}

// KeyGroupRange is an inclusive range of key groups [First, Last], the share
// of one subtask (Flink's KeyGroupRange).
type KeyGroupRange struct {
	First, Last uint16
}

// Contains reports whether kg is in r.
func (r KeyGroupRange) Contains(kg uint16) bool { return kg >= r.First && kg <= r.Last }

// SubtaskKeyGroups returns the key groups of subtask i of parallelism, the
// inverse of Subtask: the contiguous range whose keyGroup × parallelism /
// maxKeyGroups is i. ok is false if the range is empty (more subtasks than key
// groups).
func SubtaskKeyGroups(i, parallelism, maxKeyGroups int) (r KeyGroupRange, ok bool) {
	// The smallest kg with kg*p/max ≥ i is ceil(i*max/p).
	first := (i*maxKeyGroups + parallelism - 1) / parallelism
	next := ((i+1)*maxKeyGroups + parallelism - 1) / parallelism
	if next <= first {
		return KeyGroupRange{}, false
	}
	return KeyGroupRange{First: uint16(first), Last: uint16(next - 1)}, true
}

// RestoreOptions select what Restore loads.
type RestoreOptions struct {
	// KeyGroups, when not nil, keeps only entries whose key group (found with
	// the KeyGroupFunc registered for the bucket) is in range, for a restore
	// with a changed parallelism. Entries of unkeyed buckets are kept. An
	// entry of a bucket that was never registered with Bucket is an error,
	// since its layout is unknown.
	KeyGroups *KeyGroupRange
}
