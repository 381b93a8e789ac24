package checkpoint

// Snapshot file format, version 2.
//
// A snapshot file holds the entries of one task's state for one checkpoint:
// either all of it (full) or the entries changed since the parent checkpoint,
// deletions included (incremental). The format is portable: every integer has
// a fixed byte order (big-endian) or is an unsigned varint
// (encoding/binary.Uvarint), so a file written on armv7 restores on arm64 or
// amd64. Blocks are zstd-compressed when that makes them smaller: every
// checkpoint writes its snapshot to the device, and with all keys hot
// (every key changed since the last checkpoint) that is the whole state
// each time, whose repetitive window keys and accumulators compress 3-5×.
//
// A file is a header, zero or more blocks, and a trailer, with nothing after
// the trailer:
//
//	header (24 bytes)
//	  magic       8 bytes  "EDDYSNAP"
//	  version     2 bytes  SnapshotVersion
//	  kind        1 byte   1 = full, 2 = incremental
//	  reserved    1 byte   0
//	  checkpoint  8 bytes  checkpoint id
//	  crc         4 bytes  CRC-32C (Castagnoli) of the 20 bytes above
//
//	block (13 bytes + payload)
//	  type        1 byte   0x01
//	  length      4 bytes  payload length, 1 ≤ length ≤ maxBlockPayload
//	  count       4 bytes  entries in the payload, ≥ 1
//	  payload     length bytes: count entries back to back
//	  crc         4 bytes  CRC-32C of type, length, count and payload
//
//	compressed block (17 bytes + stored payload)
//	  type        1 byte   0x03
//	  length      4 bytes  stored (compressed) payload length, ≥ 1
//	  count       4 bytes  entries in the payload, ≥ 1
//	  raw length  4 bytes  payload length once decompressed, 1 ≤ raw ≤ maxBlockPayload
//	  payload     length bytes: one zstd frame of the raw payload
//	  crc         4 bytes  CRC-32C of type, length, count, raw length and payload
//
//	entry
//	  flags       1 byte   0 = put, 1 = tombstone (the key was deleted)
//	  bucket      uvarint length, then the bytes
//	  key         uvarint length, then the bytes
//	  value       uvarint length, then the bytes (puts only)
//
//	trailer (45 bytes)
//	  type        1 byte   0x02
//	  entries     8 bytes  number of entries in the file
//	  sha256     32 bytes  SHA-256 of every byte before the trailer
//	  crc         4 bytes  CRC-32C of type, entries and sha256
//
// The per-block CRC localizes damage; the trailer proves the file is whole (a
// file cut at a block boundary has valid blocks but no trailer) and its
// SHA-256 covers the header and the block order. Entries are applied in file
// order, so a later entry for the same bucket and key wins.

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// SnapshotVersion is the snapshot format version this package writes, and
// the only one it reads: until the first tagged release a change to the
// layout raises it and drops the reading of the previous one.
const SnapshotVersion = 2

const (
	snapshotMagic   = "EDDYSNAP"
	headerSize      = 24
	blockHeaderSize = 9
	crcSize         = 4
	trailerSize     = 45
	typeBlock       = 0x01
	typeTrailer     = 0x02
	typeZstdBlock   = 0x03
	zstdHeaderSize  = blockHeaderSize + 4 // and the raw length
	flagPut         = 0
	flagTombstone   = 1

	// blockTarget is the payload size at which the writer closes a block.
	blockTarget = 32 << 10
	// maxBlockPayload bounds a block, and so a single entry, so a corrupt
	// length cannot make the reader allocate gigabytes.
	maxBlockPayload = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The zstd coders are shared by every snapshot writer and reader of the
// process (EncodeAll and DecodeAll are safe for concurrent use), created on
// first use, with windows no larger than a block (a smaller one made
// compression five times slower).
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(blockTarget), zstd.WithLowerEncoderMem(true),
			zstd.WithEncoderCRC(false)) // the block CRC covers the frame
		if err != nil {
			panic(err) // only for invalid options
		}
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(maxBlockPayload))
		if err != nil {
			panic(err)
		}
		return d
	})
)

