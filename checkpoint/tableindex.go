package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"io"
	"math"
	"unsafe"
)

// ErrUnordered is matched (errors.Is) by the error of opening a Table on a
// snapshot file whose entries are not strictly increasing in (bucket, key)
// order (bytes.Compare on the bucket, then on the key), and of a Writer's
// Index for such a file. The file itself is valid (Reader applies it in
// file order); it only cannot be searched, so the caller loads it instead.
// State's snapshots are always ordered.
var ErrUnordered = errors.New("checkpoint: snapshot entries not in (bucket, key) order")

// TableIndex is what a Table keeps in memory of its snapshot file: per
// block its offset and record size and its first (bucket, key), the first
// keys copied into one arena, and a Bloom filter over every entry. It is
// immutable once built.
type TableIndex struct {
	hdr     Header
	entries uint64
	size    int64 // of the file
	blocks  []blockMeta
	arena   []byte // the first bucket then key of each block, back to back
	filter  bloom
	buckets []string // of the entries, in order
}

// blockMeta locates one block record of the file.
type blockMeta struct {
	off    int64  // of the record's type byte
	size   uint32 // of the whole record: header, payload and CRC
	key    uint32 // arena offset of the first entry's bucket; its key ends where the next block's starts
	bucket uint32 // length of that bucket
}

// Header returns the file's header.
func (ix *TableIndex) Header() Header { return ix.hdr }

// Entries returns the number of entries in the file.
func (ix *TableIndex) Entries() uint64 { return ix.entries }

// Buckets names the buckets the file holds entries of, in order.
func (ix *TableIndex) Buckets() []string { return ix.buckets }

// Size returns the file's size in bytes.
func (ix *TableIndex) Size() int64 { return ix.size }

// Bytes returns the memory the index holds: block metadata, first keys and
// Bloom filter.
func (ix *TableIndex) Bytes() int {
	return int(unsafe.Sizeof(*ix)) + cap(ix.blocks)*int(unsafe.Sizeof(blockMeta{})) + cap(ix.arena) + 8*cap(ix.filter.words)
}

// firstKey returns block i's first bucket and key.
func (ix *TableIndex) firstKey(i int) (bucket, key []byte) {
	end := uint32(len(ix.arena))
	if i+1 < len(ix.blocks) {
		end = ix.blocks[i+1].key
	}
	m := ix.blocks[i]
	return ix.arena[m.key : m.key+m.bucket], ix.arena[m.key+m.bucket : end]
}

