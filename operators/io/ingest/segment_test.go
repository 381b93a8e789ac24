package ingest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/state/vfs"
)

func TestSegmentName_RoundTrip(t *testing.T) {
	for _, first := range []uint64{1, 52311, 1<<64 - 1} {
		name := segmentName(first)
		if len(name) != segmentDigits+len(segmentExt) {
			t.Fatalf("name %q has the wrong length", name)
		}
		if got, ok := parseSegmentName(name); !ok || got != first {
			t.Fatalf("parse(%q) = %d, %v", name, got, ok)
		}
	}
	for _, bad := range []string{"1.log", "00000000000000000001.tmp", "0000000000000000000x.log", "00000000000000000000.log", "LOCK"} {
		if _, ok := parseSegmentName(bad); ok {
			t.Fatalf("parse(%q) accepted", bad)
		}
	}
}

// lastSegmentPath returns the newest segment file of dir.
func lastSegmentPath(t *testing.T, dir string) string {
	t.Helper()
	segs, err := listSegments(vfs.Default, dir)
	if err != nil || len(segs) == 0 {
		t.Fatalf("listSegments: %v, %d segments", err, len(segs))
	}
	return filepath.Join(dir, segmentName(segs[len(segs)-1].first))
}

// copyDir copies the segment files of src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range ents {
		b, err := os.ReadFile(filepath.Join(src, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, de.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestOpen_TornTail_EveryPosition cuts the last frame at every byte
// position (what a crash during its write can leave) and checks that Open
// cuts it off, keeps everything before it and appends densely after it.
func TestOpen_TornTail_EveryPosition(t *testing.T) {
	src := t.TempDir()
	l := mustOpen(t, src, Options{SegmentBytes: 4 << 10, MaxDiskBytes: 1 << 20})
	mustAppend(t, l, 40, 7) // several segments
	l.Close()
	path := lastSegmentPath(t, src)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The last Append (of 7) held offsets 36..40, in one frame.
	lastFrame := len(testFrame(36, 40))
	frameStart := len(full) - lastFrame
	for cut := frameStart; cut < len(full); cut++ {
		dir := copyDir(t, src)
		p := filepath.Join(dir, filepath.Base(path))
		if err := os.Truncate(p, int64(cut)); err != nil {
			t.Fatal(err)
		}
		l := mustOpen(t, dir, Options{SegmentBytes: 4 << 10, MaxDiskBytes: 1 << 20})
		rec := l.Recovery()
		if rec.CutAt != int64(frameStart) && cut != frameStart || rec.CutBytes != int64(cut-frameStart) {
			t.Fatalf("cut at %d: recovery %+v, want cut at %d of %d bytes", cut, rec, frameStart, cut-frameStart)
		}
		if got := l.LastOffset(); got != 35 {
			t.Fatalf("cut at %d: last offset %d, want 35", cut, got)
		}
		if info, _ := os.Stat(p); info.Size() != int64(frameStart) {
			t.Fatalf("cut at %d: file is %d bytes, want %d", cut, info.Size(), frameStart)
		}
		mustAppend(t, l, 3, 3)
		readAll(t, l, 0)
		l.Close()
	}
}

// TestOpen_Damage flips or cuts bytes and checks which damage is cut as a
// torn tail and which is reported as corruption.
func TestOpen_Damage(t *testing.T) {
	tests := []struct {
		name     string
		damage   func(t *testing.T, dir string, frames []int64) // frames: start of each frame in the last segment
		wantLast uint64
		corrupt  bool
		reason   string // in the CorruptionError, when corrupt
	}{
		{"crc flip in last frame is cut", func(t *testing.T, dir string, fr []int64) {
			flip(t, lastSegmentPath(t, dir), fr[len(fr)-1]+5)
		}, 9, false, ""},
		{"payload flip in last frame is cut", func(t *testing.T, dir string, fr []int64) {
			flip(t, lastSegmentPath(t, dir), fr[len(fr)-1]+frameOverhead+3)
		}, 9, false, ""},
		{"length flip in last frame is cut", func(t *testing.T, dir string, fr []int64) {
			flip(t, lastSegmentPath(t, dir), fr[len(fr)-1]+2)
		}, 9, false, ""},
		{"zeros appended are cut", func(t *testing.T, dir string, fr []int64) {
			f, _ := os.OpenFile(lastSegmentPath(t, dir), os.O_WRONLY|os.O_APPEND, 0)
			f.Write(make([]byte, 300))
			f.Close()
		}, 10, false, ""},
		{"flip in a middle frame is corruption", func(t *testing.T, dir string, fr []int64) {
			flip(t, lastSegmentPath(t, dir), fr[4]+frameOverhead+1)
		}, 0, true, ""},
		{"length flip in a middle frame is corruption", func(t *testing.T, dir string, fr []int64) {
			flip(t, lastSegmentPath(t, dir), fr[2]+1)
		}, 0, true, ""},
		{"bad magic is corruption", func(t *testing.T, dir string, fr []int64) {
			flip(t, lastSegmentPath(t, dir), 0)
		}, 0, true, ""},
		{"short header is rewritten", func(t *testing.T, dir string, fr []int64) {
			p := lastSegmentPath(t, dir)
			os.Remove(p)
			os.WriteFile(filepath.Join(dir, segmentName(11)), []byte("EDDY"), 0o644)
		}, 10, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, Options{})
			var frames []int64
			for range 10 {
				frames = append(frames, l.writeEnd)
				mustAppend(t, l, 1, 1)
			}
			l.Close()
			tt.damage(t, dir, frames)
			l, err := Open(dir, Options{})
			if tt.corrupt {
				var ce *CorruptionError
				if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.File == "" || !strings.Contains(ce.Reason, tt.reason) {
					t.Fatalf("Open = %v, want a CorruptionError (%s)", err, tt.reason)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer l.Close()
			if got := l.LastOffset(); got != tt.wantLast {
				t.Fatalf("last offset %d, want %d", got, tt.wantLast)
			}
			mustAppend(t, l, 2, 2)
			readAll(t, l, 0)
		})
	}
}

func flip(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		t.Fatalf("flip at %d: %v", pos, err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
}

// TestFirstOnDisk: the first offset read from the segments' names alone is
// the open log's FirstOffset, before and after a truncation, and 1 for a
// log never created; the directory is left as it was.
func TestFirstOnDisk(t *testing.T) {
	dir := t.TempDir()
	if first, err := FirstOnDisk(filepath.Join(dir, "none")); err != nil || first != 1 {
		t.Fatalf("FirstOnDisk of a missing log = %d, %v; want 1", first, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); !os.IsNotExist(err) {
		t.Fatalf("FirstOnDisk created the log's directory: %v", err)
	}
	l := mustOpen(t, dir, Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20})
	defer l.Close()
	mustAppend(t, l, 200, 4)
	for _, below := range []uint64{1, 100} {
		if err := l.Truncate(below); err != nil {
			t.Fatal(err)
		}
		if first, err := FirstOnDisk(dir); err != nil || first != l.FirstOffset() {
			t.Fatalf("after Truncate(%d): FirstOnDisk = %d, %v; FirstOffset %d", below, first, err, l.FirstOffset())
		}
	}
	if l.FirstOffset() == 1 {
		t.Fatal("Truncate(100) dropped no segment: the test shows nothing")
	}
}
