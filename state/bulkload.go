package state

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"

	bolt "go.etcd.io/bbolt"
)

// bulkLoader writes a bbolt database file directly, page by page, from
// entries that arrive in strictly increasing (bucket, key) order — the order
// of a full checkpoint — instead of putting them one by one through bbolt
// transactions, which costs a B-tree search, a cursor and a key copy per
// entry (~1 µs: about 3 s for the 2M entries of 1M open windows). Here an
// entry costs a copy into the page being filled, so a restore is about as
// fast as reading the checkpoint.
//
// The file is bbolt's format version 2 (go.etcd.io/bbolt
// internal/common/page.go, meta.go, bucket.go; stable since bbolt 1.0),
// laid out as bbolt's own init does plus full pages:
//
//	page 0, 1   meta (txid 0 and 1): magic 0xED0CDAED, version 2, page size,
//	            root bucket {root page, sequence 0}, freelist page 2,
//	            high-water page id, txid, FNV-64a checksum
//	page 2      an empty freelist page
//	page 3…     each bucket's B-tree, leaves first, written bottom-up as
//	            pages fill (a page holding one entry larger than a page
//	            continues on overflow pages), then the root bucket's tree,
//	            whose entries are the buckets (flag 0x01, value {root, 0})
//
// Every page starts with {id uint64, flags uint16, count uint16, overflow
// uint32}; leaf elements are {flags, pos, ksize, vsize uint32}, branch
// elements {pos, ksize uint32, pgid uint64}, pos counting from the element
// itself; all little-endian, as on every platform Eddy runs on. Tests open
// the result with bbolt and run its consistency check (Tx.Check).
type bulkLoader struct {
	w        *bufio.Writer
	f        *os.File
	pageSize int
	maxPages uint64
	next     uint64 // next free page id

	bucket     []byte       // bucket being written
	tree       pageTree     // its pages
	root       pageTree     // the root bucket: one entry per bucket
	lastKey    []byte       // last key of bucket, for the order check
	keyScratch [16]byte     // a bucket's value in the root bucket
	keys       int          // entries written
	page       []byte       // scratch for one page
	errFull    func() error // the ErrFull error for the caller's file
}

// pageTree builds one B-tree bottom-up: levels[0] collects leaf entries,
// levels[i] the first keys and page ids of level i-1's written pages.
type pageTree struct {
	levels []pendingPage
}

// pendingPage is the page being filled at one level of a tree.
type pendingPage struct {
	elems   []pendingElem
	data    []byte // keys and values, in element order
	written int    // pages already written at this level
}

type pendingElem struct {
	flags        uint32
	ksize, vsize uint32
	pgid         uint64 // branch elements
}

const (
	pageHeaderSize = 16
	elemSize       = 16 // both leaf and branch elements

	pageFlagBranch   = 0x01
	pageFlagLeaf     = 0x02
	pageFlagMeta     = 0x04
	pageFlagFreelist = 0x10
	leafFlagBucket   = 0x01

	boltMagic   = 0xED0CDAED
	boltVersion = 2
)

// newBulkLoader starts a database file at f (empty) of at most maxSize
// bytes.
func newBulkLoader(f *os.File, maxSize int, errFull func() error) (*bulkLoader, error) {
	ps := os.Getpagesize()
	if _, err := f.Seek(int64(3*ps), 0); err != nil { // pages 0-2 are written last
		return nil, fmt.Errorf("state: restore: %w", err)
	}
	return &bulkLoader{w: bufio.NewWriterSize(f, 1<<20), f: f, pageSize: ps, maxPages: uint64(maxSize / ps),
		next: 3, page: make([]byte, ps), errFull: errFull}, nil
}

var zeroPage [4096]byte

