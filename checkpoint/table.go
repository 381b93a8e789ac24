package checkpoint

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"
	"unsafe"
)

// TableFile is what a Table reads its snapshot file through; vfs.File and
// *os.File implement it. ReadAt must be safe for concurrent use, as
// os.File's is.
type TableFile interface {
	io.ReaderAt
	io.Closer
}

// Table is one snapshot file opened for point reads (Get) and ordered scans
// (Scan), so a task's state can be served from the checkpoint files it
// writes anyway instead of a working copy.
//
// A Table holds its file open and reads it with ReadAt, one block (about
// 32 KiB raw) per read, verifying the block's CRC-32C each time. In memory
// it keeps a TableIndex: per block its offset and first (bucket, key), and
// a Bloom filter of about 10 bits per entry, so a key the file does not
// hold costs no read at all in 99% of cases. The file must be ordered by
// (bucket, key), as state's snapshots are; OpenTable refuses another one
// (ErrUnordered).
//
// On Linux (and on vfs.MemFS) an open file outlives the removal of its
// name: a Table keeps reading a file that retention removed until its last
// reference is released, which is what lets a chain of Tables stay valid
// while newer checkpoints replace its files.
//
// Concurrency: Get keeps the value it returns in the Table's own block
// cache, so Get must not be called concurrently on one Table. Scan, the
// accessors and Retain/Release are safe for concurrent use, also with Get.
// Readers that share a Table across goroutines go through a Chain each,
// which has its own block cache.
//
// Costs, measured by BenchmarkColdChain on amd64 (a shared 2-core VM, file
// in the page cache) with a base of 1M window-state entries (31-byte keys,
// 40-byte values; 5.8 MiB) and 100 increments of 10k entries:
//
//	index                       2.2 bytes per entry (2 of them Bloom)
//	OpenTable of the base       ~125 ms (reads and verifies the whole file)
//	Get, base, random present   ~23 µs: one pread, one 32 KiB zstd decode
//	Get, base, same block again ~0.5 µs: cached block, binary search
//	Get, base, absent           ~0.1 µs (0.3 µs at 10 bits per key, whose
//	                            1% false positives cost a block each)
//	Get through 101 files       present ~45 µs, absent ~4.6 µs (~30 µs at
//	                            10 bits per key: one false positive per miss)
//
// and no allocation per Get. The block decode dominates every read that
// reaches a block; a miss through many increments costs what their false
// positives cost, so a chain is best kept short (Chain.Rebase).
type Table struct {
	ix    *TableIndex
	f     TableFile
	refs  atomic.Int32
	cache blockCache // Get's
}

// NewTable returns a Table of the snapshot file f whose index was collected
// as it was written (Writer.CollectIndex, Writer.Index). It reads nothing.
// The Table owns f from now on and holds one reference.
func NewTable(f TableFile, ix *TableIndex) *Table {
	t := &Table{ix: ix, f: f}
	t.refs.Store(1)
	return t
}

// OpenTable reads the whole snapshot file f once, sequentially, verifying
// its header, every block CRC and the trailer (entry count and SHA-256)
// and checking that its entries are strictly increasing in (bucket, key)
// order, and returns a Table of it holding one reference. Damage gives an
// error matching ErrCorrupt, a file out of order one matching ErrUnordered.
// The Table owns f; on error f is not closed.
func OpenTable(f TableFile) (*Table, error) {
	hint := 0
	switch sized := f.(type) {
	case interface{ Size() int64 }: // bytes.Reader
		hint = entryHint(f, sized.Size())
	case interface{ Stat() (fs.FileInfo, error) }: // os.File, vfs.File
		if fi, err := sized.Stat(); err == nil {
			hint = entryHint(f, fi.Size())
		}
	}
	ix, _, err := readIndex(io.NewSectionReader(f, 0, 1<<62), hint)
	if err != nil {
		return nil, err
	}
	return NewTable(f, ix), nil
}

// Header returns the file's header.
func (t *Table) Header() Header { return t.ix.hdr }

// Entries returns the number of entries in the file, tombstones included.
func (t *Table) Entries() uint64 { return t.ix.entries }

// Buckets names the buckets the file holds entries of, in order.
func (t *Table) Buckets() []string { return t.ix.buckets }

// IndexBytes returns the memory the Table's index holds (block metadata,
// first keys and Bloom filter); the block cache adds up to two blocks.
func (t *Table) IndexBytes() int { return t.ix.Bytes() }

