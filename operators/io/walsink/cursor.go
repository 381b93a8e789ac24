package walsink

import (
	"errors"
	"io"
	"os"

	"github.com/eddy-edge/eddy/operators/io/walsink/wal"
)

// cursor reads the WAL's data records in seq order across segments, for the
// publisher (and drop_oldest). Peek returns the next data record without
// consuming it, so the publisher can stop at the committed boundary and
// look again once more is committed. Not safe for concurrent use.
type cursor struct {
	log     *wal.Log
	r       *wal.Reader // nil until a segment ≥ start exists
	start   uint64      // segment to open when r is nil
	peeked  dataRecord
	hasPeek bool
}

// newCursor starts reading at the beginning of segment seg.
func newCursor(l *wal.Log, seg uint64) *cursor {
	return &cursor{log: l, start: seg}
}

// peek returns the next data record; ok is false when none is written yet.
// The record's slices are valid until the next peek after advance.
func (c *cursor) peek() (d dataRecord, ok bool, err error) {
	if c.hasPeek {
		return c.peeked, true, nil
	}
	if c.r == nil {
		if err := c.openFrom(c.start); err != nil {
			return dataRecord{}, false, err
		}
		if c.r == nil {
			return dataRecord{}, false, nil
		}
	}
	retried := false
	for {
		p, err := c.r.Next()
		switch {
		case errors.Is(err, io.EOF):
			next, found := c.nextSegment()
			if !found {
				return dataRecord{}, false, nil
			}
			if !retried {
				// The segment may have received its last frames between our
				// EOF and its rotation: read it once more before leaving it.
				retried = true
				continue
			}
			c.r.Close()
			c.r = nil
			if err := c.openFrom(next); err != nil {
				return dataRecord{}, false, err
			}
			if c.r == nil {
				return dataRecord{}, false, nil
			}
			retried = false
			continue
		case err != nil:
			return dataRecord{}, false, err
		}
		if p[0] != kindDataCompact {
			continue
		}
		d, err := decodeData(p)
		if err != nil {
			return dataRecord{}, false, err
		}
		c.peeked, c.hasPeek = d, true
		return d, true, nil
	}
}

// advance consumes the record peek returned.
func (c *cursor) advance() { c.hasPeek = false }

// openFrom opens the first existing segment with number ≥ seg, or leaves
// r nil (to retry later) when there is none.
func (c *cursor) openFrom(seg uint64) error {
	for _, s := range c.log.Segments() {
		if s.ID < seg {
			continue
		}
		r, err := c.log.OpenReader(s.ID, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted meanwhile: it held nothing left to publish
		}
		if err != nil {
			return err
		}
		c.r = r
		return nil
	}
	c.start = seg
	return nil
}

func (c *cursor) nextSegment() (uint64, bool) {
	for _, s := range c.log.Segments() {
		if s.ID > c.r.Segment() {
			return s.ID, true
		}
	}
	return 0, false
}

func (c *cursor) close() {
	if c.r != nil {
		c.r.Close()
		c.r = nil
	}
}