// add appends an entry. ok is false, with nothing written, when the entry
// does not continue the strictly increasing order: the caller must finish
// the file and write the rest through bbolt.
func (bl *bulkLoader) add(bucket, key, value []byte) (ok bool, err error) {
	if c := bytes.Compare(bucket, bl.bucket); bl.bucket == nil || c > 0 {
		if bl.bucket != nil {
			if err := bl.endBucket(); err != nil {
				return false, err
			}
		}
		bl.bucket = append(bl.bucket[:0], bucket...)
		bl.lastKey = bl.lastKey[:0]
	} else if c < 0 || bytes.Compare(key, bl.lastKey) <= 0 {
		return false, nil
	}
	if len(key) == 0 || len(key) > bolt.MaxKeySize {
		return false, nil // bbolt refuses such keys: let it say so
	}
	bl.lastKey = append(bl.lastKey[:0], key...)
	bl.keys++
	return true, bl.tree.addLeaf(bl, 0, key, value)
}

// addLeaf adds a key/value (flags: leafFlagBucket for a bucket) to level 0.
func (t *pageTree) addLeaf(bl *bulkLoader, flags uint32, key, value []byte) error {
	if len(t.levels) == 0 {
		t.levels = append(t.levels, pendingPage{})
	}
	return t.add(bl, 0, pendingElem{flags: flags, ksize: uint32(len(key)), vsize: uint32(len(value))}, key, value)
}

// add puts an element on level i, writing the page first if it is full.
func (t *pageTree) add(bl *bulkLoader, i int, e pendingElem, key, value []byte) error {
	p := &t.levels[i]
	size := pageHeaderSize + (len(p.elems)+1)*elemSize + len(p.data) + len(key) + len(value)
	if len(p.elems) > 0 && (size > bl.pageSize || len(p.elems) == 0xffff) {
		if err := t.flush(bl, i); err != nil {
			return err
		}
		p = &t.levels[i]
	}
	p.elems = append(p.elems, e)
	p.data = append(p.data, key...)
	p.data = append(p.data, value...)
	return nil
}

// flush writes level i's page and adds it to level i+1.
func (t *pageTree) flush(bl *bulkLoader, i int) error {
	p := &t.levels[i]
	flags := uint16(pageFlagBranch)
	if i == 0 {
		flags = pageFlagLeaf
	}
	id, err := bl.writePage(flags, p.elems, p.data)
	if err != nil {
		return err
	}
	// firstKey stays valid when t.levels grows: the copied page header
	// still points at the same data array, which add copies from.
	firstKey := p.data[:p.elems[0].ksize]
	if i+1 == len(t.levels) {
		t.levels = append(t.levels, pendingPage{})
	}
	if err := t.add(bl, i+1, pendingElem{ksize: uint32(len(firstKey)), pgid: id}, firstKey, nil); err != nil {
		return err
	}
	// Re-take the pointer: the append above or add's own flushes may have
	// moved t.levels.
	p = &t.levels[i]
	p.elems, p.data = p.elems[:0], p.data[:0]
	p.written++
	return nil
}

// finish writes the remaining pages and returns the root page id: the one
// page of the top level.
func (t *pageTree) finish(bl *bulkLoader) (uint64, error) {
	if len(t.levels) == 0 {
		return bl.writePage(pageFlagLeaf, nil, nil) // an empty bucket
	}
	for i := 0; ; i++ {
		p := &t.levels[i]
		if i == len(t.levels)-1 && p.written == 0 {
			// The top: one page, the root.
			flags := uint16(pageFlagBranch)
			if i == 0 {
				flags = pageFlagLeaf
			}
			if i > 0 && len(p.elems) == 1 {
				return p.elems[0].pgid, nil // a single child is the root itself
			}
			return bl.writePage(flags, p.elems, p.data)
		}
		if len(p.elems) > 0 {
			if err := t.flush(bl, i); err != nil {
				return 0, err
			}
		}
	}
}

func (t *pageTree) reset() {
	for i := range t.levels {
		p := &t.levels[i]
		p.elems, p.data, p.written = p.elems[:0], p.data[:0], 0
	}
	t.levels = t.levels[:0]
}

// endBucket writes the current bucket's tree and records it in the root
// bucket.
func (bl *bulkLoader) endBucket() error {
	root, err := bl.tree.finish(bl)
	if err != nil {
		return err
	}
	bl.tree.reset()
	binary.LittleEndian.PutUint64(bl.keyScratch[0:], root)
	binary.LittleEndian.PutUint64(bl.keyScratch[8:], 0) // sequence
	return bl.root.addLeaf(bl, leafFlagBucket, bl.bucket, bl.keyScratch[:])
}