// Header is the decoded header of a snapshot file.
type Header struct {
	Version      uint16
	Kind         Kind // KindFull or KindIncremental
	CheckpointID uint64
}

// Writer streams entries into a snapshot file. It buffers one block (about
// 32 KiB) and allocates nothing per entry. It is not safe for concurrent use.
// Errors are sticky: after a failed write every method returns the first
// error. The caller must call Close to write the trailer; a file without one
// does not verify.
type Writer struct {
	w     io.Writer
	sha   hash.Hash
	buf   []byte // pending bytes: the header (until the first flush) and the open block
	zbuf  []byte // the open block's payload compressed, reused
	block int    // offset in buf of the open block's header, or -1 when none is open
	count uint32 // entries in the open block
	total uint64
	size  int64
	err   error
	done  bool
	// index, when collecting (CollectIndex), builds the file's TableIndex.
	index     indexBuilder
	indexing  bool
	indexDone *TableIndex
	indexErr  error
}

// NewWriter returns a Writer of a snapshot of the given kind (KindFull or
// KindIncremental) for checkpoint id that writes to w. Nothing reaches w
// before the first block is full or Close is called.
func NewWriter(w io.Writer, kind Kind, checkpointID uint64) *Writer {
	sw := &Writer{sha: sha256.New(), buf: make([]byte, 0, blockTarget+4<<10)}
	sw.Reset(w, kind, checkpointID)
	return sw
}

// Reset makes the Writer write a new file to w, reusing its buffers.
func (sw *Writer) Reset(w io.Writer, kind Kind, checkpointID uint64) {
	sw.w, sw.block, sw.count, sw.total, sw.size, sw.err, sw.done = w, -1, 0, 0, 0, nil, false
	sw.indexing, sw.indexDone, sw.indexErr = false, nil, nil
	sw.index.hdr = Header{Version: SnapshotVersion, Kind: kind, CheckpointID: checkpointID}
	sw.sha.Reset()
	sw.buf = sw.buf[:0]
	if kind != KindFull && kind != KindIncremental {
		sw.err = fmt.Errorf("checkpoint: snapshot kind must be full or incremental, not %v", kind)
		return
	}
	sw.buf = append(sw.buf, snapshotMagic...)
	sw.buf = binary.BigEndian.AppendUint16(sw.buf, SnapshotVersion)
	sw.buf = append(sw.buf, byte(kind), 0)
	sw.buf = binary.BigEndian.AppendUint64(sw.buf, checkpointID)
	sw.buf = binary.BigEndian.AppendUint32(sw.buf, crc32.Checksum(sw.buf, castagnoli))
}

// Put adds a live entry. The slices are copied before Put returns.
func (sw *Writer) Put(bucket, key, value []byte) error { return sw.Add(bucket, key, value, false) }

// Delete adds a tombstone: applying the file deletes bucket/key.
func (sw *Writer) Delete(bucket, key []byte) error { return sw.Add(bucket, key, nil, true) }

