package ingest

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eddy-edge/eddy/state/vfs"
)

// TestReader_FromEveryOffset replays from every offset, across segment
// boundaries, including LastOffset()+1 (nothing to read yet).
func TestReader_FromEveryOffset(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20})
	defer l.Close()
	const n = 120
	mustAppend(t, l, n, 11)
	for from := uint64(1); from <= n+1; from++ {
		if got := readAll(t, l, from); got != int(n+1-from) {
			t.Fatalf("from %d: read %d entries, want %d", from, got, n+1-from)
		}
	}
	if got := readAll(t, l, 0); got != n {
		t.Fatalf("from 0: read %d", got)
	}
	if _, err := l.Reader(n + 2); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Reader(%d) = %v, want ErrOutOfRange", n+2, err)
	}
}

// TestReader_ResumesAfterEOF reads to the end, appends more, and reads on
// with the same Reader, across a roll.
func TestReader_ResumesAfterEOF(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20})
	defer l.Close()
	r, err := l.Reader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	next := uint64(1)
	for round := range 20 {
		if _, err := r.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("round %d: Next at the end = %v, want EOF", round, err)
		}
		mustAppend(t, l, round+1, 4)
		for range round + 1 {
			e, err := r.Next()
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			checkEntry(t, e, next)
			next++
		}
	}
}

// TestReader_CorruptEarlierSegment flips a byte in a sealed segment: the
// Reader stops with a CorruptionError naming that file, and Open (which
// scans only the last segment) still succeeds.
func TestReader_CorruptEarlierSegment(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
		reason string
	}{
		{"payload flip", func(t *testing.T, p string) { flip(t, p, int64(headerLen)+frameOverhead+30+2) }, "checksum"},
		{"cut inside a frame", func(t *testing.T, p string) {
			info, _ := os.Stat(p)
			os.Truncate(p, info.Size()-3)
		}, "inside a frame"},
		{"last frame removed", func(t *testing.T, p string) {
			info, _ := os.Stat(p)
			os.Truncate(p, info.Size()-int64(len(testFrame(lastInFirstSegment, lastInFirstSegment))))
		}, "no segment starts there"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20}
			l := mustOpen(t, dir, opts)
			mustAppend(t, l, 40, 1)
			l.Close()
			segs, _ := listSegments(vfs.Default, dir)
			if segs[1].first-1 != lastInFirstSegment {
				t.Fatalf("first segment ends at %d; the test assumes %d", segs[1].first-1, lastInFirstSegment)
			}
			path := filepath.Join(dir, segmentName(segs[0].first))
			tt.damage(t, path)
			l = mustOpen(t, dir, opts)
			defer l.Close()
			r, err := l.Reader(0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for {
				_, err = r.Next()
				if err != nil {
					break
				}
			}
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.File != path || !strings.Contains(ce.Reason, tt.reason) {
				t.Fatalf("Next = %v, want corruption of %s (%s)", err, path, tt.reason)
			}
			t.Log(err)
			// Reading after the damaged segment works.
			readAll(t, l, segs[1].first)
		})
	}
}

// lastInFirstSegment is the last offset of the first 1 KiB segment when
// the test entries are appended one at a time.
const lastInFirstSegment = 8

// TestReader_TruncatedWhileReading deletes segments under a Reader: it
// finishes the segment it has open and then reports ErrTruncated.
func TestReader_TruncatedWhileReading(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20})
	defer l.Close()
	mustAppend(t, l, 60, 3)
	r, err := l.Reader(1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	e, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	checkEntry(t, e, 1)
	if err := l.Truncate(50); err != nil {
		t.Fatal(err)
	}
	segs, _ := listSegments(vfs.Default, dir)
	var read uint64 = 1
	for {
		e, err := r.Next()
		if errors.Is(err, ErrTruncated) {
			break
		}
		if err != nil {
			t.Fatalf("Next after %d: %v", read, err)
		}
		checkEntry(t, e, read+1)
		read++
	}
	if read+1 >= segs[0].first {
		t.Fatalf("read up to %d, first retained %d: expected ErrTruncated before it", read, segs[0].first)
	}
}

func TestReader_NextDoesNotAllocate(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{SegmentBytes: 1 << 20, MaxDiskBytes: 4 << 20})
	defer l.Close()
	mustAppend(t, l, 2000, 100)
	r, err := l.Reader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Next allocates %.2f times per entry", allocs)
	}
}

// TestReader_FollowsTheTailFromMemory: a reader at the end of a
// compressing log takes each new batch's records from the log, reading
// nothing back from the segment file (and decompressing nothing); one
// frame that is not the last batch's is read from the file as ever.
func TestReader_FollowsTheTailFromMemory(t *testing.T) {
	for _, tt := range []struct {
		c        Compression
		fromFile bool
	}{{CompressNone, true}, {CompressS2, false}, {CompressZstd, false}} {
		t.Run(tt.c.String(), func(t *testing.T) {
			var read atomic.Int64
			l := mustOpen(t, t.TempDir(), Options{Compression: tt.c, FS: countingFS{vfs.Default, &read}})
			defer l.Close()
			mustAppend(t, l, 100, 100)
			r, err := l.Reader(l.LastOffset() + 1)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.Next(); !errors.Is(err, io.EOF) { // past the first batch, read from the file
				t.Fatalf("Next at the end: %v, want io.EOF", err)
			}
			read.Store(0)
			for range 20 {
				next := l.LastOffset() + 1
				mustAppend(t, l, 50, 50)
				for off := next; off < next+50; off++ {
					e, err := r.Next()
					if err != nil {
						t.Fatalf("Next at %d: %v", off, err)
					}
					checkEntry(t, e, off)
				}
				if _, err := r.Next(); !errors.Is(err, io.EOF) {
					t.Fatalf("Next after the batch: %v, want io.EOF", err)
				}
			}
			if got := read.Load() > 0; got != tt.fromFile {
				t.Fatalf("%d bytes read back from the segment while following the log's end", read.Load())
			}
			if n := readAll(t, l, 1); n != 1100 {
				t.Fatalf("read %d entries from the start, want 1100", n)
			}
		})
	}
}

// countingFS counts the bytes read through ReadAt from the files it opens
// for reading.
type countingFS struct {
	vfs.FS
	read *atomic.Int64
}

func (c countingFS) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return countingFile{f, c.read}, nil
}

type countingFile struct {
	vfs.File
	read *atomic.Int64
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.read.Add(int64(n))
	return n, err
}
