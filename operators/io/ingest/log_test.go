package ingest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/state/vfs"
)

func TestOpen_Options(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero is valid", Options{}, true},
		{"after write", Options{Ack: AfterWrite, SyncInterval: -1}, true},
		{"bad ack", Options{Ack: 9}, false},
		{"tiny segment", Options{SegmentBytes: 100}, false},
		{"max disk below two segments", Options{SegmentBytes: 1 << 20, MaxDiskBytes: 1<<21 - 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Open(t.TempDir(), tt.opts)
			if (err == nil) != tt.ok {
				t.Fatalf("Open = %v, want ok %v", err, tt.ok)
			}
			if l != nil {
				l.Close()
			}
		})
	}
}

func TestOpen_Locked(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("second Open of a locked log succeeded")
	}
	l.Close()
	mustOpen(t, dir, Options{}).Close()
}

func TestLog_Append_ReopenKeepsOffsetsDense(t *testing.T) {
	for _, ack := range []AckMode{AfterFsync, AfterWrite} {
		t.Run(ack.String(), func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Ack: ack, SegmentBytes: 2 << 10, MaxDiskBytes: 1 << 20}
			for round := range 4 {
				l := mustOpen(t, dir, opts)
				if got, want := l.LastOffset(), uint64(round*50); got != want {
					t.Fatalf("round %d: last offset %d, want %d", round, got, want)
				}
				mustAppend(t, l, 50, 1+round*9)
				if n := readAll(t, l, 0); n != (round+1)*50 {
					t.Fatalf("round %d: read %d entries", round, n)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			segs, _ := listSegments(vfs.Default, dir)
			if len(segs) < 5 {
				t.Fatalf("%d segments, want the log to have rolled", len(segs))
			}
			for _, s := range segs {
				if s.end > opts.SegmentBytes {
					t.Fatalf("segment %d is %d bytes, bound %d", s.first, s.end, opts.SegmentBytes)
				}
			}
		})
	}
}

func TestLog_Append_Empty(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{})
	defer l.Close()
	if first, last, err := l.Append(nil); first != 0 || last != 0 || err != nil {
		t.Fatalf("Append(nil) = %d, %d, %v", first, last, err)
	}
	if l.FirstOffset() != 1 || l.LastOffset() != 0 {
		t.Fatalf("empty log spans [%d, %d]", l.FirstOffset(), l.LastOffset())
	}
}

// TestLog_Append_BatchSpansSegments writes one batch larger than a segment.
func TestLog_Append_BatchSpansSegments(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20})
	mustAppend(t, l, 100, 100)
	segs, _ := listSegments(vfs.Default, dir)
	if len(segs) < 10 {
		t.Fatalf("%d segments for ~13 KiB in 1 KiB segments", len(segs))
	}
	var size int64
	for _, s := range segs {
		size += s.end
	}
	if size != l.SizeBytes() {
		t.Fatalf("SizeBytes %d, files hold %d", l.SizeBytes(), size)
	}
	readAll(t, l, 0)
	l.Close()
	l = mustOpen(t, dir, Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20})
	defer l.Close()
	if l.LastOffset() != 100 {
		t.Fatalf("last offset %d after reopen", l.LastOffset())
	}
}

func TestLog_Append_TooLarge(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20})
	defer l.Close()
	batch := []Entry{testEntry(1), {Payload: make([]byte, 1<<10)}}
	if _, _, err := l.Append(batch); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Append = %v, want ErrTooLarge", err)
	}
	if l.LastOffset() != 0 {
		t.Fatal("a refused batch was partly written")
	}
	mustAppend(t, l, 1, 1)
}