// Add adds an entry; a deleted entry is a tombstone and value is ignored.
// Its signature matches the callback of state's snapshot iterators, so
// iter(w.Add) writes a whole snapshot. The slices are copied before Add
// returns.
func (sw *Writer) Add(bucket, key, value []byte, deleted bool) error {
	if sw.err != nil {
		return sw.err
	}
	if sw.done {
		return errors.New("checkpoint: snapshot writer is closed")
	}
	n := 1 + 3*binary.MaxVarintLen64 + len(bucket) + len(key) + len(value)
	if n > maxBlockPayload {
		sw.err = fmt.Errorf("checkpoint: snapshot entry of %d bytes exceeds the %d byte limit", n, maxBlockPayload)
		return sw.err
	}
	if sw.block >= 0 && len(sw.buf)-sw.block-blockHeaderSize+n > blockTarget {
		if err := sw.flush(); err != nil {
			return err
		}
	}
	if sw.block < 0 {
		if sw.indexing {
			sw.index.startBlock(sw.size + int64(len(sw.buf)))
		}
		sw.block = len(sw.buf)
		sw.buf = append(sw.buf, typeBlock, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	if sw.indexing {
		sw.index.add(bucket, key)
	}
	if deleted {
		sw.buf = append(sw.buf, flagTombstone)
	} else {
		sw.buf = append(sw.buf, flagPut)
	}
	sw.buf = binary.AppendUvarint(sw.buf, uint64(len(bucket)))
	sw.buf = append(sw.buf, bucket...)
	sw.buf = binary.AppendUvarint(sw.buf, uint64(len(key)))
	sw.buf = append(sw.buf, key...)
	if !deleted {
		sw.buf = binary.AppendUvarint(sw.buf, uint64(len(value)))
		sw.buf = append(sw.buf, value...)
	}
	sw.count++
	sw.total++
	return nil
}

// flush closes the open block, if any, compressed when that is smaller,
// and writes every pending byte.
func (sw *Writer) flush() error {
	if sw.block >= 0 {
		b := sw.buf[sw.block:]
		raw := b[blockHeaderSize:]
		sw.zbuf = zstdEncoder().EncodeAll(raw, sw.zbuf[:0])
		if len(sw.zbuf)+zstdHeaderSize-blockHeaderSize < len(raw) {
			sw.buf = append(sw.buf[:sw.block], typeZstdBlock)
			sw.buf = binary.BigEndian.AppendUint32(sw.buf, uint32(len(sw.zbuf)))
			sw.buf = binary.BigEndian.AppendUint32(sw.buf, sw.count)
			sw.buf = binary.BigEndian.AppendUint32(sw.buf, uint32(len(raw)))
			sw.buf = append(sw.buf, sw.zbuf...)
		} else {
			binary.BigEndian.PutUint32(b[1:5], uint32(len(raw)))
			binary.BigEndian.PutUint32(b[5:9], sw.count)
		}
		sw.buf = binary.BigEndian.AppendUint32(sw.buf, crc32.Checksum(sw.buf[sw.block:], castagnoli))
		if sw.indexing {
			sw.index.endBlock(int64(len(sw.buf) - sw.block))
		}
		sw.block, sw.count = -1, 0
	}
	return sw.write()
}

func (sw *Writer) write() error {
	if len(sw.buf) == 0 {
		return nil
	}
	sw.sha.Write(sw.buf)
	n, err := sw.w.Write(sw.buf)
	sw.size += int64(n)
	sw.buf = sw.buf[:0]
	if err != nil {
		sw.err = fmt.Errorf("checkpoint: write snapshot: %w", err)
	}
	return sw.err
}

// Close writes the last block and the trailer. It does not close or sync
// the underlying writer. Close is idempotent after success.
func (sw *Writer) Close() error {
	if sw.err != nil || sw.done {
		return sw.err
	}
	if err := sw.flush(); err != nil {
		return err
	}
	var t [trailerSize]byte
	t[0] = typeTrailer
	binary.BigEndian.PutUint64(t[1:9], sw.total)
	sw.sha.Sum(t[9:9])
	binary.BigEndian.PutUint32(t[41:45], crc32.Checksum(t[:41], castagnoli))
	sw.buf = append(sw.buf, t[:]...)
	sw.done = true
	if err := sw.write(); err != nil {
		return err
	}
	if sw.indexing {
		sw.indexDone, sw.indexErr = sw.index.finish(sw.size)
	}
	return nil
}

// CollectIndex makes the Writer build, as it writes, the TableIndex of the
// file, so a Table of it (NewTable) needs no second read. It must be called
// before the first Add; it costs a hash and a key comparison per entry and
// 8 bytes per entry until Close. A Writer that does not call it pays
// nothing. Reset stops the collection.
func (sw *Writer) CollectIndex() error {
	if sw.total != 0 || sw.done {
		return errors.New("checkpoint: CollectIndex after the first entry")
	}
	if sw.err != nil {
		return sw.err
	}
	sw.indexing = true
	sw.index.reset(sw.index.hdr)
	return nil
}

// Index returns the file's TableIndex, valid after a successful Close of a
// Writer that called CollectIndex. A file whose entries were not strictly
// increasing in (bucket, key) order gives an error matching ErrUnordered
// (the file is still complete and valid).
func (sw *Writer) Index() (*TableIndex, error) {
	switch {
	case !sw.indexing:
		return nil, errors.New("checkpoint: Index without CollectIndex")
	case !sw.done:
		return nil, errors.New("checkpoint: Index before Close")
	}
	return sw.indexDone, sw.indexErr
}

// Count returns the number of entries added so far.
func (sw *Writer) Count() uint64 { return sw.total }

// FileSHA256 appends to dst the SHA-256 of the whole file (trailer
// included: the file's content address). Valid after a successful Close.
func (sw *Writer) FileSHA256(dst []byte) []byte { return sw.sha.Sum(dst) }

// Size returns the number of bytes written to the underlying writer so far;
// after Close it is the file size.
func (sw *Writer) Size() int64 { return sw.size }

// Entry is one decoded snapshot entry. Its slices alias the Reader's buffer
// and are valid only until the next call to Next; copy them to keep them.
type Entry struct {
	Bucket, Key, Value []byte
	Deleted            bool
}

// Reader reads and verifies a snapshot file as a stream: each block's CRC
// before any of its entries is returned, and the trailer (entry count and
// SHA-256) before Next returns io.EOF. Entries of a block that verified are
// returned even if a later block turns out corrupt, so a caller that must not
// half-apply a file verifies it first (VerifySnapshot) or applies into a
// scratch store. Errors that report bad data match ErrCorrupt; errors from the
// underlying reader do not. It is not safe for concurrent use.
type Reader struct {
	r      *bufio.Reader
	sha    hash.Hash
	hdr    Header
	block  []byte // the current block's entries
	stored []byte // a compressed block as stored, reused
	pos    int
	left   uint32
	total  uint64
	err    error
	small  [trailerSize]byte
	offset int64
	// blockStart is the offset of the current block's record, blocks the
	// number of block records read: readIndex locates blocks with them.
	blockStart int64
	blocks     int
}

// NewReader reads and checks the header of a snapshot file from r.
func NewReader(r io.Reader) (*Reader, error) {
	sr := &Reader{r: bufio.NewReaderSize(r, 64<<10), sha: sha256.New(), block: make([]byte, 0, blockTarget+4<<10)}
	h := sr.small[:headerSize]
	if err := sr.read(h, "header"); err != nil {
		return nil, err
	}
	if string(h[:8]) != snapshotMagic {
		return nil, corruptf("checkpoint: snapshot header: bad magic %q", h[:8])
	}
	if got, want := crc32.Checksum(h[:20], castagnoli), binary.BigEndian.Uint32(h[20:24]); got != want {
		return nil, corruptf("checkpoint: snapshot header: checksum mismatch")
	}
	sr.hdr = Header{Version: binary.BigEndian.Uint16(h[8:10]), Kind: Kind(h[10]), CheckpointID: binary.BigEndian.Uint64(h[12:20])}
	if sr.hdr.Version != SnapshotVersion {
		return nil, corruptf("checkpoint: snapshot header: format version %d, this build reads version %d only (written by %s)",
			sr.hdr.Version, SnapshotVersion, writtenBy(int(sr.hdr.Version), SnapshotVersion))
	}
	if sr.hdr.Kind != KindFull && sr.hdr.Kind != KindIncremental {
		return nil, corruptf("checkpoint: snapshot header: bad kind %d", h[10])
	}
	return sr, nil
}

// read fills b from the file and hashes it.
func (sr *Reader) read(b []byte, what string) error {
	if err := sr.readRaw(b, what); err != nil {
		return err
	}
	sr.sha.Write(b)
	return nil
}

// readRaw fills b from the file; a short read is a corruption ("truncated"),
// any other failure an I/O error.
func (sr *Reader) readRaw(b []byte, what string) error {
	n, err := io.ReadFull(sr.r, b)
	sr.offset += int64(n)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return corruptf("checkpoint: snapshot truncated in %s at offset %d", what, sr.offset)
		}
		return fmt.Errorf("checkpoint: read snapshot %s: %w", what, err)
	}
	return nil
}

