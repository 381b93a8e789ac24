package ingest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/eddy-edge/eddy/state/vfs"
)

// Reader iterates over the entries of a Log in offset order, across
// segments, checking every frame. It is not safe for concurrent use; open
// one Reader per consumer.
type Reader struct {
	l        *Log
	from     uint64 // entries below are skipped
	next     uint64 // offset the next frame must hold
	segFirst uint64 // the segment being read
	f        vfs.File
	fr       frameReader
	// The frame being read: its entries from cur.first+done on are left.
	cur     frame
	curPos  int64 // file position of cur
	done    int
	records recordCursor
}

// Reader returns a Reader positioned at offset from; 0 means FirstOffset().
// from may be LastOffset()+1: the Reader then waits at the end for new
// entries. Errors: ErrTruncated when from < FirstOffset(), ErrOutOfRange
// when from > LastOffset()+1, ErrClosed after Close.
//
// Positioning reads the segment holding from up to it (there is no index):
// at most one segment's bytes.
func (l *Log) Reader(from uint64) (*Reader, error) {
	if l.isShut.Load() {
		return nil, ErrClosed
	}
	l.vis.RLock()
	first, last := l.segs[0].first, l.last.Load()
	if from == 0 {
		from = first
	}
	if from < first {
		l.vis.RUnlock()
		return nil, fmt.Errorf("%w: offset %d is below the first retained offset %d", ErrTruncated, from, first)
	}
	if from > last+1 {
		l.vis.RUnlock()
		return nil, fmt.Errorf("%w: offset %d, last offset %d", ErrOutOfRange, from, last)
	}
	// The segment holding from: the last one starting at or before it.
	i, found := slices.BinarySearchFunc(l.segs, from, func(s segment, off uint64) int { return cmpUint64(s.first, off) })
	if !found {
		i--
	}
	s := l.segs[i]
	l.vis.RUnlock()
	r := &Reader{l: l, from: from}
	if err := r.open(s); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reader) open(s segment) error {
	path := filepath.Join(r.l.dir, segmentName(s.first))
	f, err := r.l.fs.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: segment %s was deleted", ErrTruncated, path)
		}
		return fmt.Errorf("ingest: open segment: %w", err)
	}
	if err := checkHeader(f); err != nil {
		f.Close()
		return err
	}
	r.f, r.segFirst, r.next = f, s.first, s.first
	r.fr.reset(f, int64(headerLen), s.end)
	r.cur, r.done = frame{}, 0
	return nil
}

// Next returns the next entry. At the end of the visible log it returns
// io.EOF; the Reader stays usable, and Next returns new entries once they
// are appended (use Log.Wait to learn when). Topic and Payload alias the
// Reader's buffer and are valid until the next call to Next or Close.
//
// A frame that fails its checks, a segment that ends inside a frame and a
// gap between segments are *CorruptionError (errors.Is(err, ErrCorrupt)),
// naming the file and byte position; the Reader does not skip past them.
// ErrTruncated means the next segment was deleted by Truncate while the
// Reader lagged behind.
func (r *Reader) Next() (Entry, error) {
	if r.f == nil {
		return Entry{}, fmt.Errorf("ingest: reader: %w", os.ErrClosed)
	}
	for {
		for r.done < r.cur.count {
			var e Entry
			if reason := r.records.next(&e); reason != "" {
				return Entry{}, r.corrupt(r.curPos, reason)
			}
			e.Offset = r.next
			r.done++
			r.next++
			if e.Offset < r.from {
				continue
			}
			return e, nil
		}
		pos := r.fr.pos()
		// Following the log's end: the frame was just appended, and the log
		// still holds its records.
		f, size, scratch, ok := r.l.tailRecords(r.segFirst, pos, r.fr.scratch)
		r.fr.scratch = scratch
		if ok && f.first == r.next {
			r.fr.skip(size)
			r.cur, r.curPos, r.done = f, pos, 0
			r.records.reset(&r.cur)
			continue
		}
		f, st, reason, err := r.fr.next()
		if err != nil {
			return Entry{}, fmt.Errorf("ingest: read segment %s: %w", r.f.Name(), err)
		}
		switch st {
		case frameOK:
			if f.first != r.next {
				return Entry{}, r.corrupt(pos, fmt.Sprintf("frame holds offset %d", f.first))
			}
			r.cur, r.curPos, r.done = f, pos, 0
			r.records.reset(&r.cur)
			continue
		case frameBad:
			return Entry{}, r.corrupt(pos, reason)
		}
		more, err := r.advance(pos)
		if err != nil {
			return Entry{}, err
		}
		if !more {
			return Entry{}, io.EOF
		}
	}
}

// advance is called when the frame at pos runs past the reader's limit. It
// learns how far the current segment now extends and, at the end of a
// sealed segment, moves to the next one. It reports whether there may be
// more to read.
func (r *Reader) advance(pos int64) (bool, error) {
	l := r.l
	l.vis.RLock()
	i, found := slices.BinarySearchFunc(l.segs, r.segFirst, func(s segment, off uint64) int { return cmpUint64(s.first, off) })
	var end int64
	sealed := true
	if found {
		end, sealed = l.segs[i].end, i < len(l.segs)-1
	}
	l.vis.RUnlock()
	if !found {
		// Truncated while we read it: it was sealed, so its file is final.
		info, err := r.f.Stat()
		if err != nil {
			return false, fmt.Errorf("ingest: stat segment %s: %w", r.f.Name(), err)
		}
		end = info.Size()
	}
	if end > r.fr.limit {
		r.fr.limit = end
		return true, nil
	}
	if !sealed {
		return false, nil
	}
	if pos != end {
		return false, r.corrupt(pos, "segment ends inside a frame")
	}
	l.vis.RLock()
	j, ok := slices.BinarySearchFunc(l.segs, r.next, func(s segment, off uint64) int { return cmpUint64(s.first, off) })
	var s segment
	if ok {
		s = l.segs[j]
	}
	oldest := l.segs[0].first
	l.vis.RUnlock()
	if !ok {
		if r.next < oldest {
			return false, fmt.Errorf("%w: offset %d is below the first retained offset %d", ErrTruncated, r.next, oldest)
		}
		return false, r.corrupt(pos, fmt.Sprintf("segment ends before offset %d, and no segment starts there", r.next))
	}
	r.f.Close()
	r.f = nil
	if err := r.open(s); err != nil {
		return false, err
	}
	return true, nil
}

func (r *Reader) corrupt(pos int64, reason string) error {
	return &CorruptionError{File: r.f.Name(), Pos: pos, Offset: r.next, Reason: reason}
}

// Close releases the Reader's file. Next after Close returns an error.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