// TestLog_ErrFull_TruncateRecovers fills the log to MaxDiskBytes, checks
// that Append refuses without writing, then frees space with Truncate.
func TestLog_ErrFull_TruncateRecovers(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 1 << 10, MaxDiskBytes: 4 << 10}
	l := mustOpen(t, dir, opts)
	defer l.Close()
	for {
		next, size := l.LastOffset()+1, l.SizeBytes()
		_, _, err := l.Append([]Entry{testEntry(next), testEntry(next + 1)})
		if errors.Is(err, ErrFull) {
			if l.SizeBytes() != size || l.LastOffset() != next-1 {
				t.Fatalf("ErrFull wrote: size %d → %d, last %d → %d", size, l.SizeBytes(), next-1, l.LastOffset())
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if l.SizeBytes() > opts.MaxDiskBytes {
		t.Fatalf("size %d exceeds max %d", l.SizeBytes(), opts.MaxDiskBytes)
	}
	if !l.Full() {
		t.Fatal("Full() = false after ErrFull")
	}
	last, size := l.LastOffset(), l.SizeBytes()
	freed := l.Freed()
	if err := l.Truncate(1); err != nil { // deletes nothing
		t.Fatal(err)
	}
	select {
	case <-freed:
		t.Fatal("Freed closed by a Truncate that deleted nothing")
	default:
	}
	if err := l.Truncate(last / 2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-freed:
	default:
		t.Fatal("Freed not closed by a Truncate that deleted a segment")
	}
	if !l.Full() {
		t.Fatal("Full() = false after Truncate, before an Append succeeded")
	}
	if l.SizeBytes() >= size {
		t.Fatalf("Truncate freed nothing: %d → %d bytes", size, l.SizeBytes())
	}
	first := l.FirstOffset()
	if first <= 1 || first > last/2 {
		t.Fatalf("first offset %d after Truncate(%d)", first, last/2)
	}
	mustAppend(t, l, 2, 2)
	if l.Full() {
		t.Fatal("Full() = true after an Append succeeded")
	}
	readAll(t, l, first)
	if _, err := l.Reader(first - 1); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Reader below first = %v, want ErrTruncated", err)
	}
	var segBytes int64
	segs, _ := listSegments(vfs.Default, dir)
	for _, s := range segs {
		segBytes += s.end
	}
	if segBytes != l.SizeBytes() {
		t.Fatalf("SizeBytes %d, files hold %d", l.SizeBytes(), segBytes)
	}
}

func TestLog_Truncate(t *testing.T) {
	tests := []struct {
		below     uint64
		wantFirst func(segs []segment) uint64
	}{
		{0, func(s []segment) uint64 { return 1 }},
		{1, func(s []segment) uint64 { return 1 }},
		{2, func(s []segment) uint64 { return 1 }},
		{1000, func(s []segment) uint64 { return s[len(s)-1].first }}, // never the active segment
	}
	for _, tt := range tests {
		dir := t.TempDir()
		l := mustOpen(t, dir, Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20})
		mustAppend(t, l, 60, 5)
		segs, _ := listSegments(vfs.Default, dir)
		if err := l.Truncate(tt.below); err != nil {
			t.Fatal(err)
		}
		if got, want := l.FirstOffset(), tt.wantFirst(segs); got != want {
			t.Fatalf("Truncate(%d): first %d, want %d", tt.below, got, want)
		}
		// Every segment left must hold an offset ≥ below.
		for i, s := range segs {
			_, err := os.Stat(dir + "/" + segmentName(s.first))
			kept := err == nil
			wantKept := i == len(segs)-1 || segs[i+1].first > tt.below
			if kept != wantKept {
				t.Fatalf("Truncate(%d): segment %d kept=%v, want %v", tt.below, s.first, kept, wantKept)
			}
		}
		readAll(t, l, 0)
		l.Close()
	}
	// Between segment boundaries: the segment holding below is kept.
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20})
	defer l.Close()
	mustAppend(t, l, 60, 5)
	segs, _ := listSegments(vfs.Default, dir)
	mid := segs[2].first + 1
	if err := l.Truncate(mid); err != nil {
		t.Fatal(err)
	}
	if l.FirstOffset() != segs[2].first {
		t.Fatalf("Truncate(%d): first %d, want %d", mid, l.FirstOffset(), segs[2].first)
	}
}

