package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/state/vfs"
)

// AckMode says when Append returns, and so when the caller may ack the
// broker. The zero value means AfterFsync.
type AckMode uint8

const (
	// AfterFsync: Append returns after the batch is written and fsynced.
	// Acknowledged entries survive power loss.
	AfterFsync AckMode = iota + 1
	// AfterWrite: Append returns after write(2); a background goroutine
	// fsyncs at least every SyncInterval. Acknowledged entries survive a
	// process crash (the kernel keeps the page cache), but power loss may
	// lose up to SyncInterval of them.
	AfterWrite
)

func (m AckMode) String() string {
	switch m {
	case AfterFsync:
		return "after_fsync"
	case AfterWrite:
		return "after_write"
	}
	return fmt.Sprintf("AckMode(%d)", uint8(m))
}

// Defaults and bounds of Options.
const (
	DefaultSegmentBytes = 64 << 20
	DefaultMaxDiskBytes = 1 << 30
	DefaultSyncInterval = 100 * time.Millisecond
	MinSegmentBytes     = 1 << 10
)

// maxKeptBuffer is the largest encode buffer kept between Appends; an
// unusually large batch does not pin its buffer for the life of the log.
const maxKeptBuffer = 8 << 20

// maxChunk bounds the records of one frame (before compression), so a
// reader's buffers stay small and a frame always fits a segment.
const maxChunk = 256 << 10

// Options configure a Log. The zero value is valid: after_fsync, 64 MiB
// segments, 1 GiB on disk.
type Options struct {
	// Ack is when Append returns. Zero: AfterFsync.
	Ack AckMode
	// SyncInterval is, in AfterWrite mode, the longest time written entries
	// stay without fsync: a background goroutine fsyncs the active segment
	// this often when something was written. Zero: DefaultSyncInterval.
	// Negative: no background goroutine; the caller calls Sync itself.
	// Ignored in AfterFsync mode.
	SyncInterval time.Duration
	// MaxDiskBytes bounds the bytes of all segment files together; Append
	// returns ErrFull rather than go past it. It must be at least twice
	// SegmentBytes, so Truncate can always free a sealed segment. Zero:
	// DefaultMaxDiskBytes.
	MaxDiskBytes int64
	// SegmentBytes bounds a segment file, header included; Append rolls to
	// a new segment before a frame that would not fit. It also bounds one
	// entry (ErrTooLarge). Zero: DefaultSegmentBytes; at least
	// MinSegmentBytes.
	SegmentBytes int64
	// Logger, if set, receives a warning when Open cuts a torn tail. Nil:
	// no logging (Recovery still reports it).
	Logger *slog.Logger
	// FS is the file system the log lives on. Nil: vfs.Default.
	FS vfs.FS
	// Compression is how each Append's records are stored: compressed
	// when that makes them smaller (batches of a few hundred bytes and
	// more), at a CPU cost per batch, on append and on read, and nothing per
	// entry. Zero: CompressNone. Segments written with any of them are read
	// whatever this says. A compressing log keeps the last batch's records
	// (as much memory again as the batch) for a Reader at its end, which
	// then neither reads nor decompresses them.
	Compression Compression
}

// Compression is a codec for the records of a frame.
type Compression uint8

const (
	// CompressNone stores records as they are.
	CompressNone Compression = iota
	// CompressS2 stores them as an S2 block: about a quarter of zstd's CPU
	// in the agent at 10k readings/s, for 2x (simulator readings) to 4.5x
	// (the footprint benchmark's) the bytes of zstd.
	CompressS2
	// CompressZstd stores them as a zstd frame (the fastest level): the
	// smallest log, at the highest CPU cost.
	CompressZstd
)