// Header returns the file's header.
func (sr *Reader) Header() Header { return sr.hdr }

// FileSHA256 appends to dst the SHA-256 of the whole file (its content
// address) and returns its size. Valid once Next has returned io.EOF.
func (sr *Reader) FileSHA256(dst []byte) ([]byte, int64) { return sr.sha.Sum(dst), sr.offset }

// Count returns the number of entries returned so far.
func (sr *Reader) Count() uint64 { return sr.total }

// Next returns the next entry, or io.EOF after the last one once the trailer
// has verified. The entry's slices are valid until the next call.
func (sr *Reader) Next() (Entry, error) {
	if sr.err != nil {
		return Entry{}, sr.err
	}
	for sr.left == 0 {
		if sr.err = sr.nextBlock(); sr.err != nil {
			return Entry{}, sr.err
		}
	}
	e, err := sr.decodeEntry()
	if err != nil {
		sr.err = err
		return Entry{}, err
	}
	sr.left--
	sr.total++
	return e, nil
}

// ForEach calls fn for every entry in file order, then verifies the trailer.
// fn's slices are valid only during the call. An error from fn stops the
// iteration and is returned as is.
func (sr *Reader) ForEach(fn func(bucket, key, value []byte, deleted bool) error) error {
	for {
		e, err := sr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(e.Bucket, e.Key, e.Value, e.Deleted); err != nil {
			return err
		}
	}
}

