package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
)

// decodeAll decodes a frame and its records, failing the test on
// any damage.
func decodeAll(t *testing.T, b []byte) (first uint64, es []Entry, size int) {
	t.Helper()
	fr, size, st, reason, _ := decodeFrame(b, nil)
	if st != frameOK {
		t.Fatalf("decode = status %d (%s)", st, reason)
	}
	var c recordCursor
	c.reset(&fr)
	for c.left > 0 {
		var e Entry
		if reason := c.next(&e); reason != "" {
			t.Fatalf("record %d: %s", len(es), reason)
		}
		es = append(es, e)
	}
	return fr.first, es, size
}

func TestFrame_RoundTrip(t *testing.T) {
	big := make([]Entry, 300)
	for i := range big {
		big[i] = testEntry(uint64(i))
	}
	sameTopic := []Entry{
		{Arrival: 10, Topic: []byte("a/b"), Payload: []byte("1")},
		{Arrival: 9, Flags: FlagDup, Topic: []byte("a/b"), Payload: []byte("2")},
		{Arrival: 1 << 50, Flags: FlagRetain, Topic: []byte("a/c"), Payload: nil},
		{Arrival: -5, Topic: []byte("a/c"), Payload: []byte("4")},
	}
	for _, tt := range []struct {
		name     string
		batch    []Entry
		compress Compression
		codec    byte
	}{
		{"empty entry", []Entry{{}}, CompressNone, codecRaw},
		{"flags and negative arrival, zstd", []Entry{{Arrival: -5, Flags: FlagDup | FlagRetain, Topic: []byte("a/b"), Payload: []byte("hello")}}, CompressZstd, codecRaw},
		{"flags and negative arrival, s2", []Entry{{Arrival: -5, Flags: FlagDup | FlagRetain, Topic: []byte("a/b"), Payload: []byte("hello")}}, CompressS2, codecRaw},
		{"longest topic", []Entry{{Topic: bytes.Repeat([]byte("t"), maxTopicLen)}}, CompressNone, codecRaw},
		{"same and changing topics", sameTopic, CompressNone, codecRaw},
		{"batch raw", big, CompressNone, codecRaw},
		{"batch zstd", big, CompressZstd, codecZstd},
		{"batch s2", big, CompressS2, codecS2},
		{"incompressible batch, s2", []Entry{{Topic: []byte("a"), Payload: noise(4096)}}, CompressS2, codecRaw},
		{"incompressible batch, zstd", []Entry{{Topic: []byte("a"), Payload: noise(4096)}}, CompressZstd, codecRaw},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw := 0
			for i := range tt.batch {
				raw += frameLen(&tt.batch[i])
			}
			b, _ := appendFrame(nil, 42, tt.batch, tt.compress, nil)
			if b[frameOverhead-1] != tt.codec {
				t.Fatalf("codec %d, want %d", b[frameOverhead-1], tt.codec)
			}
			if len(tt.batch) == 1 && len(b) > frameLen(&tt.batch[0]) {
				t.Fatalf("frame is %d bytes, frameLen bounds it at %d", len(b), frameLen(&tt.batch[0]))
			}
			t.Logf("%d entries: %d bytes (%d as single frames)", len(tt.batch), len(b), raw)
			first, got, size := decodeAll(t, append(b, 0xff, 0xee))
			if first != 42 || size != len(b) || len(got) != len(tt.batch) {
				t.Fatalf("first %d size %d entries %d, want 42 %d %d", first, size, len(got), len(b), len(tt.batch))
			}
			for i, e := range tt.batch {
				g := got[i]
				if g.Arrival != e.Arrival || g.Flags != e.Flags || !bytes.Equal(g.Topic, e.Topic) || !bytes.Equal(g.Payload, e.Payload) {
					t.Fatalf("entry %d decoded %+v, want %+v", i, g, e)
				}
			}
		})
	}
}

func TestFrame_Decode_Damage(t *testing.T) {
	batch := []Entry{testEntry(7), testEntry(8)}
	good, _ := appendFrame(nil, 7, batch, CompressNone, nil)
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		want   frameStatus
	}{
		{"empty", func(b []byte) []byte { return nil }, frameShort},
		{"half header", func(b []byte) []byte { return b[:5] }, frameShort},
		{"header only", func(b []byte) []byte { return b[:frameHeaderLen] }, frameShort},
		{"one byte short", func(b []byte) []byte { return b[:len(b)-1] }, frameShort},
		{"zeros", func(b []byte) []byte { return make([]byte, len(b)) }, frameBad},
		{"length too small", func(b []byte) []byte { binary.LittleEndian.PutUint32(b, 3); return b }, frameBad},
		{"length huge", func(b []byte) []byte { binary.LittleEndian.PutUint32(b, 1<<31); return b }, frameBad},
		{"length changed", func(b []byte) []byte { binary.LittleEndian.PutUint32(b, uint32(len(b)-9)); return b }, frameBad},
		{"crc flipped", func(b []byte) []byte { b[5] ^= 1; return b }, frameBad},
		{"payload flipped", func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }, frameBad},
		{"offset flipped", func(b []byte) []byte { b[frameHeaderLen] ^= 1; return b }, frameBad},
		{"count flipped", func(b []byte) []byte { b[frameHeaderLen+8] ^= 1; return b }, frameBad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mutate(append([]byte(nil), good...))
			if _, _, st, _, _ := decodeFrame(b, nil); st != tt.want {
				t.Fatalf("status %d, want %d", st, tt.want)
			}
		})
	}
}

