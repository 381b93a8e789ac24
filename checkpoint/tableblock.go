package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
)

// blockBuffers hold one block as read (rec) and decompressed (raw); reused.
type blockBuffers struct {
	rec, raw []byte
}

// readBlock reads block i of t's file with one ReadAt, verifies its CRC and
// returns its entries, decompressed when stored compressed. The result
// aliases bb. Damage (a CRC mismatch, a record that does not match the
// index, a frame that does not decompress) gives an error matching
// ErrCorrupt.
func (t *Table) readBlock(i int, bb *blockBuffers) ([]byte, error) {
	m := t.ix.blocks[i]
	if cap(bb.rec) < int(m.size) {
		bb.rec = make([]byte, m.size)
	}
	rec := bb.rec[:m.size]
	if n, err := t.f.ReadAt(rec, m.off); n < len(rec) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, corruptf("checkpoint: snapshot block at offset %d: truncated", m.off)
		}
		return nil, fmt.Errorf("checkpoint: read snapshot block at offset %d: %w", m.off, err)
	}
	body := rec[:len(rec)-crcSize]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(rec[len(body):]) {
		return nil, corruptf("checkpoint: snapshot block at offset %d: checksum mismatch", m.off)
	}
	// The CRC matched, so the header is as written; these checks catch an
	// index that does not match the file.
	hdr := blockHeaderSize
	if rec[0] == typeZstdBlock {
		hdr = zstdHeaderSize
	}
	if (rec[0] != typeBlock && rec[0] != typeZstdBlock) || len(body) < hdr ||
		int(binary.BigEndian.Uint32(rec[1:5])) != len(body)-hdr {
		return nil, corruptf("checkpoint: snapshot block at offset %d: record does not match the index", m.off)
	}
	payload := body[hdr:]
	if rec[0] == typeBlock {
		return payload, nil
	}
	rawLen := binary.BigEndian.Uint32(rec[9:13])
	if rawLen == 0 || rawLen > maxBlockPayload {
		return nil, corruptf("checkpoint: snapshot block at offset %d: bad raw length %d", m.off, rawLen)
	}
	if cap(bb.raw) < int(rawLen) {
		bb.raw = make([]byte, 0, rawLen)
	}
	raw, err := zstdDecoder().DecodeAll(payload, bb.raw[:0])
	if err != nil || len(raw) != int(rawLen) {
		return nil, corruptf("checkpoint: snapshot block at offset %d: does not decompress to its %d bytes: %v", m.off, rawLen, err)
	}
	bb.raw = raw
	return raw, nil
}

// scanBuffers recycles the block buffers of scans, which may run on
// several goroutines at once.
var scanBuffers = sync.Pool{New: func() any { return new(blockBuffers) }}

// blockCacheSlots is how many decompressed blocks a blockCache keeps: a
// clustered run of misses in one block decompresses it once.
const blockCacheSlots = 2

// blockCache keeps the last blocks a reader (a Table's Get, or a Chain's)
// decompressed, least recently used replaced first. The zero value is
// empty. It is not safe for concurrent use.
type blockCache struct {
	slots [blockCacheSlots]cachedBlock
	clock uint64
}

type cachedBlock struct {
	t     *Table // nil: empty
	block int
	data  []byte   // entries of the block, aliasing bb
	offs  []uint32 // offset in data of each entry, for a binary search
	used  uint64
	bb    blockBuffers
}

// load returns block i of t, from the cache or read. A block read is
// walked once to find its entries, so each Get of a cached block is a
// binary search rather than a scan of some 400 entries.
func (c *blockCache) load(t *Table, i int) (*cachedBlock, error) {
	c.clock++
	victim := &c.slots[0]
	for k := range c.slots {
		s := &c.slots[k]
		if s.t == t && s.block == i {
			s.used = c.clock
			return s, nil
		}
		if s.used < victim.used {
			victim = s
		}
	}
	victim.t = nil
	data, err := t.readBlock(i, &victim.bb)
	if err != nil {
		return nil, err
	}
	victim.offs = victim.offs[:0]
	for off := 0; off < len(data); {
		_, _, _, _, n, ok := nextEntry(data[off:])
		if !ok {
			return nil, corruptf("checkpoint: snapshot block at offset %d: bad entry", t.ix.blocks[i].off)
		}
		victim.offs = append(victim.offs, uint32(off))
		off += n
	}
	victim.t, victim.block, victim.data, victim.used = t, i, data, c.clock
	return victim, nil
}

// find returns the entry of (bucket, key) in the block.
func (b *cachedBlock) find(bucket, key []byte) (value []byte, deleted, found bool) {
	lo, hi := 0, len(b.offs) // entries before lo are < (bucket, key), from hi on ≥
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		eb, ek, _, _, _, _ := nextEntry(b.data[b.offs[mid]:])
		if compareKeys(eb, ek, bucket, key) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(b.offs) {
		return nil, false, false
	}
	eb, ek, v, del, _, _ := nextEntry(b.data[b.offs[lo]:])
	if compareKeys(eb, ek, bucket, key) != 0 {
		return nil, false, false
	}
	return v, del, true
}

// forget drops the blocks of t, so a released Table is not kept reachable.
func (c *blockCache) forget(t *Table) {
	for k := range c.slots {
		if c.slots[k].t == t {
			c.slots[k].t, c.slots[k].data, c.slots[k].used = nil, nil, 0
		}
	}
}

// nextEntry decodes the entry at the start of b and returns it and its
// length; ok is false if b does not start with a well-formed entry. The
// slices alias b.
func nextEntry(b []byte) (bucket, key, value []byte, deleted bool, n int, ok bool) {
	if len(b) == 0 || b[0] > flagTombstone {
		return nil, nil, nil, false, 0, false
	}
	deleted = b[0] == flagTombstone
	off := 1
	field := func() []byte {
		l, k := binary.Uvarint(b[off:])
		if k <= 0 || l > uint64(len(b)-off-k) {
			ok = false
			return nil
		}
		off += k
		f := b[off : off+int(l) : off+int(l)]
		off += int(l)
		return f
	}
	ok = true
	bucket = field()
	if ok {
		key = field()
	}
	if ok && !deleted {
		value = field()
	}
	return bucket, key, value, deleted, off, ok
}