func (sr *Reader) nextBlock() error {
	if sr.pos != len(sr.block) {
		return corruptf("checkpoint: snapshot block at offset %d: %d bytes after its last entry", sr.offset, len(sr.block)-sr.pos)
	}
	start := sr.offset
	h := sr.small[:blockHeaderSize]
	// A block or the trailer begins here. The type byte is hashed only for
	// a block: the trailer's SHA-256 covers the bytes before the trailer.
	if err := sr.readRaw(h[:1], "block header"); err != nil {
		return err
	}
	switch {
	case h[0] == typeBlock, h[0] == typeZstdBlock:
		sr.sha.Write(h[:1])
	case h[0] == typeTrailer:
		return sr.trailer()
	default:
		return corruptf("checkpoint: snapshot record at offset %d: bad type 0x%02x", start, h[0])
	}
	zstdBlock := h[0] == typeZstdBlock // h's bytes are reused for the checksum below
	if zstdBlock {
		h = sr.small[:zstdHeaderSize]
	}
	if err := sr.read(h[1:], "block header"); err != nil {
		return err
	}
	length, count := binary.BigEndian.Uint32(h[1:5]), binary.BigEndian.Uint32(h[5:9])
	if length == 0 || length > maxBlockPayload || count == 0 {
		return corruptf("checkpoint: snapshot block at offset %d: bad length %d or count %d", start, length, count)
	}
	rawLen := length
	if zstdBlock {
		if rawLen = binary.BigEndian.Uint32(h[9:13]); rawLen == 0 || rawLen > maxBlockPayload {
			return corruptf("checkpoint: snapshot block at offset %d: bad raw length %d", start, rawLen)
		}
	}
	crc := crc32.Update(0, castagnoli, h)
	payload := &sr.block
	if zstdBlock {
		payload = &sr.stored
	}
	if cap(*payload) < int(length) {
		*payload = make([]byte, length)
	}
	*payload = (*payload)[:length]
	if err := sr.read(*payload, "block"); err != nil {
		return err
	}
	crc = crc32.Update(crc, castagnoli, *payload)
	c := sr.small[:crcSize]
	if err := sr.read(c, "block checksum"); err != nil {
		return err
	}
	if crc != binary.BigEndian.Uint32(c) {
		return corruptf("checkpoint: snapshot block at offset %d: checksum mismatch", start)
	}
	if zstdBlock {
		if cap(sr.block) < int(rawLen) {
			sr.block = make([]byte, 0, rawLen)
		}
		b, err := zstdDecoder().DecodeAll(sr.stored, sr.block[:0])
		if err != nil || len(b) != int(rawLen) {
			return corruptf("checkpoint: snapshot block at offset %d: does not decompress to its %d bytes: %v", start, rawLen, err)
		}
		sr.block = b
	}
	sr.pos, sr.left = 0, count
	sr.blockStart = start
	sr.blocks++
	return nil
}

