package wal

import (
	"errors"
	"fmt"
	"io"

	"github.com/eddy-edge/eddy/state/vfs"
)

// ErrTorn is returned by Reader.Next at an invalid frame (bad length or
// CRC). In the active segment it marks a torn tail; elsewhere corruption.
var ErrTorn = errors.New("wal: invalid frame")

const readChunkBytes = 64 << 10

// Reader reads the frames of one segment in order, through a reused buffer.
// It can read the active segment while it is being appended to: at the end
// of what has been written so far (or at a partly written frame) Next
// returns io.EOF without moving, and a later Next sees what was appended
// since. A Reader is not safe for concurrent use.
type Reader struct {
	f     vfs.File
	seg   uint64
	off   int64 // file offset of buf[start]
	buf   []byte
	start int
	end   int
}

// errTornHeader is returned (wrapped) by OpenReader for a segment shorter
// than its header: in the active segment, a crash during Rotate.
var errTornHeader = fmt.Errorf("%w: segment ends inside its header", ErrCorrupt)

// OpenReader opens segment seg of the log for reading from offset off, which
// must be a frame boundary: 0 for the first frame (after the header), or an
// offset returned by Offset. It checks the segment's header: ErrVersion for
// a format version other than FormatVersion, ErrCorrupt for a segment that
// does not start with the header or ends inside it.
func (l *Log) OpenReader(seg uint64, off int64) (*Reader, error) {
	f, err := l.fs.Open(SegmentPath(l.dir, seg))
	if err != nil {
		return nil, fmt.Errorf("wal: open segment %d for reading: %w", seg, err)
	}
	var h [HeaderBytes]byte
	n, err := f.ReadAt(h[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("wal: read segment %d header: %w", seg, err)
	}
	r := &Reader{f: f, seg: seg, off: off, buf: make([]byte, readChunkBytes)}
	switch kind, v := parseHeader(h[:n]); kind {
	case headerVersioned:
		if v != FormatVersion {
			f.Close()
			return nil, fmt.Errorf("%w: %s is format version %d, this build reads version %d only (%s)",
				ErrVersion, SegmentPath(l.dir, seg), v, FormatVersion, writtenBy(v, FormatVersion))
		}
		r.off = max(off, int64(HeaderBytes))
	case headerTorn:
		f.Close()
		return nil, fmt.Errorf("%w (segment %d, %d bytes)", errTornHeader, seg, n)
	default:
		f.Close()
		return nil, fmt.Errorf("%w: %s does not start with the segment header", ErrCorrupt, SegmentPath(l.dir, seg))
	}
	return r, nil
}

// Segment is the number of the segment being read.
func (r *Reader) Segment() uint64 { return r.seg }

// Offset is the file offset of the next frame Next will return.
func (r *Reader) Offset() int64 { return r.off }

// Next returns the payload of the next frame. The payload is valid until
// the next call of Next or Close; the caller must not modify it. It returns
// io.EOF at the end of the written data, ErrTorn (wrapped, with the offset)
// at an invalid frame, and other errors for failed reads.
func (r *Reader) Next() ([]byte, error) {
	for {
		payload, n, bad := parseFrame(r.buf[r.start:r.end])
		if bad {
			return nil, fmt.Errorf("%w: segment %d offset %d", ErrTorn, r.seg, r.off)
		}
		if n > 0 {
			r.start += n
			r.off += int64(n)
			return payload, nil
		}
		more, err := r.fill()
		if err != nil {
			return nil, err
		}
		if !more {
			return nil, io.EOF
		}
	}
}

// fill reads more of the file after the buffered bytes, growing the buffer
// when a frame is larger than it. It reports false at end of file.
func (r *Reader) fill() (bool, error) {
	buffered := r.end - r.start
	copy(r.buf, r.buf[r.start:r.end])
	r.start, r.end = 0, buffered
	if r.end == len(r.buf) {
		r.buf = append(r.buf, make([]byte, len(r.buf))...)
	}
	n, err := r.f.ReadAt(r.buf[r.end:], r.off+int64(buffered))
	r.end += n
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("wal: read segment %d: %w", r.seg, err)
	}
	return n > 0, nil
}

// Close releases the file.
func (r *Reader) Close() error { return r.f.Close() }

// writtenBy says which build wrote a segment of format version v, for the
// error that refuses it.
func writtenBy(v, current uint32) string {
	if v > current {
		return "written by a newer Eddy"
	}
	return "written by a development build before the first release"
}