func (c Compression) String() string {
	switch c {
	case CompressNone:
		return "none"
	case CompressS2:
		return "s2"
	case CompressZstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

// Check reports what Open would refuse in o, without touching the disk.
func (o Options) Check() error { return o.setDefaults() }

func (o *Options) setDefaults() error {
	if o.Ack == 0 {
		o.Ack = AfterFsync
	}
	if o.Ack != AfterFsync && o.Ack != AfterWrite {
		return fmt.Errorf("ingest: invalid ack mode %d", o.Ack)
	}
	if o.Compression > CompressZstd {
		return fmt.Errorf("ingest: invalid compression %d", o.Compression)
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.MaxDiskBytes == 0 {
		o.MaxDiskBytes = DefaultMaxDiskBytes
	}
	if o.SegmentBytes < MinSegmentBytes {
		return fmt.Errorf("ingest: segment size %d bytes is below the minimum %d", o.SegmentBytes, MinSegmentBytes)
	}
	if o.MaxDiskBytes < 2*o.SegmentBytes {
		return fmt.Errorf("ingest: max disk %d bytes is less than two segments of %d bytes", o.MaxDiskBytes, o.SegmentBytes)
	}
	return nil
}

// Log is the durable ingest log of one source. See the package
// documentation for the model.
//
// All methods are safe for concurrent use. Appends are serialized: batch
// messages rather than calling Append from many goroutines.
type Log struct {
	dir  string
	opts Options
	fs   vfs.FS
	lock io.Closer
	rec  Recovery

	mu       sync.Mutex  // serializes Append, Truncate, Close and rolls
	buf      []byte      // reused encode buffer
	raw      []byte      // the batch's records before compression; not tail.recs
	framed   []tailFrame // the batch's frames, for the tail
	next     uint64      // offset the next Append starts at
	writeEnd int64       // bytes written to the active segment
	closed   bool

	// tail is the last published batch's frames, uncompressed, for readers
	// at the end of the log (Reader.Next): they copy the records from here
	// rather than read back and decompress what was just compressed. Only
	// a compressing log keeps it.
	tail struct {
		sync.Mutex
		frames []tailFrame
		recs   []byte
	}

	vis    sync.RWMutex // guards segs and active; written under mu too
	segs   []segment    // oldest first; the last is the active segment
	active vfs.File     // the last segment, open for writing
	// oldActive: the active segment is of an older format version (and
	// holds frames); the next append rolls to a new segment first.
	oldActive bool

	// The batch being appended, under mu: the segments it rolled to, oldest
	// first, open for writing, and the active segment's end when it rolled
	// away from it. Readers see neither until the batch is published, so
	// a batch that meets a full disk can be undone (undo).
	rolled  []rolledSegment
	sealEnd int64
	// batchRolled: the batch began to roll, so the active segment was
	// fsynced holding part of it, and a new segment's directory entry may
	// have been made durable.
	batchRolled bool

	last   atomic.Uint64 // last offset readers may see
	synced atomic.Uint64 // last offset known fsynced
	size   atomic.Int64  // bytes of all segment files
	isShut atomic.Bool   // Close was called
	full   atomic.Bool   // the last Append met ErrFull (Full)

	errMu  sync.Mutex
	stuck  error // first I/O failure: the log refuses further writes
	notify struct {
		sync.Mutex
		ch      chan struct{} // closed and replaced when last advances
		waiting atomic.Int32
	}
	// freed is closed and replaced when Truncate deletes a segment, so a
	// caller holding a batch refused as ErrFull retries at once (Freed).
	freed struct {
		sync.Mutex
		ch chan struct{}
	}
	done     chan struct{} // closed by Close
	stopSync chan struct{}
	syncDone chan struct{}
}

// Open opens the log in dir, creating dir and the first segment if needed.
//
// It scans the last segment, checking every frame, and cuts a torn tail:
// trailing bytes that are not a complete, valid frame and are not followed
// by a valid frame (what a crash during a write leaves). How much was cut is
// in Recovery and logged to Options.Logger. A failing frame followed by a
// valid one, a frame holding the wrong offset or a bad segment header is a
// *CorruptionError (errors.Is(err, ErrCorrupt)) naming the file and byte
// position. Earlier segments are not scanned here (that would read the whole
// log on every start); a Reader checks them as it goes.
//
// Open takes an advisory lock on dir: a second Open of the same directory,
// in this or another process, fails until Close.
func Open(dir string, opts Options) (*Log, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if err := vfs.MkdirAllSynced(opts.FS, dir, 0o755); err != nil {
		return nil, fmt.Errorf("ingest: create dir: %w", err)
	}
	lock, err := opts.FS.Lock(filepath.Join(dir, "LOCK"))
	if err != nil {
		return nil, fmt.Errorf("ingest: lock %s (is another process using the log?): %w", dir, err)
	}
	l := &Log{dir: dir, opts: opts, fs: opts.FS, lock: lock, done: make(chan struct{})}
	l.notify.ch = make(chan struct{})
	l.freed.ch = make(chan struct{})
	if err := l.load(); err != nil {
		lock.Close()
		return nil, err
	}
	if l.rec.CutBytes > 0 && opts.Logger != nil {
		opts.Logger.Warn("ingest: cut torn tail of the last segment",
			"segment", l.rec.Segment, "at", l.rec.CutAt, "bytes", l.rec.CutBytes)
	}
	if opts.Ack == AfterWrite && opts.SyncInterval > 0 {
		l.stopSync, l.syncDone = make(chan struct{}), make(chan struct{})
		go l.syncLoop(opts.SyncInterval)
	}
	return l, nil
}

// load finds the segments, recovers the last one and opens it for writing.
func (l *Log) load() error {
	segs, err := listSegments(l.fs, l.dir)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		f, err := createSegment(l.fs, l.dir, 1)
		if err != nil {
			return err
		}
		l.segs, l.active, l.next, l.writeEnd = []segment{{first: 1, end: int64(headerLen)}}, f, 1, int64(headerLen)
	} else {
		s := &segs[len(segs)-1]
		f, err := l.fs.OpenFile(filepath.Join(l.dir, segmentName(s.first)), os.O_RDWR)
		if err != nil {
			return fmt.Errorf("ingest: open last segment: %w", err)
		}
		next, end, rec, err := recoverLast(f, s.first, s.end)
		if err != nil {
			f.Close()
			return err
		}
		s.end, l.rec = end, rec
		l.segs, l.active, l.next, l.writeEnd = segs, f, next, end
		if v, err := headerVersion(f); err != nil {
			f.Close()
			return err
		} else if v != segmentVersion {
			if err := l.upgradeActive(s); err != nil {
				f.Close()
				return err
			}
		}
	}
	var size int64
	for _, s := range l.segs {
		size += s.end
	}
	l.size.Store(size)
	l.last.Store(l.next - 1)
	l.synced.Store(l.next - 1)
	return nil
}

// Fits reports whether e can be stored (else Append refuses it with
// ErrTooLarge): a caller batching many senders' entries leaves out the one
// that cannot, so it fails alone.
func (l *Log) Fits(e *Entry) bool {
	return int64(frameLen(e)) <= l.maxFrame() && len(e.Topic) <= maxTopicLen
}

func (l *Log) maxFrame() int64 { return l.opts.SegmentBytes - int64(headerLen) }

// Append writes batch as consecutive entries and returns the offsets of the
// first and last (0, 0 for an empty batch). Entry.Offset is ignored.
//
// All frames go out in one write (more only when the batch crosses into a
// new segment) from a reused buffer: no allocation per entry. In AfterFsync
// mode Append then fsyncs once: group commit, so callers batch every
// message waiting to be acked rather than appending one at a time. In
// AfterWrite mode it returns after the write.
//
// Errors:
//   - ErrFull: the batch would exceed MaxDiskBytes; nothing was written.
//     Hold the messages unacked and retry after Truncate.
//   - ErrTooLarge: an entry can never be stored; nothing was written.
//   - ErrClosed after Close.
//   - ErrNoSpace: the file system is full; the batch was undone (also one
//     that had rolled to new segments) and the log stays usable. Hold the
//     messages unacked and retry once space frees.
//   - any other error is an I/O failure: the log may hold part of the batch
//     and refuses further writes (they return the same error). Close and
//     reopen it, as a restart would; Open cuts any partial frame, and
//     redelivered messages already appended are dropped by Dedup.
func (l *Log) Append(batch []Entry) (first, last uint64, err error) {
	if len(batch) == 0 {
		return 0, 0, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, ErrClosed
	}
	if err := l.failure(); err != nil {
		return 0, 0, err
	}
	maxFrame := l.maxFrame()
	for i := range batch {
		e := &batch[i]
		if n := frameLen(e); int64(n) > maxFrame || len(e.Topic) > maxTopicLen {
			return 0, 0, fmt.Errorf("%w: entry %d of the batch is %d bytes with a %d-byte topic; a segment holds at most %d",
				ErrTooLarge, i, n, len(e.Topic), maxFrame)
		}
	}
	first = l.next
	buf := l.buf[:0]
	l.raw, l.framed = l.raw[:0], l.framed[:0]
	// One frame per chunk of the batch: a frame never spans segments, so
	// chunks stay well below a segment.
	chunkMax := min(int64(maxChunk), maxFrame/2)
	for i := 0; i < len(batch); {
		j, size := i+1, int64(frameLen(&batch[i]))
		for j < len(batch) {
			n := int64(recordLen(&batch[j]))
			if size+n > chunkMax {
				break
			}
			size += n
			j++
		}
		at, recStart := len(buf), len(l.raw)
		buf, l.raw = appendFrame(buf, first+uint64(i), batch[i:j], l.opts.Compression, l.raw)
		if l.opts.Compression != CompressNone {
			l.framed = append(l.framed, tailFrame{first: first + uint64(i), count: j - i, pos: int64(at),
				size: len(buf) - at, recStart: recStart, recEnd: len(l.raw)})
		}
		i = j
	}
	l.buf = buf
	if cap(buf) > maxKeptBuffer {
		l.buf = nil
	}
	last = first + uint64(len(batch)) - 1

	need := int64(len(buf))
	if l.writeEnd+need > l.opts.SegmentBytes {
		need += int64(headerLen * l.newSegments(buf))
	}
	if l.size.Load()+need > l.opts.MaxDiskBytes {
		l.full.Store(true)
		return 0, 0, fmt.Errorf("%w: %d bytes held, %d more needed, max %d", ErrFull, l.size.Load(), need, l.opts.MaxDiskBytes)
	}
	l.full.Store(false) // it fits; should the disk refuse it, that is ErrNoSpace, not Full
	end, size := l.writeEnd, l.size.Load()
	if err := l.write(buf); err != nil {
		return 0, 0, l.failOrUndo(err, end, size)
	}
	if l.opts.Ack == AfterFsync {
		f := l.writing()
		if err := f.Sync(); err != nil {
			return 0, 0, l.failOrUndo(fmt.Errorf("ingest: sync segment %s: %w", f.Name(), err), end, size)
		}
	}
	l.next = last + 1
	l.publish(last)
	if cap(l.raw) > maxKeptBuffer {
		l.raw = nil
	}
	return first, last, nil
}

// newSegments counts the segments a roll would open while writing buf.
func (l *Log) newSegments(buf []byte) int {
	n, end := 0, l.writeEnd
	if l.oldActive {
		n, end = 1, int64(headerLen)
	}
	for len(buf) > 0 {
		k := fitFrames(buf, l.opts.SegmentBytes-end)
		if k == 0 {
			n, end = n+1, int64(headerLen)
			continue
		}
		buf, end = buf[k:], end+int64(k)
	}
	return n
}

// fitFrames returns the length of the longest prefix of whole frames of buf
// that fits in room bytes.
func fitFrames(buf []byte, room int64) int {
	if int64(len(buf)) <= room {
		return len(buf)
	}
	n := 0
	for n < len(buf) {
		size := frameHeaderLen + int(binary.LittleEndian.Uint32(buf[n:]))
		if int64(n+size) > room {
			break
		}
		n += size
	}
	return n
}

// write writes the encoded frames in buf, rolling segments as needed, and
// notes where each of l.framed went.
func (l *Log) write(buf []byte) error {
	framed := l.framed
	if l.oldActive && len(buf) > 0 {
		if err := l.roll(binary.LittleEndian.Uint64(buf[frameHeaderLen:])); err != nil {
			return err
		}
		l.oldActive = false
	}
	for done := 0; len(buf) > 0; {
		k := fitFrames(buf, l.opts.SegmentBytes-l.writeEnd)
		if k == 0 {
			// A frame holds its first offset right after its header.
			if err := l.roll(binary.LittleEndian.Uint64(buf[frameHeaderLen:])); err != nil {
				return err
			}
			continue
		}
		f := l.writing()
		if _, err := f.WriteAt(buf[:k], l.writeEnd); err != nil {
			return fmt.Errorf("ingest: write segment %s: %w", f.Name(), err)
		}
		seg := l.segs[len(l.segs)-1].first
		if n := len(l.rolled); n > 0 {
			seg = l.rolled[n-1].first
		}
		for len(framed) > 0 && framed[0].pos < int64(done+k) {
			framed[0].seg, framed[0].pos = seg, l.writeEnd+framed[0].pos-int64(done)
			framed = framed[1:]
		}
		l.writeEnd += int64(k)
		l.size.Add(int64(k))
		buf, done = buf[k:], done+k
	}
	return nil
}

// rolledSegment is a segment the batch being appended rolled to.
type rolledSegment struct {
	segment
	f vfs.File
}

// writing is the file the batch being appended writes to: the last
// segment it rolled to, or the active segment.
func (l *Log) writing() vfs.File {
	if n := len(l.rolled); n > 0 {
		return l.rolled[n-1].f
	}
	return l.active
}

// upgradeActive makes the last segment s, of an older format version, one
// this build may append to: a segment holding no frame gets today's
// header; one with frames is kept as it is, and the next append starts a
// new segment (oldActive), so a segment never mixes versions.
func (l *Log) upgradeActive(s *segment) error {
	if s.end > int64(headerLen) {
		l.oldActive = true
		return nil
	}
	if _, err := l.active.WriteAt(segmentHeader(), 0); err != nil {
		return fmt.Errorf("ingest: write segment header %s: %w", l.active.Name(), err)
	}
	if err := l.active.Sync(); err != nil {
		return fmt.Errorf("ingest: sync segment %s: %w", l.active.Name(), err)
	}
	return nil
}

// roll seals the segment being written (fsynced, so only the last segment
// can ever have a torn tail) and starts a new one at offset first. Readers
// see the new segment once the batch is published (adoptRolled).
func (l *Log) roll(first uint64) error {
	l.batchRolled = true
	cur := l.writing()
	if err := cur.Sync(); err != nil {
		return fmt.Errorf("ingest: sync segment %s: %w", cur.Name(), err)
	}
	f, err := createSegment(l.fs, l.dir, first)
	if err != nil {
		return err
	}
	if n := len(l.rolled); n > 0 {
		l.rolled[n-1].end = l.writeEnd
	} else {
		l.sealEnd = l.writeEnd
	}
	l.rolled = append(l.rolled, rolledSegment{segment{first: first, end: int64(headerLen)}, f})
	l.writeEnd = int64(headerLen)
	l.size.Add(int64(headerLen))
	return nil
}

// adoptRolled makes the segments the batch rolled to part of the log, the
// last one the active segment, and returns the files it sealed, for the
// caller to close once l.vis is released. l.vis is held for writing.
func (l *Log) adoptRolled() []vfs.File {
	l.batchRolled = false
	if len(l.rolled) == 0 {
		return nil
	}
	sealed := []vfs.File{l.active}
	l.segs[len(l.segs)-1].end = l.sealEnd
	for _, r := range l.rolled {
		l.segs = append(l.segs, r.segment)
		sealed = append(sealed, r.f)
	}
	l.active = sealed[len(sealed)-1]
	clear(l.rolled)
	l.rolled = l.rolled[:0]
	return sealed[:len(sealed)-1]
}

// publish makes entries up to last visible to readers and wakes waiters.
func (l *Log) publish(last uint64) {
	l.vis.Lock()
	sealed := l.adoptRolled()
	l.segs[len(l.segs)-1].end = l.writeEnd
	l.vis.Unlock()
	closeSealed(sealed)
	if len(l.framed) > 0 {
		// The batch's records become the tail; the previous tail's buffers
		// are the next batch's, as no reader copies from them any more.
		l.tail.Lock()
		l.tail.frames, l.framed = l.framed, l.tail.frames
		l.tail.recs, l.raw = l.raw, l.tail.recs
		l.tail.Unlock()
	}
	l.last.Store(last)
	if l.opts.Ack == AfterFsync {
		l.synced.Store(last)
	}
	if l.notify.waiting.Load() > 0 {
		l.notify.Lock()
		close(l.notify.ch)
		l.notify.ch = make(chan struct{})
		l.notify.Unlock()
	}
}

// closeSealed closes segment files a roll sealed (and fsynced). A
// concurrent Sync holding one finishes safely: the descriptor is released
// when its last user is done, and its ErrClosed is ignored.
func closeSealed(files []vfs.File) {
	for _, f := range files {
		f.Close()
	}
}

// Sync makes every entry appended before the call durable (fsync). In
// AfterWrite mode call it before a checkpoint that counts those entries
// becomes durable (see the package documentation); in AfterFsync mode it
// has nothing to do. An fsync failure is sticky, as for Append.
func (l *Log) Sync() error {
	if l.isShut.Load() {
		return ErrClosed
	}
	if err := l.failure(); err != nil {
		return err
	}
	target := l.last.Load()
	if l.synced.Load() >= target {
		return nil
	}
	l.vis.RLock()
	f := l.active
	l.vis.RUnlock()
	if err := f.Sync(); err != nil {
		if !errors.Is(err, os.ErrClosed) {
			return l.fail(fmt.Errorf("ingest: sync segment %s: %w", f.Name(), err))
		}
		// f was sealed by a roll or Close, both of which synced it.
	}
	for {
		cur := l.synced.Load()
		if cur >= target || l.synced.CompareAndSwap(cur, target) {
			return nil
		}
	}
}

func (l *Log) syncLoop(interval time.Duration) {
	defer close(l.syncDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stopSync:
			return
		case <-t.C:
			_ = l.Sync() // a failure is sticky: the next Append reports it
		}
	}
}

// Truncate deletes every segment whose entries are all below offset below,
// and so frees their bytes for MaxDiskBytes. The active segment is never
// deleted. Call it with the ingest position of the oldest retained
// checkpoint. Readers already inside a deleted segment read it to its end;
// one that then needs a deleted segment gets ErrTruncated.
func (l *Log) Truncate(below uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	freed := false
	defer func() {
		if freed {
			l.freed.Lock()
			close(l.freed.ch)
			l.freed.ch = make(chan struct{})
			l.freed.Unlock()
		}
	}()
	for len(l.segs) > 1 && l.segs[1].first <= below {
		s := l.segs[0]
		path := filepath.Join(l.dir, segmentName(s.first))
		if err := l.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("ingest: truncate: remove %s: %w", path, err)
		}
		l.vis.Lock()
		l.segs = slices.Delete(l.segs, 0, 1)
		l.vis.Unlock()
		l.size.Add(-s.end)
		freed = true
	}
	return nil
}

