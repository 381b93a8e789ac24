package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/eddy-edge/eddy/state/vfs"
)

// Segment describes one segment file.
type Segment struct {
	ID   uint64
	Size int64 // bytes, header included
}

// SegmentPath is the file name of segment id in dir.
func SegmentPath(dir string, id uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%016x.wal", id))
}

// Log is the set of segment files of one directory, appended to at the
// active segment. Write, Rotate, Remove and Close must not run concurrently
// with each other (the WAL sink calls them under its lock); Sync, Size and
// Segments may run concurrently with all of them.
type Log struct {
	fs  vfs.FS
	dir string

	mu      sync.Mutex
	f       vfs.File // active segment
	segs    []Segment
	total   int64
	written int64 // bytes written since Open
	closed  bool
}

// Open opens (creating if needed, durably: vfs.MkdirAllSynced) the log in
// dir on fsys (nil: vfs.Default) and calls visit with every
// frame's payload, segment by segment, in order. The payload is valid only
// during the call. A torn tail of the active segment is cut (the file is
// truncated and synced); an invalid frame elsewhere fails with ErrCorrupt.
// An error from visit stops Open and is returned. A new, empty log has no
// segment: the caller starts one with Rotate. An active segment that ends
// inside its header (or is empty) gets a whole header again. A segment of
// another format version than FormatVersion fails with ErrVersion.
func Open(fsys vfs.FS, dir string, visit func(seg uint64, payload []byte) error) (*Log, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	if err := vfs.MkdirAllSynced(fsys, dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: create dir: %w", err)
	}
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list segments: %w", err)
	}
	ids := segmentIDs(names)
	l := &Log{fs: fsys, dir: dir}
	for i, id := range ids {
		active := i == len(ids)-1
		size, err := l.scanSegment(id, active, visit)
		if err != nil {
			return nil, err
		}
		l.segs = append(l.segs, Segment{ID: id, Size: size})
		l.total += size
	}
	if len(ids) > 0 {
		last := ids[len(ids)-1]
		f, err := fsys.OpenFile(SegmentPath(dir, last), os.O_WRONLY|os.O_APPEND)
		if err != nil {
			return nil, fmt.Errorf("wal: open active segment: %w", err)
		}
		l.f = f
	}
	return l, nil
}

// segmentIDs returns the ids of the segment files among a directory's
// names, ascending.
func segmentIDs(names []string) []uint64 {
	var ids []uint64
	for _, n := range names {
		name, ok := strings.CutSuffix(n, ".wal")
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(name, 16, 64)
		if err != nil {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// scanSegment visits every frame of a segment and returns its valid size,
// cutting a torn tail when active.
func (l *Log) scanSegment(id uint64, active bool, visit func(uint64, []byte) error) (int64, error) {
	r, err := l.OpenReader(id, 0)
	if active && errors.Is(err, errTornHeader) {
		if err := l.rewriteHeader(SegmentPath(l.dir, id)); err != nil {
			return 0, err
		}
		return int64(HeaderBytes), nil
	}
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return l.scanFrames(r, id, active, visit)
}

func (l *Log) scanFrames(r *Reader, id uint64, active bool, visit func(uint64, []byte) error) (int64, error) {
	for {
		payload, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, ErrTorn) {
			if !active {
				return 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
			}
			break
		}
		if err != nil {
			return 0, err
		}
		if err := visit(id, payload); err != nil {
			return 0, err
		}
	}
	valid := r.Offset()
	info, err := r.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("wal: stat segment %d: %w", id, err)
	}
	if info.Size() > valid {
		if !active {
			return 0, fmt.Errorf("%w: segment %d has %d trailing bytes", ErrCorrupt, id, info.Size()-valid)
		}
		if err := l.cutTail(SegmentPath(l.dir, id), valid); err != nil {
			return 0, err
		}
	}
	return valid, nil
}

// rewriteHeader replaces a torn header (no frame follows it) with a whole
// one, synced.
func (l *Log) rewriteHeader(path string) error {
	f, err := l.fs.OpenFile(path, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return fmt.Errorf("wal: rewrite torn segment header: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(appendHeader(nil)); err != nil {
		return fmt.Errorf("wal: rewrite torn segment header: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: sync rewritten segment header: %w", err)
	}
	return nil
}

func (l *Log) cutTail(path string, size int64) error {
	f, err := l.fs.OpenFile(path, os.O_WRONLY)
	if err != nil {
		return fmt.Errorf("wal: cut torn tail: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("wal: cut torn tail: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: sync after cutting torn tail: %w", err)
	}
	return nil
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Segments returns a copy of the segment list, oldest first; the last one is
// the active segment.
func (l *Log) Segments() []Segment {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.segs)
}

// Active is the active segment's number and size; ok is false before the
// first Rotate.
func (l *Log) Active() (seg Segment, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.segs) == 0 {
		return Segment{}, false
	}
	return l.segs[len(l.segs)-1], true
}

// Size is the total size of all segments in bytes.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// Written is the number of bytes written since Open (what wear costs;
// Size is what remains).
func (l *Log) Written() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written
}

// Write appends frames (one or more complete frames) to the active segment
// in one write, without syncing.
func (l *Log) Write(frames []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("wal: write: %w", os.ErrClosed)
	}
	if l.f == nil {
		panic("wal: Write before the first Rotate")
	}
	n, err := l.f.Write(frames)
	if err != nil && n > 0 {
		// A short write (the disk filled up) would leave a torn frame
		// that later frames follow: cut it, so a retry appends whole
		// frames (O_APPEND writes at the new end).
		if terr := l.f.Truncate(l.segs[len(l.segs)-1].Size); terr == nil {
			n = 0
		}
	}
	l.segs[len(l.segs)-1].Size += int64(n)
	l.total += int64(n)
	l.written += int64(n)
	if err != nil {
		return fmt.Errorf("wal: write: %w", err)
	}
	return nil
}