func TestLog_Closed(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{})
	mustAppend(t, l, 3, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Append([]Entry{testEntry(4)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	if err := l.Wait(context.Background(), 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close = %v", err)
	}
	if err := l.Truncate(2); !errors.Is(err, ErrClosed) {
		t.Fatalf("Truncate after Close = %v", err)
	}
	if _, err := l.Reader(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reader after Close = %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
}

func TestLog_Wait(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{})
	defer l.Close()
	mustAppend(t, l, 2, 2)
	if err := l.Wait(context.Background(), 1); err != nil {
		t.Fatalf("Wait(1) with last 2: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on cancelled ctx = %v", err)
	}
	done := make(chan error)
	go func() { done <- l.Wait(context.Background(), 2) }()
	for l.notify.waiting.Load() == 0 {
		// Let the waiter register, so the append has someone to wake.
		runtime.Gosched()
	}
	mustAppend(t, l, 1, 1)
	if err := <-done; err != nil {
		t.Fatalf("Wait woken by Append: %v", err)
	}
}

// TestLog_TailWhileAppending has a reader follow the log with Next and
// Wait while another goroutine appends across many segment rolls and a
// third truncates behind it; a compressing log hands the reader the
// records of the frames it just wrote.
func TestLog_TailWhileAppending(t *testing.T) {
	for _, tt := range []struct {
		ack AckMode
		c   Compression
	}{{AfterFsync, CompressNone}, {AfterWrite, CompressNone}, {AfterFsync, CompressS2}, {AfterWrite, CompressZstd}} {
		ack := tt.ack
		t.Run(ack.String()+"/"+tt.c.String(), func(t *testing.T) {
			// Batches of 37 entries span segments of 2 KiB in several frames.
			l := mustOpen(t, t.TempDir(), Options{Ack: ack, SyncInterval: time.Millisecond, SegmentBytes: 2 << 10, MaxDiskBytes: 1 << 20, Compression: tt.c})
			defer l.Close()
			const total = 3000
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				mustAppend(t, l, total, 37)
			}()
			r, err := l.Reader(1)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var read uint64
			for read < total {
				e, err := r.Next()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("Next after %d: %v", read, err)
					}
					if err := l.Wait(ctx, read); err != nil {
						t.Fatalf("Wait(%d): %v", read, err)
					}
					continue
				}
				checkEntry(t, e, read+1)
				read = e.Offset
				if read%500 == 0 {
					// The oldest checkpoint moved on: free what the reader has passed.
					if err := l.Truncate(read); err != nil {
						t.Fatal(err)
					}
				}
			}
			wg.Wait()
		})
	}
}

func TestLog_Sync_AfterWrite(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{Ack: AfterWrite, SyncInterval: -1})
	defer l.Close()
	mustAppend(t, l, 5, 5)
	if l.synced.Load() != 0 {
		t.Fatalf("synced %d before Sync with no background sync", l.synced.Load())
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.synced.Load() != 5 {
		t.Fatalf("synced %d after Sync, want 5", l.synced.Load())
	}
}

// TestLog_Compressed: with each compression, batches are stored
// compressed, read back entry by entry from any offset, survive a reopen,
// and a torn compressed frame at the tail is cut like any other.
func TestLog_Compressed(t *testing.T) {
	plain := t.TempDir()
	lp := mustOpen(t, plain, Options{SegmentBytes: 64 << 10})
	mustAppend(t, lp, 2000, 50)
	lp.Close()
	for _, tt := range []struct {
		c     Compression
		codec byte
	}{{CompressS2, codecS2}, {CompressZstd, codecZstd}} {
		t.Run(tt.c.String(), func(t *testing.T) {
			packed := t.TempDir()
			opts := Options{SegmentBytes: 64 << 10, Compression: tt.c}
			lc := mustOpen(t, packed, opts)
			mustAppend(t, lc, 2000, 50)
			t.Logf("2000 test entries in batches of 50: %d bytes plain, %d compressed", lp.SizeBytes(), lc.SizeBytes())
			if lc.SizeBytes() >= lp.SizeBytes()*2/3 {
				t.Fatalf("compressed log %d bytes, plain %d: want at most 2/3", lc.SizeBytes(), lp.SizeBytes())
			}
			for _, from := range []uint64{0, 1, 777, 2000} {
				readAll(t, lc, from)
			}
			lc.Close()

			p := lastSegmentPath(t, packed)
			if codecs := frameCodecs(t, p); !bytes.Contains(codecs, []byte{tt.codec}) || bytes.ContainsFunc(codecs, func(r rune) bool { return r != rune(tt.codec) && r != codecRaw }) {
				t.Fatalf("frame codecs %v, want %d (or raw where that was smaller)", codecs, tt.codec)
			}
			info, _ := os.Stat(p)
			if err := os.Truncate(p, info.Size()-5); err != nil {
				t.Fatal(err)
			}
			lc = mustOpen(t, packed, opts)
			defer lc.Close()
			if rec := lc.Recovery(); rec.CutBytes == 0 || lc.LastOffset() != 1950 {
				t.Fatalf("recovery %+v, last offset %d: want the torn last frame (1951..2000) cut", rec, lc.LastOffset())
			}
			mustAppend(t, lc, 10, 10)
			readAll(t, lc, 0)
		})
	}
}