// trailer verifies the trailer, whose type byte has been read, and that
// nothing follows it; it returns io.EOF when all is well.
func (sr *Reader) trailer() error {
	start := sr.offset - 1
	t := sr.small[:trailerSize]
	t[0] = typeTrailer
	if err := sr.readRaw(t[1:], "trailer"); err != nil {
		return err
	}
	if crc32.Checksum(t[:41], castagnoli) != binary.BigEndian.Uint32(t[41:45]) {
		return corruptf("checkpoint: snapshot trailer at offset %d: checksum mismatch", start)
	}
	if n := binary.BigEndian.Uint64(t[1:9]); n != sr.total {
		return corruptf("checkpoint: snapshot trailer: %d entries recorded, %d read", n, sr.total)
	}
	var sum [sha256.Size]byte
	if string(sr.sha.Sum(sum[:0])) != string(t[9:41]) {
		return corruptf("checkpoint: snapshot trailer: SHA-256 mismatch")
	}
	sr.sha.Write(t) // from here on sha covers the whole file
	if _, err := sr.r.ReadByte(); err != io.EOF {
		if err != nil {
			return fmt.Errorf("checkpoint: read snapshot after trailer: %w", err)
		}
		return corruptf("checkpoint: snapshot has data after its trailer at offset %d", sr.offset)
	}
	return io.EOF
}

func (sr *Reader) decodeEntry() (Entry, error) {
	b := sr.block[sr.pos:]
	if len(b) == 0 {
		return Entry{}, corruptf("checkpoint: snapshot block ends before its %d remaining entries", sr.left)
	}
	var e Entry
	switch b[0] {
	case flagPut:
	case flagTombstone:
		e.Deleted = true
	default:
		return Entry{}, corruptf("checkpoint: snapshot entry %d: bad flags 0x%02x", sr.total, b[0])
	}
	off := 1
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(b[off:])
		if k <= 0 || n > uint64(len(b)-off-k) {
			return nil, false
		}
		off += k
		f := b[off : off+int(n) : off+int(n)]
		off += int(n)
		return f, true
	}
	var ok bool
	if e.Bucket, ok = field(); ok {
		if e.Key, ok = field(); ok && !e.Deleted {
			e.Value, ok = field()
		}
	}
	if !ok {
		return Entry{}, corruptf("checkpoint: snapshot entry %d: bad length", sr.total)
	}
	sr.pos += off
	return e, nil
}

// VerifySnapshot reads a whole snapshot file from r and checks every block
// CRC and the trailer. It returns the header and the entry count; a damaged
// file gives an error matching ErrCorrupt.
func VerifySnapshot(r io.Reader) (Header, uint64, error) {
	sr, err := NewReader(r)
	if err != nil {
		return Header{}, 0, err
	}
	for {
		if _, err := sr.Next(); err == io.EOF {
			return sr.hdr, sr.total, nil
		} else if err != nil {
			return sr.hdr, sr.total, err
		}
	}
}
