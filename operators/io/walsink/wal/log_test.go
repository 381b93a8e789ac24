package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

func frames(payloads ...string) []byte {
	var b []byte
	for _, p := range payloads {
		b = AppendFrame(b, []byte(p))
	}
	return b
}

func collect(t *testing.T, dir string) (*Log, []string, error) {
	t.Helper()
	var got []string
	l, err := Open(nil, dir, func(seg uint64, p []byte) error {
		got = append(got, fmt.Sprintf("%d:%s", seg, p))
		return nil
	})
	return l, got, err
}

func TestLog_WriteRotateReopen(t *testing.T) {
	dir := t.TempDir()
	l, got, err := collect(t, dir)
	if err != nil || len(got) != 0 {
		t.Fatalf("open empty: %v %v", got, err)
	}
	if _, err := l.Rotate(frames("h1")); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(frames("a", "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Rotate(frames("h2")); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(frames("c")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	size := l.Size()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, got, err = collect(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if want := "[1:h1 1:a 1:b 2:h2 2:c]"; fmt.Sprint(got) != want {
		t.Errorf("replay %v, want %s", got, want)
	}
	if l.Size() != size {
		t.Errorf("size %d after reopen, want %d", l.Size(), size)
	}
	if err := l.Remove(1); err != nil {
		t.Fatal(err)
	}
	if segs := l.Segments(); len(segs) != 1 || segs[0].ID != 2 {
		t.Errorf("segments after Remove(1): %v", segs)
	}
}

// TestLog_TornTail cuts the active segment at every byte of its last frame
// and at a flipped bit: Open keeps exactly the complete frames before it.
func TestLog_TornTail(t *testing.T) {
	whole := frames("h", "first", "second")
	keep := len(frames("h", "first"))
	cases := map[string][]byte{}
	for cut := keep; cut < len(whole); cut++ {
		cases[fmt.Sprintf("cut at %d", cut)] = whole[:cut]
	}
	flipped := bytes.Clone(whole)
	flipped[len(flipped)-1] ^= 1
	cases["bad crc"] = flipped
	zeroed := append(bytes.Clone(whole[:keep]), make([]byte, 64)...)
	cases["zero-filled tail"] = zeroed
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(SegmentPath(dir, 1), append(appendHeader(nil), content...), 0o644); err != nil {
				t.Fatal(err)
			}
			l, got, err := collect(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			if want := "[1:h 1:first]"; fmt.Sprint(got) != want {
				t.Errorf("replay %v, want %s", got, want)
			}
			if err := l.Write(frames("third")); err != nil {
				t.Fatal(err)
			}
			l.Close()
			_, got, err = collect(t, dir)
			if want := "[1:h 1:first 1:third]"; err != nil || fmt.Sprint(got) != want {
				t.Errorf("after append: %v %v, want %s", got, err, want)
			}
		})
	}
}