// Freed returns a channel closed when a later Truncate deletes a segment.
// Take it before an Append that may meet ErrFull, then wait on it (and a
// timer): space freed between the two is not missed.
func (l *Log) Freed() <-chan struct{} {
	l.freed.Lock()
	defer l.freed.Unlock()
	return l.freed.ch
}

// Wait returns nil as soon as an entry with an offset greater than after is
// visible (LastOffset() > after), ctx.Err() when ctx ends first, and
// ErrClosed when the log is closed. It is how a reader at the end of the log
// waits for new appends: read with Next until io.EOF, then Wait(ctx, the
// last offset read), then Next again.
func (l *Log) Wait(ctx context.Context, after uint64) error {
	// Counting first, then checking last, pairs with publish storing last,
	// then checking the count: one of the two sees the other.
	l.notify.waiting.Add(1)
	defer l.notify.waiting.Add(-1)
	for {
		l.notify.Lock()
		ch := l.notify.ch
		l.notify.Unlock()
		if l.last.Load() > after {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.done:
			return ErrClosed
		}
	}
}

// FirstOffset is the oldest offset retained; LastOffset()+1 when the log
// holds no entries.
func (l *Log) FirstOffset() uint64 {
	l.vis.RLock()
	defer l.vis.RUnlock()
	return l.segs[0].first
}