// writePage writes a leaf or branch page of elems whose keys (and values)
// are data, in order, and returns its id.
func (bl *bulkLoader) writePage(flags uint16, elems []pendingElem, data []byte) (uint64, error) {
	size := pageHeaderSize + len(elems)*elemSize + len(data)
	n := (size + bl.pageSize - 1) / bl.pageSize
	if n == 0 {
		n = 1
	}
	id := bl.next
	if id+uint64(n) > bl.maxPages {
		return 0, bl.errFull()
	}
	bl.next += uint64(n)
	buf := bl.page[:0]
	buf = binary.LittleEndian.AppendUint64(buf, id)
	buf = binary.LittleEndian.AppendUint16(buf, flags)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(elems)))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(n-1))
	dataAt := pageHeaderSize + len(elems)*elemSize
	off := 0
	for i, e := range elems {
		pos := uint32(dataAt + off - (pageHeaderSize + i*elemSize))
		if flags == pageFlagLeaf {
			buf = binary.LittleEndian.AppendUint32(buf, e.flags)
			buf = binary.LittleEndian.AppendUint32(buf, pos)
			buf = binary.LittleEndian.AppendUint32(buf, e.ksize)
			buf = binary.LittleEndian.AppendUint32(buf, e.vsize)
		} else {
			buf = binary.LittleEndian.AppendUint32(buf, pos)
			buf = binary.LittleEndian.AppendUint32(buf, e.ksize)
			buf = binary.LittleEndian.AppendUint64(buf, e.pgid)
		}
		off += int(e.ksize + e.vsize)
	}
	buf = append(buf, data...)
	for len(buf) < n*bl.pageSize {
		buf = append(buf, zeroPage[:min(n*bl.pageSize-len(buf), len(zeroPage))]...)
	}
	if _, err := bl.w.Write(buf); err != nil {
		return 0, fmt.Errorf("state: restore: write %s: %w", bl.f.Name(), err)
	}
	bl.page = buf[:0]
	return id, nil
}

// finish writes the last bucket, the root bucket and the meta pages; the
// file is then a complete database for bolt.Open (its writes are not
// synced: the working file is disposable).
func (bl *bulkLoader) finish() error {
	if bl.bucket != nil {
		if err := bl.endBucket(); err != nil {
			return err
		}
	}
	root, err := bl.root.finish(bl)
	if err != nil {
		return err
	}
	if err := bl.w.Flush(); err != nil {
		return fmt.Errorf("state: restore: write %s: %w", bl.f.Name(), err)
	}
	head := make([]byte, 3*bl.pageSize)
	for txid := range uint64(2) {
		p := head[int(txid)*bl.pageSize:]
		binary.LittleEndian.PutUint64(p[0:], txid) // page id
		binary.LittleEndian.PutUint16(p[8:], pageFlagMeta)
		m := p[pageHeaderSize:]
		binary.LittleEndian.PutUint32(m[0:], boltMagic)
		binary.LittleEndian.PutUint32(m[4:], boltVersion)
		binary.LittleEndian.PutUint32(m[8:], uint32(bl.pageSize))
		binary.LittleEndian.PutUint32(m[12:], 0) // flags
		binary.LittleEndian.PutUint64(m[16:], root)
		binary.LittleEndian.PutUint64(m[24:], 0) // root sequence
		binary.LittleEndian.PutUint64(m[32:], 2) // freelist page
		binary.LittleEndian.PutUint64(m[40:], bl.next)
		binary.LittleEndian.PutUint64(m[48:], txid)
		h := fnv.New64a()
		h.Write(m[:56])
		binary.LittleEndian.PutUint64(m[56:], h.Sum64())
	}
	fl := head[2*bl.pageSize:]
	binary.LittleEndian.PutUint64(fl[0:], 2)
	binary.LittleEndian.PutUint16(fl[8:], pageFlagFreelist)
	if _, err := bl.f.WriteAt(head, 0); err != nil {
		return fmt.Errorf("state: restore: write %s: %w", bl.f.Name(), err)
	}
	return nil
}