// Sync makes everything written so far durable. It may run concurrently
// with Write: data written before Sync started is durable when it returns.
func (l *Log) Sync() error {
	l.mu.Lock()
	f := l.f
	l.mu.Unlock()
	if f == nil {
		return nil
	}
	err := f.Sync()
	if errors.Is(err, os.ErrClosed) {
		// Rotated meanwhile: Rotate synced the file before closing it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("wal: sync: %w", err)
	}
	return nil
}

// Rotate syncs and closes the active segment, creates the next one starting
// with the segment header of FormatVersion and then header (complete
// frames, may be empty), syncs it and the directory.
// It returns the new segment's number.
func (l *Log) Rotate(header []byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, fmt.Errorf("wal: rotate: %w", os.ErrClosed)
	}
	next := uint64(1)
	if n := len(l.segs); n > 0 {
		next = l.segs[n-1].ID + 1
	}
	if l.f != nil {
		if err := l.f.Sync(); err != nil {
			return 0, fmt.Errorf("wal: sync before rotate: %w", err)
		}
		if err := l.f.Close(); err != nil {
			return 0, fmt.Errorf("wal: close before rotate: %w", err)
		}
		l.f = nil
	}
	f, err := l.fs.OpenFile(SegmentPath(l.dir, next), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return 0, fmt.Errorf("wal: create segment: %w", err)
	}
	if _, err := f.Write(append(appendHeader(make([]byte, 0, HeaderBytes+len(header))), header...)); err != nil {
		f.Close()
		return 0, fmt.Errorf("wal: write segment header: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, fmt.Errorf("wal: sync segment header: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		f.Close()
		return 0, fmt.Errorf("wal: sync dir: %w", err)
	}
	l.f = f
	size := int64(HeaderBytes + len(header))
	l.segs = append(l.segs, Segment{ID: next, Size: size})
	l.total += size
	l.written += size
	return next, nil
}

// Remove deletes segment id, which must not be the active one, and syncs
// the directory. Readers that have it open keep reading it.
func (l *Log) Remove(id uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.IndexFunc(l.segs, func(s Segment) bool { return s.ID == id })
	if i < 0 {
		return nil
	}
	if i == len(l.segs)-1 {
		panic(fmt.Sprintf("wal: Remove of the active segment %d", id))
	}
	if err := l.fs.Remove(SegmentPath(l.dir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("wal: remove segment %d: %w", id, err)
	}
	l.total -= l.segs[i].Size
	l.segs = slices.Delete(l.segs, i, i+1)
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("wal: sync dir: %w", err)
	}
	return nil
}

// Close syncs and closes the active segment.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Sync()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: close: %w", err)
	}
	return nil
}