// TestLog_SegmentHeader: what Open makes of a segment's first bytes, for the
// active segment and an older one.
func TestLog_SegmentHeader(t *testing.T) {
	header := appendHeader(nil)
	newer := append([]byte(headerMagic), FormatVersion+1, 0, 0, 0)
	older := append([]byte(headerMagic), FormatVersion-1, 0, 0, 0)
	for _, tc := range []struct {
		name     string
		content  []byte
		active   bool
		want     string // replay, or the error's sentinel
		wantSize int64
	}{
		{"current", append(bytes.Clone(header), frames("a")...), false, "[1:a]", 0},
		{"no header", frames("a"), false, "ErrCorrupt", 0},
		{"no header, active", frames("a"), true, "ErrCorrupt", 0},
		{"older format version", append(bytes.Clone(older), frames("a")...), false, "ErrVersion", 0},
		{"older format version, active", append(bytes.Clone(older), frames("a")...), true, "ErrVersion", 0},
		{"newer format version", append(bytes.Clone(newer), frames("a")...), false, "ErrVersion", 0},
		{"newer format version, active", append(bytes.Clone(newer), frames("a")...), true, "ErrVersion", 0},
		{"neither header nor frame", append([]byte("NOTAWAL!"), frames("a")...), false, "ErrCorrupt", 0},
		{"torn header, older segment", header[:7], false, "ErrCorrupt", 0},
		{"torn header, active", header[:7], true, "[]", int64(HeaderBytes)},
		{"magic and part of another version, active", append([]byte(headerMagic), '0'), true, "[]", int64(HeaderBytes)},
		{"magic and part of another version, older segment", append([]byte(headerMagic), '0'), false, "ErrCorrupt", 0},
		{"empty, active", nil, true, "[]", int64(HeaderBytes)},
		{"header only, active", header, true, "[]", int64(HeaderBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			id := uint64(1)
			if err := os.WriteFile(SegmentPath(dir, id), tc.content, 0o644); err != nil {
				t.Fatal(err)
			}
			if !tc.active {
				// A later, current segment makes this one an older one.
				if err := os.WriteFile(SegmentPath(dir, 2), header, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			l, got, err := collect(t, dir)
			switch tc.want {
			case "ErrVersion", "ErrCorrupt":
				sentinel := map[string]error{"ErrVersion": ErrVersion, "ErrCorrupt": ErrCorrupt}[tc.want]
				if !errors.Is(err, sentinel) {
					t.Fatalf("Open = %v, want %s", err, tc.want)
				}
				if tc.want == "ErrVersion" {
					if errors.Is(err, ErrCorrupt) {
						t.Errorf("Open = %v: another format version is not corruption", err)
					}
					// The error names the file, the version found and the one read.
					for _, part := range []string{SegmentPath(dir, id), fmt.Sprintf("version %d,", tc.content[8]), fmt.Sprintf("reads version %d only", FormatVersion)} {
						if !strings.Contains(err.Error(), part) {
							t.Errorf("Open = %v, want it to name %q", err, part)
						}
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer l.Close()
			if fmt.Sprint(got) != tc.want {
				t.Errorf("replay %v, want %s", got, tc.want)
			}
			seg := l.Segments()[0]
			if tc.wantSize > 0 {
				info, err := os.Stat(SegmentPath(dir, id))
				if err != nil || info.Size() != tc.wantSize || seg.Size != tc.wantSize {
					t.Errorf("segment size %v (file %v, %v), want %d", seg.Size, info.Size(), err, tc.wantSize)
				}
			}
		})
	}
}

// TestLog_RotateWritesHeader: every segment Rotate creates starts with the
// magic and the current format version.
func TestLog_RotateWritesHeader(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := collect(t, dir)
	defer l.Close()
	if _, err := l.Rotate(frames("h")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(SegmentPath(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte("EDDYWSNK"), 5, 0, 0, 0), frames("h")...)
	if !bytes.Equal(b, want) {
		t.Errorf("segment bytes %q, want %q", b, want)
	}
	if seg, _ := l.Active(); seg.Size != int64(len(want)) {
		t.Errorf("active %+v", seg)
	}
}

func TestLog_CorruptOlderSegment(t *testing.T) {
	dir := t.TempDir()
	bad := frames("h", "x")
	bad[len(bad)-1] ^= 1
	os.WriteFile(SegmentPath(dir, 1), bad, 0o644)
	os.WriteFile(SegmentPath(dir, 2), frames("h2"), 0o644)
	if _, _, err := collect(t, dir); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open = %v, want ErrCorrupt", err)
	}
}

// TestReader_FollowsAppends reads the active segment while it grows.
func TestReader_FollowsAppends(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := collect(t, dir)
	defer l.Close()
	l.Rotate(nil)
	r, err := l.OpenReader(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("empty: %v", err)
	}
	big := bytes.Repeat([]byte("z"), 3*readChunkBytes)
	all := frames("a")
	all = AppendFrame(all, big)
	// Write half a frame, then the rest: the reader must not move.
	l.Write(all[:len(all)-10])
	if p, err := r.Next(); err != nil || string(p) != "a" {
		t.Fatalf("first: %q %v", p, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("partial frame: %v", err)
	}
	l.Write(all[len(all)-10:])
	if p, err := r.Next(); err != nil || !bytes.Equal(p, big) {
		t.Fatalf("big: %d bytes %v", len(p), err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(frames("a", "bc"))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0})
	f.Add(append(appendHeader(nil), frames("a")...))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		os.WriteFile(SegmentPath(dir, 1), b, 0o644)
		l, _, err := collect(t, dir)
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion) {
			return // named, not misread
		}
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	})
}