// LastOffset is the newest offset readers may see (0 before the first
// append): written in AfterWrite mode, written and fsynced in AfterFsync
// mode.
func (l *Log) LastOffset() uint64 { return l.last.Load() }

// EntryOverhead is the most bytes an entry takes in a segment besides its
// topic and payload (its record's flags, arrival and lengths); frames and
// segment headers come on top, per batch.
const EntryOverhead = 32

// MaxBatchBytes bounds a batch that Append can always take once Truncate
// has deleted every sealed segment, counting each entry as its topic,
// payload and EntryOverhead: half of MaxDiskBytes less a full active
// segment, the other half a margin for frame and segment headers. A batch
// of more may meet ErrFull however far the log is truncated, and so wait
// for good: split it. A single entry that Fits always fits then too.
func (l *Log) MaxBatchBytes() int64 { return (l.opts.MaxDiskBytes - l.opts.SegmentBytes) / 2 }

// Full reports whether the last Append that got as far as comparing its
// batch with MaxDiskBytes was refused with ErrFull: the caller holds
// messages until Truncate frees space. Truncate does not clear it
// (the held batch may still not fit); the next Append that fits does. The
// checkpoint side reads it to keep taking checkpoints, and to truncate
// below the newest one, while the log waits for room.
func (l *Log) Full() bool { return l.full.Load() }

