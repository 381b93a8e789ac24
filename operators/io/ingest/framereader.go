package ingest

import (
	"errors"
	"io"

	"github.com/eddy-edge/eddy/state/vfs"
)

// frameReaderChunk is how much a frameReader reads at a time.
const frameReaderChunk = 64 << 10

// frameReader decodes consecutive frames of one segment file through a
// reused buffer, never reading at or past limit (the end of the bytes known
// to be complete).
type frameReader struct {
	f          vfs.File
	buf        []byte
	scratch    []byte // decompressed records of the last frame
	start, end int    // unread bytes are buf[start:end]
	filePos    int64  // file position of buf[end]
	limit      int64
}

func (fr *frameReader) reset(f vfs.File, pos, limit int64) {
	fr.f, fr.start, fr.end, fr.filePos, fr.limit = f, 0, 0, pos, limit
	if fr.buf == nil {
		fr.buf = make([]byte, frameReaderChunk)
	}
}

// pos is the file position of the next frame.
func (fr *frameReader) pos() int64 { return fr.filePos - int64(fr.end-fr.start) }

// next decodes the frame at pos(). On frameOK it advances past it; the
// frame aliases the reader's buffers until the next call. On frameShort the
// bytes up to limit end inside the frame (or exactly at pos when pos() ==
// limit).
func (fr *frameReader) next() (frame, frameStatus, string, error) {
	for {
		var f frame
		var size int
		var st frameStatus
		var reason string
		f, size, st, reason, fr.scratch = decodeFrame(fr.buf[fr.start:fr.end], fr.scratch)
		switch st {
		case frameOK:
			fr.start += size
			return f, st, "", nil
		case frameBad:
			return frame{}, st, reason, nil
		}
		if fr.filePos >= fr.limit || fr.pos()+int64(size) > fr.limit {
			return frame{}, frameShort, "", nil
		}
		if err := fr.fill(size); err != nil {
			return frame{}, 0, "", err
		}
	}
}

// skip moves past the size bytes of a whole, published frame at pos()
// without reading them (the bytes up to it are known complete).
func (fr *frameReader) skip(size int) {
	if fr.end-fr.start >= size {
		fr.start += size
		return
	}
	pos := fr.pos() + int64(size)
	fr.start, fr.end, fr.filePos = 0, 0, pos
	fr.limit = max(fr.limit, pos)
}

// fill makes at least need unread bytes available, reading ahead up to the
// buffer's capacity and limit. The caller checked that limit allows need.
func (fr *frameReader) fill(need int) error {
	if need > len(fr.buf) {
		nb := make([]byte, max(need, 2*len(fr.buf)))
		fr.end = copy(nb, fr.buf[fr.start:fr.end])
		fr.buf, fr.start = nb, 0
	} else if fr.start > 0 {
		fr.end = copy(fr.buf, fr.buf[fr.start:fr.end])
		fr.start = 0
	}
	for fr.end < need {
		room := min(int64(len(fr.buf)-fr.end), fr.limit-fr.filePos)
		n, err := fr.f.ReadAt(fr.buf[fr.end:fr.end+int(room)], fr.filePos)
		fr.end += n
		fr.filePos += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				if fr.end >= need {
					return nil
				}
				// The file is shorter than limit says: someone cut it.
				fr.limit = fr.filePos
				return nil
			}
			return err
		}
	}
	return nil
}
