package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/eddy-edge/eddy/state/vfs"
)

// Segment header: magic and format version.
const (
	segmentMagic = "EDDYILOG"
	// segmentVersion is the format every log writes; oldestSegmentVersion
	// the oldest it reads. Version 4 added records with MQTT 5 properties
	// (recProps); a version 3 segment holds none, so it reads as it did.
	segmentVersion       = 4
	oldestSegmentVersion = 3
	headerLen            = len(segmentMagic) + 4
	segmentExt           = ".log"
	segmentDigits        = 20
)

// segment is one segment file as the log knows it.
type segment struct {
	first uint64 // offset of its first frame: its file name
	end   int64  // bytes of complete frames (plus header); the file size once sealed
}

func segmentName(first uint64) string {
	return fmt.Sprintf("%0*d%s", segmentDigits, first, segmentExt)
}

// parseSegmentName returns the first offset a segment file name holds.
func parseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentExt)
	if !ok || len(digits) != segmentDigits {
		return 0, false
	}
	first, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || first == 0 {
		return 0, false
	}
	return first, true
}

// listSegments returns the segments in dir, oldest first, with end set to
// the file size. Other files are ignored.
func listSegments(fsys vfs.FS, dir string) ([]segment, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("ingest: list segments: %w", err)
	}
	var segs []segment
	for _, name := range names {
		first, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		info, err := fsys.Stat(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("ingest: list segments: %w", err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		segs = append(segs, segment{first: first, end: info.Size()})
	}
	slices.SortFunc(segs, func(a, b segment) int { return cmpUint64(a.first, b.first) })
	return segs, nil
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func segmentHeader() []byte {
	h := make([]byte, 0, headerLen)
	h = append(h, segmentMagic...)
	return binary.LittleEndian.AppendUint32(h, segmentVersion)
}

// checkHeader verifies a segment's header: the magic and a version this
// build reads.
func checkHeader(f vfs.File) error {
	_, err := headerVersion(f)
	return err
}

// headerVersion verifies a segment's header and returns its version.
func headerVersion(f vfs.File) (uint32, error) {
	var h [headerLen]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, &CorruptionError{File: f.Name(), Reason: "segment shorter than its header"}
		}
		return 0, fmt.Errorf("ingest: read segment header: %w", err)
	}
	if string(h[:len(segmentMagic)]) != segmentMagic {
		return 0, &CorruptionError{File: f.Name(), Reason: "bad segment magic"}
	}
	v := binary.LittleEndian.Uint32(h[len(segmentMagic):])
	if v < oldestSegmentVersion || v > segmentVersion {
		by := "a development build before the first release"
		if v > segmentVersion {
			by = "a newer Eddy"
		}
		return 0, &CorruptionError{File: f.Name(), Reason: fmt.Sprintf("segment format version %d, this build reads versions %d to %d only (written by %s)", v, oldestSegmentVersion, segmentVersion, by)}
	}
	return v, nil
}

// createSegment creates the segment file for first with its header and
// makes the new directory entry durable. When that fails after the file
// was created, the file is removed again (the removal is not fsynced: a
// log undoing a batch syncs the directory itself, and Open rewrites a
// segment shorter than its header).
func createSegment(fsys vfs.FS, dir string, first uint64) (vfs.File, error) {
	path := filepath.Join(dir, segmentName(first))
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, fmt.Errorf("ingest: create segment: %w", err)
	}
	if _, err = f.WriteAt(segmentHeader(), 0); err != nil {
		err = fmt.Errorf("ingest: write segment header %s: %w", path, err)
	} else if err = fsys.SyncDir(dir); err != nil {
		err = fmt.Errorf("ingest: sync dir %s: %w", dir, err)
	}
	if err != nil {
		f.Close()
		fsys.Remove(path)
		return nil, err
	}
	return f, nil
}

// Recovery reports what Open found at the end of the last segment.
type Recovery struct {
	// Segment is the path of the last segment.
	Segment string
	// CutAt is the byte position where a torn tail was cut; CutBytes the
	// bytes removed (0: the segment ended cleanly).
	CutAt, CutBytes int64
}