// search returns the last block whose first entry is ≤ (bucket, key), or -1
// if the file's first entry is after it: the only block that may hold it.
func (ix *TableIndex) search(bucket, key []byte) int {
	lo, hi := 0, len(ix.blocks) // invariant: blocks before lo are ≤, from hi on >
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		b, k := ix.firstKey(mid)
		if compareKeys(b, k, bucket, key) <= 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// compareKeys orders (bucket, key) pairs as the writer of a Table's file
// must have: by bucket, then by key.
func compareKeys(bucketA, keyA, bucketB, keyB []byte) int {
	if c := bytes.Compare(bucketA, bucketB); c != 0 {
		return c
	}
	return bytes.Compare(keyA, keyB)
}

// indexBuilder collects a TableIndex from a file's entries in file order:
// the Writer's as it writes them, or OpenTable's as it reads them. Its
// buffers are reused from one file to the next; nothing is allocated per
// entry beyond the amortized growth of the hash list.
type indexBuilder struct {
	hdr      Header
	ix       *TableIndex
	hashes   []uint64 // of every entry, for the filter: its size is known only at the end
	last     []byte   // the previous entry's bucket then key
	lastB    int      // length of its bucket
	lastHash uint64   // hash of that bucket
	pending  bool     // a block started and its first entry is not in yet
	err      error
}

func (b *indexBuilder) reset(hdr Header) {
	b.hdr, b.ix = hdr, &TableIndex{hdr: hdr}
	b.hashes, b.last, b.lastB, b.pending, b.err = b.hashes[:0], b.last[:0], -1, false, nil
}

// startBlock records a block whose record begins at off.
func (b *indexBuilder) startBlock(off int64) {
	b.ix.blocks = append(b.ix.blocks, blockMeta{off: off})
	b.pending = true
}

// endBlock records the size of the last block's record.
func (b *indexBuilder) endBlock(size int64) {
	if n := len(b.ix.blocks); n > 0 {
		b.ix.blocks[n-1].size = uint32(size)
	}
}

// add records an entry; an entry not after the previous one fails the
// index (once: later entries are ignored).
func (b *indexBuilder) add(bucket, key []byte) {
	if b.err != nil {
		return
	}
	if b.lastB >= 0 {
		if c := compareKeys(b.last[:b.lastB], b.last[b.lastB:], bucket, key); c >= 0 {
			b.err = fmt.Errorf("%w: entry %d (bucket %q) is not after the one before it", ErrUnordered, len(b.hashes), bucket)
			return
		}
	}
	// Entries of one bucket come together: hash and name each bucket once.
	if b.lastB < 0 || !bytes.Equal(b.last[:b.lastB], bucket) {
		b.lastHash = maphash.Bytes(bloomSeed, bucket)
		b.ix.buckets = append(b.ix.buckets, string(bucket))
	}
	b.hashes = append(b.hashes, mixHash(b.lastHash, key))
	b.last = append(append(b.last[:0], bucket...), key...)
	b.lastB = len(bucket)
	if b.pending {
		b.pending = false
		m := &b.ix.blocks[len(b.ix.blocks)-1]
		m.key, m.bucket = uint32(len(b.ix.arena)), uint32(len(bucket))
		b.ix.arena = append(append(b.ix.arena, bucket...), key...)
	}
}

// finish returns the index of a file of size bytes, trimmed to its length,
// and forgets it.
func (b *indexBuilder) finish(size int64) (*TableIndex, error) {
	ix := b.ix
	b.ix = nil
	if b.err != nil {
		return nil, b.err
	}
	if ix == nil {
		return nil, errors.New("checkpoint: no index collected")
	}
	if uint64(len(ix.arena)) > math.MaxUint32 {
		return nil, fmt.Errorf("checkpoint: index of %d bytes of first keys exceeds 4 GiB", len(ix.arena))
	}
	ix.entries, ix.size = uint64(len(b.hashes)), size
	ix.blocks = append([]blockMeta(nil), ix.blocks...)
	ix.arena = append([]byte(nil), ix.arena...)
	ix.filter = newBloom(b.hashes)
	return ix, nil
}

// readIndex reads a whole snapshot file from r and builds its index,
// verifying every block CRC and the trailer (entry count, SHA-256) as
// Reader does. It returns the Reader, whose FileSHA256 is then valid, so a
// caller can compare the file with its FileRef. A file out of order gives
// an error matching ErrUnordered, damage one matching ErrCorrupt.
//
// entries, if not 0, is the number of entries the file is expected to hold
// (entryHint), so the hashes of a large file are not copied as they grow.
func readIndex(r io.Reader, entries int) (*TableIndex, *Reader, error) {
	sr, err := NewReader(r)
	if err != nil {
		return nil, nil, err
	}
	var b indexBuilder
	b.hashes = make([]uint64, 0, entries)
	b.reset(sr.Header())
	seen := 0
	for {
		e, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if sr.blocks != seen {
			// Next has read the whole record of a new block.
			seen = sr.blocks
			b.startBlock(sr.blockStart)
			b.endBlock(sr.offset - sr.blockStart)
		}
		if b.add(e.Bucket, e.Key); b.err != nil {
			return nil, nil, b.err
		}
	}
	_, size := sr.FileSHA256(nil)
	ix, err := b.finish(size)
	return ix, sr, err
}

// entryHint returns the entry count the trailer of the file of size bytes
// records, or 0 if it does not read as a trailer. It is only a hint: the
// full read verifies the trailer. It is bounded by the size a file of that
// many smallest entries (3 bytes each) would have, compressed 64×, so a
// damaged count does not allocate gigabytes.
func entryHint(r io.ReaderAt, size int64) int {
	var t [trailerSize]byte
	if size < headerSize+trailerSize {
		return 0
	}
	if _, err := r.ReadAt(t[:], size-trailerSize); err != nil || t[0] != typeTrailer ||
		crc32.Checksum(t[:41], castagnoli) != binary.BigEndian.Uint32(t[41:45]) {
		return 0
	}
	return int(min(binary.BigEndian.Uint64(t[1:9]), uint64(size)*64/3))
}