// SizeBytes is the size of all segment files together.
func (l *Log) SizeBytes() int64 { return l.size.Load() }

// Recovery reports what Open cut from the last segment.
func (l *Log) Recovery() Recovery { return l.rec }

// Dir is the directory the log lives in.
func (l *Log) Dir() string { return l.dir }

// Close fsyncs the active segment, stops the background sync and releases
// the directory lock. Readers stay usable until closed themselves. It
// returns the sticky I/O failure, if any.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	l.isShut.Store(true)
	if l.stopSync != nil {
		close(l.stopSync)
		<-l.syncDone
	}
	err := l.failure()
	if err == nil {
		if serr := l.active.Sync(); serr != nil {
			err = fmt.Errorf("ingest: sync segment %s: %w", l.active.Name(), serr)
		}
	}
	if cerr := l.active.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("ingest: close segment: %w", cerr)
	}
	for _, r := range l.rolled { // left by a batch that failed for good
		r.f.Close()
	}
	l.lock.Close()
	close(l.done)
	return err
}

func (l *Log) failure() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.stuck
}

// fail records the first I/O failure; every later write returns it.
func (l *Log) fail(err error) error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.stuck == nil {
		l.stuck = err
	}
	return l.stuck
}

// tailFrame is a frame of the last published batch: where it is, what it
// holds, and its records in Log.tail.recs.
type tailFrame struct {
	seg              uint64 // the first offset of its segment
	pos              int64  // its position in the segment (in the encode buffer until written)
	size             int    // its encoded size
	first            uint64
	count            int
	recStart, recEnd int
}

// tailRecords copies the records of the frame at pos of segment seg into
// scratch (returned grown) if it is one of the last published batch's,
// with the frame's size. The frame is whole and published: a reader may
// go past it without reading it.
func (l *Log) tailRecords(seg uint64, pos int64, scratch []byte) (fr frame, size int, _ []byte, ok bool) {
	l.tail.Lock()
	defer l.tail.Unlock()
	for _, t := range l.tail.frames {
		if t.seg == seg && t.pos == pos {
			scratch = append(scratch[:0], l.tail.recs[t.recStart:t.recEnd]...)
			return frame{first: t.first, count: t.count, recs: scratch}, t.size, scratch, true
		}
	}
	return frame{}, 0, scratch, false
}