// Retain adds a reference to the Table.
func (t *Table) Retain() {
	if t.refs.Add(1) <= 1 {
		panic("checkpoint: Retain of a released Table")
	}
}

// Release drops a reference; the last one closes the file. Releasing more
// references than were held panics.
func (t *Table) Release() {
	switch n := t.refs.Add(-1); {
	case n == 0:
		t.f.Close() // read only: nothing to lose
	case n < 0:
		panic("checkpoint: Table released more often than retained")
	}
}

// Get returns the entry of key in bucket: found is false if the file holds
// none, deleted is true if it holds a tombstone. value is valid until the
// next call to Get. A damaged block gives an error matching ErrCorrupt. Get
// allocates nothing once its cache buffers have grown.
func (t *Table) Get(bucket string, key []byte) (value []byte, deleted, found bool, err error) {
	return t.get(keyHash(bucket, key), stringBytes(bucket), key, &t.cache)
}

// get is Get with the key's hash computed and a caller's block cache.
func (t *Table) get(h uint64, bucket, key []byte, c *blockCache) (value []byte, deleted, found bool, err error) {
	if !t.ix.filter.mayContain(h) {
		return nil, false, false, nil
	}
	i := t.ix.search(bucket, key)
	if i < 0 {
		return nil, false, false, nil
	}
	blk, err := c.load(t, i)
	if err != nil {
		return nil, false, false, err
	}
	value, deleted, found = blk.find(bucket, key)
	return value, deleted, found, nil
}

// Scan calls fn for the entries of bucket with key ≥ from, tombstones
// included, in key order, until fn returns false. It reads the blocks
// sequentially from the first that may hold from, each verified. fn's
// slices are valid only during the call. Scan uses buffers of its own, so
// it may run concurrently with Get and other Scans.
func (t *Table) Scan(bucket string, from []byte, fn func(key, value []byte, deleted bool) bool) error {
	it := t.scan(stringBytes(bucket), from)
	defer it.close()
	for {
		if more, err := it.next(); !more || err != nil {
			return err
		}
		if !fn(it.key, it.value, it.deleted) {
			return nil
		}
	}
}

// tableIter walks the entries of one bucket of a Table from a key on.
type tableIter struct {
	t            *Table
	bucket, from []byte
	block        int    // the block data is from
	data         []byte // its entries not yet returned
	bb           *blockBuffers
	done         bool

	key, value []byte // the current entry, valid until next
	deleted    bool
}

func (t *Table) scan(bucket, from []byte) *tableIter {
	return &tableIter{t: t, bucket: bucket, from: from, block: max(t.ix.search(bucket, from), 0) - 1}
}

// next moves to the next entry of the bucket ≥ from; false at the end.
func (it *tableIter) next() (bool, error) {
	for !it.done {
		if len(it.data) == 0 {
			if it.block+1 >= len(it.t.ix.blocks) {
				break
			}
			it.block++
			if it.bb == nil {
				it.bb = scanBuffers.Get().(*blockBuffers)
			}
			data, err := it.t.readBlock(it.block, it.bb)
			if err != nil {
				it.done = true
				return false, err
			}
			it.data = data
		}
		b, k, v, del, n, ok := nextEntry(it.data)
		if !ok {
			it.done = true
			return false, corruptf("checkpoint: snapshot block at offset %d: bad entry", it.t.ix.blocks[it.block].off)
		}
		it.data = it.data[n:]
		if c := bytes.Compare(b, it.bucket); c > 0 {
			break
		} else if c < 0 || bytes.Compare(k, it.from) < 0 {
			continue
		}
		it.key, it.value, it.deleted = k, v, del
		return true, nil
	}
	// At the end: the buffers go back now, not when the merge of a long
	// chain ends.
	it.done = true
	it.close()
	return false, nil
}

func (it *tableIter) close() {
	if it.bb != nil {
		scanBuffers.Put(it.bb)
		it.bb, it.data, it.key, it.value = nil, nil, nil, nil
	}
}

// stringBytes returns the bytes of s without copying, for comparisons;
// they must not be modified.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// String describes the Table for errors and logs.
func (t *Table) String() string {
	return fmt.Sprintf("table(%v checkpoint %d, %d entries, %d blocks)", t.ix.hdr.Kind, t.ix.hdr.CheckpointID, t.ix.entries, len(t.ix.blocks))
}