// recoverLast scans the last segment (f, whose name says first), checks
// every frame and cuts a torn tail: bytes at the end that do not form a
// valid frame, with no valid frame after them. A failing frame followed by
// a valid one is corruption, never cut: cutting would drop entries that
// were acknowledged. It returns the offset after the last frame, the
// segment's end. A segment shorter than its header gets a whole header.
func recoverLast(f vfs.File, first uint64, size int64) (next uint64, end int64, rec Recovery, err error) {
	rec.Segment = f.Name()
	if size < int64(headerLen) {
		// Created but the header never fully reached the disk: rewrite it.
		if err := f.Truncate(0); err != nil {
			return 0, 0, rec, fmt.Errorf("ingest: reset segment %s: %w", f.Name(), err)
		}
		if _, err := f.WriteAt(segmentHeader(), 0); err != nil {
			return 0, 0, rec, fmt.Errorf("ingest: write segment header %s: %w", f.Name(), err)
		}
		if err := f.Sync(); err != nil {
			return 0, 0, rec, fmt.Errorf("ingest: sync segment %s: %w", f.Name(), err)
		}
		rec.CutBytes = size
		return first, int64(headerLen), rec, nil
	}
	if err = checkHeader(f); err != nil {
		return 0, 0, rec, err
	}
	var fr frameReader
	fr.reset(f, int64(headerLen), size)
	next = first
	for {
		pos := fr.pos()
		frm, st, reason, err := fr.next()
		if err != nil {
			return 0, 0, rec, fmt.Errorf("ingest: read segment %s: %w", f.Name(), err)
		}
		if st == frameOK {
			if frm.first != next {
				return 0, 0, rec, &CorruptionError{File: f.Name(), Pos: pos, Offset: next,
					Reason: fmt.Sprintf("frame holds offset %d", frm.first)}
			}
			if reason := checkRecords(&frm); reason != "" {
				return 0, 0, rec, &CorruptionError{File: f.Name(), Pos: pos, Offset: next, Reason: reason}
			}
			next += uint64(frm.count)
			continue
		}
		if pos == size {
			return next, size, rec, nil
		}
		if found, at, err := validFrameAfter(f, pos, size, next); err != nil {
			return 0, 0, rec, err
		} else if found {
			if reason == "" {
				reason = "incomplete frame"
			}
			return 0, 0, rec, &CorruptionError{File: f.Name(), Pos: pos, Offset: next,
				Reason: fmt.Sprintf("%s, followed by a valid frame at byte %d", reason, at)}
		}
		if err := f.Truncate(pos); err != nil {
			return 0, 0, rec, fmt.Errorf("ingest: cut torn tail of %s: %w", f.Name(), err)
		}
		if err := f.Sync(); err != nil {
			return 0, 0, rec, fmt.Errorf("ingest: sync segment %s: %w", f.Name(), err)
		}
		rec.CutAt, rec.CutBytes = pos, size-pos
		return next, pos, rec, nil
	}
}

// validFrameAfter reports whether a valid frame holding an offset ≥ next
// starts anywhere in (pos, size) of f. It reads the rest of the segment
// into memory, once, on this failure path only.
func validFrameAfter(f vfs.File, pos, size int64, next uint64) (bool, int64, error) {
	rest := make([]byte, size-pos)
	if _, err := f.ReadAt(rest, pos); err != nil && !errors.Is(err, io.EOF) {
		return false, 0, fmt.Errorf("ingest: read segment %s: %w", f.Name(), err)
	}
	// A frame holds its first offset right after the frame header, and at
	// least one record of 3 bytes. Checking the offset field first skips
	// almost every position without computing a CRC.
	maxOffset := next + uint64(len(rest)/3)
	var scratch []byte
	for i := 1; i+frameOverhead <= len(rest); i++ {
		off := binary.LittleEndian.Uint64(rest[i+frameHeaderLen:])
		if off < next || off > maxOffset {
			continue
		}
		var st frameStatus
		_, _, st, _, scratch = decodeFrame(rest[i:], scratch)
		if st == frameOK { // a whole frame: what precedes it is no torn tail
			return true, pos + int64(i), nil
		}
	}
	return false, 0, nil
}

// FirstOnDisk is the first offset the log in dir holds, read from its
// segments' names alone (1 for a log not created yet), for a reader that
// must leave the log as it is: Open recovers and creates segments.
func FirstOnDisk(dir string) (uint64, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return 1, nil
	}
	segs, err := listSegments(vfs.Default, dir)
	if err != nil {
		return 0, err
	}
	if len(segs) == 0 {
		return 1, nil
	}
	return segs[0].first, nil
}