// TestFrame_Decode_DamagedCompressedBlock: a compressed block that passes
// the CRC (a writer bug, not a torn write) but does not decompress is a bad
// frame, never a panic or a huge allocation.
func TestFrame_Decode_DamagedCompressedBlock(t *testing.T) {
	batch := make([]Entry, 100)
	for i := range batch {
		batch[i] = testEntry(uint64(i + 1))
	}
	for _, tt := range []struct {
		name   string
		c      Compression
		codec  byte
		mutate func(block []byte) []byte
	}{
		{"s2 truncated", CompressS2, codecS2, func(b []byte) []byte { return b[:len(b)/2] }},
		{"s2 decoded length huge", CompressS2, codecS2, func(b []byte) []byte {
			return append(binary.AppendUvarint(nil, 1<<40), b[uvarintLen(uint64(s2DecodedLen(t, b))):]...)
		}},
		{"s2 decoded length short", CompressS2, codecS2, func(b []byte) []byte {
			return append(binary.AppendUvarint(nil, 10), b[uvarintLen(uint64(s2DecodedLen(t, b))):]...)
		}},
		{"zstd truncated", CompressZstd, codecZstd, func(b []byte) []byte { return b[:len(b)/2] }},
		{"codec unknown", CompressS2, 3, func(b []byte) []byte { return b }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			good, _ := appendFrame(nil, 1, batch, tt.c, nil)
			b := append(good[:frameOverhead:frameOverhead], tt.mutate(append([]byte(nil), good[frameOverhead:]...))...)
			b[frameOverhead-1] = tt.codec
			binary.LittleEndian.PutUint32(b, uint32(len(b)-frameHeaderLen))
			binary.LittleEndian.PutUint32(b[4:], frameCRC(b))
			if _, _, st, reason, _ := decodeFrame(b, nil); st != frameBad {
				t.Fatalf("status %d (%s), want a bad frame", st, reason)
			}
		})
	}
}

func s2DecodedLen(t *testing.T, block []byte) int {
	t.Helper()
	n, err := s2.DecodedLen(block)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFrame_Records_Malformed: a frame whose CRC matches but whose records
// do not add up to its count (a writer bug, not a torn write) is reported.
func TestFrame_Records_Malformed(t *testing.T) {
	b, _ := appendFrame(nil, 1, []Entry{testEntry(1), testEntry(2)}, CompressNone, nil)
	binary.LittleEndian.PutUint32(b[frameHeaderLen+8:], 3) // claims 3 entries
	binary.LittleEndian.PutUint32(b[4:], frameCRC(b))
	fr, _, st, _, _ := decodeFrame(b, nil)
	if st != frameOK {
		t.Fatalf("status %d", st)
	}
	if reason := checkRecords(&fr); reason == "" {
		t.Fatal("3 claimed, 2 stored: no complaint")
	}
}

func TestFrame_Append_NoAlloc(t *testing.T) {
	batch := make([]Entry, 64)
	for i := range batch {
		batch[i] = testEntry(uint64(i))
	}
	buf := make([]byte, 0, 64<<10)
	raw := make([]byte, 0, 64<<10)
	for _, compress := range []Compression{CompressNone, CompressS2, CompressZstd} {
		appendFrame(buf[:0], 0, batch, compress, raw) // warm the shared coder
		allocs := testing.AllocsPerRun(100, func() {
			appendFrame(buf[:0], 0, batch, compress, raw)
		})
		if allocs != 0 {
			t.Fatalf("appendFrame (%v) allocates %.1f times per frame of 64 entries", compress, allocs)
		}
	}
}

// TestOpen_OtherVersionRefused: a segment of another format version (an
// earlier development build's, or a newer Eddy's) is refused, naming the
// file, the version found and the one read, never misread.
func TestOpen_OtherVersionRefused(t *testing.T) {
	for _, v := range []byte{oldestSegmentVersion - 1, segmentVersion + 1} {
		dir := t.TempDir()
		path := filepath.Join(dir, segmentName(1))
		b := append([]byte(segmentMagic), v, 0, 0, 0)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, Options{})
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v, want ErrCorrupt", err)
		}
		for _, part := range []string{path, fmt.Sprintf("segment format version %d,", v), fmt.Sprintf("reads versions %d to %d only", oldestSegmentVersion, segmentVersion)} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("Open = %v, want it to name %q", err, part)
			}
		}
	}
}