// TestLog_ReadsEveryCodec: a segment of zstd frames (testdata/zstd, format
// version 3: the test entries 1..300 in zstd frames of 100, then 301..303
// in a fourth) is read as it is by a log that now writes S2, zstd or no
// compression, and appended to, in a new segment of today's version; a log
// holding frames of every codec reads back from any offset, also after a
// reopen.
func TestLog_ReadsEveryCodec(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "zstd", segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		c     Compression
		codec byte
		segs  []segmentCodecs // after appending with c, then S2, then zstd
	}{
		{CompressS2, codecS2, []segmentCodecs{
			{1, oldestSegmentVersion, []byte{codecZstd, codecZstd, codecZstd, codecZstd}},
			{304, segmentVersion, []byte{codecS2, codecS2, codecS2, codecS2, codecZstd}},
		}},
		{CompressNone, codecRaw, []segmentCodecs{
			{1, oldestSegmentVersion, []byte{codecZstd, codecZstd, codecZstd, codecZstd}},
			{304, segmentVersion, []byte{codecRaw, codecRaw, codecRaw, codecS2, codecZstd}},
		}},
		{CompressZstd, codecZstd, []segmentCodecs{
			{1, oldestSegmentVersion, []byte{codecZstd, codecZstd, codecZstd, codecZstd}},
			{304, segmentVersion, []byte{codecZstd, codecZstd, codecZstd, codecS2, codecZstd}},
		}},
	} {
		t.Run(tt.c.String(), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, segmentName(1)), golden, 0o644); err != nil {
				t.Fatal(err)
			}
			if got := logCodecs(t, dir); len(got) != 1 || !bytes.Equal(got[0].codecs, []byte{codecZstd, codecZstd, codecZstd, codecZstd}) {
				t.Fatalf("golden segment: %+v, want four zstd frames", got)
			}
			l := mustOpen(t, dir, Options{Compression: tt.c})
			if l.LastOffset() != 303 {
				t.Fatalf("last offset %d, want 303", l.LastOffset())
			}
			for _, from := range []uint64{0, 1, 150, 303} {
				readAll(t, l, from)
			}
			mustAppend(t, l, 300, 100)
			l.Close()
			l = mustOpen(t, dir, Options{Compression: CompressS2})
			mustAppend(t, l, 100, 100)
			l.Close()
			l = mustOpen(t, dir, Options{Compression: CompressZstd})
			mustAppend(t, l, 100, 100)
			l.Close()

			if got := logCodecs(t, dir); !slices.EqualFunc(got, tt.segs, func(a, b segmentCodecs) bool {
				return a.first == b.first && a.version == b.version && bytes.Equal(a.codecs, b.codecs)
			}) {
				t.Fatalf("segments %+v, want %+v", got, tt.segs)
			}
			l = mustOpen(t, dir, Options{Compression: tt.c})
			defer l.Close()
			if n := readAll(t, l, 0); n != 803 {
				t.Fatalf("read %d entries, want 803", n)
			}
			for _, from := range []uint64{299, 304, 555, 604, 704, 803} {
				readAll(t, l, from)
			}
		})
	}
}

// segmentCodecs is a segment's first offset, format version and the codec
// of each of its frames.
type segmentCodecs struct {
	first   uint64
	version uint32
	codecs  []byte
}

// logCodecs describes every segment of the log in dir, oldest first.
func logCodecs(t *testing.T, dir string) []segmentCodecs {
	t.Helper()
	segs, err := listSegments(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []segmentCodecs
	for _, s := range segs {
		path := filepath.Join(dir, segmentName(s.first))
		b := readFile(t, path)
		out = append(out, segmentCodecs{s.first, binary.LittleEndian.Uint32(b[len(segmentMagic):]), frameCodecs(t, path)})
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLog_MaxBatchBytes: once Truncate has deleted every sealed segment, a
// batch of MaxBatchBytes (each entry counted as its topic, payload and
// EntryOverhead) is appended, whether of many small entries or of a few
// large ones.
func TestLog_MaxBatchBytes(t *testing.T) {
	for _, size := range []int{1, 100, 900} {
		l := mustOpen(t, t.TempDir(), Options{SegmentBytes: 1 << 10, MaxDiskBytes: 4 << 10})
		for {
			_, _, err := l.Append([]Entry{{Topic: []byte("t"), Payload: make([]byte, 100)}})
			if errors.Is(err, ErrFull) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Truncate(l.LastOffset() + 1); err != nil {
			t.Fatal(err)
		}
		var batch []Entry
		for n := int64(size + EntryOverhead); n <= l.MaxBatchBytes() || len(batch) == 0; n += int64(size + EntryOverhead) {
			batch = append(batch, Entry{Payload: make([]byte, size)})
		}
		if _, _, err := l.Append(batch); err != nil {
			t.Errorf("%d entries of %d bytes (MaxBatchBytes %d) after truncating to the active segment: %v",
				len(batch), size, l.MaxBatchBytes(), err)
		}
		l.Close()
	}
}
