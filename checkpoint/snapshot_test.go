package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"testing"
)

type testEntry struct {
	bucket, key, value string
	deleted            bool
}

func writeSnapshot(t testing.TB, kind Kind, id uint64, entries []testEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, kind, id)
	for _, e := range entries {
		if err := w.Add([]byte(e.bucket), []byte(e.key), []byte(e.value), e.deleted); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Size() != int64(buf.Len()) {
		t.Fatalf("Size() = %d, wrote %d", w.Size(), buf.Len())
	}
	return buf.Bytes()
}

func readSnapshot(t testing.TB, b []byte) (Header, []testEntry, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return Header{}, nil, err
	}
	var got []testEntry
	err = r.ForEach(func(bucket, key, value []byte, deleted bool) error {
		got = append(got, testEntry{string(bucket), string(key), string(value), deleted})
		return nil
	})
	return r.Header(), got, err
}

func manyEntries(n int) []testEntry {
	es := make([]testEntry, n)
	for i := range es {
		es[i] = testEntry{bucket: "window/temp_1m", key: fmt.Sprintf("k%07d", i), value: fmt.Sprintf("value-%d", i*7)}
		if i%10 == 3 {
			es[i].value, es[i].deleted = "", true
		}
	}
	return es
}

func TestSnapshot_RoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("v"), 100<<10) // larger than a block
	tests := []struct {
		name    string
		kind    Kind
		entries []testEntry
	}{
		{"empty full", KindFull, nil},
		{"one put", KindFull, []testEntry{{"b", "k", "v", false}}},
		{"tombstone", KindIncremental, []testEntry{{"b", "k", "", true}}},
		{"empty key and value", KindIncremental, []testEntry{{"", "", "", false}}},
		{"entry bigger than a block", KindFull, []testEntry{{"b", "k1", "x", false}, {"b", "big", string(big), false}, {"b", "k2", "", true}}},
		{"many blocks", KindIncremental, manyEntries(20000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := writeSnapshot(t, tt.kind, 42, tt.entries)
			hdr, got, err := readSnapshot(t, b)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Header{Version: SnapshotVersion, Kind: tt.kind, CheckpointID: 42}); hdr != want {
				t.Errorf("header %+v, want %+v", hdr, want)
			}
			if len(got) != len(tt.entries) {
				t.Fatalf("read %d entries, want %d", len(got), len(tt.entries))
			}
			for i := range got {
				if got[i] != tt.entries[i] {
					t.Fatalf("entry %d = %+v, want %+v", i, got[i], tt.entries[i])
				}
			}
			if _, n, err := VerifySnapshot(bytes.NewReader(b)); err != nil || n != uint64(len(tt.entries)) {
				t.Errorf("VerifySnapshot = %d, %v", n, err)
			}
		})
	}
}

// TestSnapshot_Layout pins the byte layout documented at the top of
// snapshot.go, so a change of format cannot slip in unnoticed.
func TestSnapshot_Layout(t *testing.T) {
	b := writeSnapshot(t, KindIncremental, 0x0102030405060708, []testEntry{{"bk", "key", "val", false}, {"bk", "gone", "", true}})
	wantHeader := []byte{'E', 'D', 'D', 'Y', 'S', 'N', 'A', 'P', 0, 2, 2, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	if !bytes.Equal(b[:20], wantHeader) {
		t.Errorf("header % x, want % x", b[:20], wantHeader)
	}
	payload := []byte{0, 2, 'b', 'k', 3, 'k', 'e', 'y', 3, 'v', 'a', 'l', 1, 2, 'b', 'k', 4, 'g', 'o', 'n', 'e'}
	block := append([]byte{typeBlock, 0, 0, 0, byte(len(payload)), 0, 0, 0, 2}, payload...)
	if got := b[headerSize : headerSize+len(block)]; !bytes.Equal(got, block) {
		t.Errorf("block % x, want % x", got, block)
	}
	if want := headerSize + len(block) + crcSize + trailerSize; len(b) != want {
		t.Errorf("file is %d bytes, want %d", len(b), want)
	}
	if tr := b[len(b)-trailerSize:]; tr[0] != typeTrailer || !bytes.Equal(tr[1:9], []byte{0, 0, 0, 0, 0, 0, 0, 2}) {
		t.Errorf("trailer % x", tr[:9])
	}
}

// TestSnapshot_CompressedBlocks: entries as repetitive as window state are
// stored in zstd blocks, read back unchanged, and take a fraction of their
// raw size; a block zstd cannot shrink stays raw (TestSnapshot_Layout).
func TestSnapshot_CompressedBlocks(t *testing.T) {
	entries := manyEntries(20000) // several blocks
	b := writeSnapshot(t, KindFull, 9, entries)
	raw := 0
	for _, e := range entries {
		raw += 4 + len(e.bucket) + len(e.key) + len(e.value)
	}
	if len(b) > raw/2 {
		t.Errorf("file is %d bytes for %d raw entry bytes, want at most half", len(b), raw)
	}
	if b[headerSize] != typeZstdBlock {
		t.Errorf("first record type 0x%02x, want a compressed block (0x%02x)", b[headerSize], typeZstdBlock)
	}
	_, got, err := readSnapshot(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(entries) {
		t.Fatalf("read %d entries, want %d", len(got), len(entries))
	}
	for i := range got {
		if got[i] != entries[i] {
			t.Fatalf("entry %d = %+v, want %+v", i, got[i], entries[i])
		}
	}
}

// TestSnapshot_OtherVersionRefused: a file of another format version (an
// earlier development build's, or a newer Eddy's) is corruption whose
// message names the version found and the one read, never misread.
func TestSnapshot_OtherVersionRefused(t *testing.T) {
	good := writeSnapshot(t, KindFull, 5, []testEntry{{"bk", "key", "val", false}})
	for _, v := range []uint16{SnapshotVersion - 1, SnapshotVersion + 1} {
		b := bytes.Clone(good)
		binary.BigEndian.PutUint16(b[8:], v)
		binary.BigEndian.PutUint32(b[20:], crc32.Checksum(b[:20], castagnoli))
		_, _, err := VerifySnapshot(bytes.NewReader(b))
		if !IsCorruption(err) {
			t.Fatalf("version %d: err = %v, want corruption", v, err)
		}
		if want := fmt.Sprintf("format version %d, this build reads version %d only", v, SnapshotVersion); !strings.Contains(err.Error(), want) {
			t.Errorf("version %d: err = %v, want it to say %q", v, err, want)
		}
	}
}

// TestSnapshot_Corruption cuts the file at every length and flips every byte:
// each damaged file must fail with ErrCorrupt, never verify and never panic.
func TestSnapshot_Corruption(t *testing.T) {
	b := writeSnapshot(t, KindFull, 7, manyEntries(30))
	for n := range len(b) {
		if _, _, err := VerifySnapshot(bytes.NewReader(b[:n])); !IsCorruption(err) {
			t.Fatalf("truncated to %d bytes: err = %v, want corruption", n, err)
		}
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		if _, _, err := VerifySnapshot(bytes.NewReader(c)); !IsCorruption(err) {
			t.Fatalf("byte %d flipped: err = %v, want corruption", i, err)
		}
	}
	if _, _, err := VerifySnapshot(bytes.NewReader(append(bytes.Clone(b), 0))); !IsCorruption(err) {
		t.Errorf("trailing byte: err = %v, want corruption", err)
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestReader_IOErrorIsNotCorruption(t *testing.T) {
	eio := errors.New("input/output error")
	b := writeSnapshot(t, KindFull, 7, manyEntries(3))
	_, _, err := VerifySnapshot(io.MultiReader(bytes.NewReader(b[:30]), failingReader{eio}))
	if !errors.Is(err, eio) || IsCorruption(err) {
		t.Errorf("err = %v, want the I/O error and no corruption mark", err)
	}
}

func TestWriter_InvalidKind(t *testing.T) {
	w := NewWriter(io.Discard, KindSavepoint, 1)
	if err := w.Put([]byte("b"), []byte("k"), []byte("v")); err == nil {
		t.Error("Put on a savepoint-kind writer succeeded; snapshot files are full or incremental")
	}
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func TestWriter_NoAllocPerEntry(t *testing.T) {
	w := NewWriter(&countingWriter{}, KindFull, 1)
	bucket, key, value := []byte("window/temp_1m"), []byte("device-000123|17000"), []byte("0123456789abcdef")
	allocs := testing.AllocsPerRun(10000, func() {
		if err := w.Put(bucket, key, value); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Put allocates %.2f times per entry, want 0", allocs)
	}
}

func TestReader_NoAllocPerEntry(t *testing.T) {
	b := writeSnapshot(t, KindFull, 1, manyEntries(50000))
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(40000, func() {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Next allocates %.2f times per entry, want 0", allocs)
	}
}

// BenchmarkWriter writes 1M small entries (14-byte bucket, 19-byte key,
// 16-byte value); SetBytes counts the raw entry bytes.
func BenchmarkWriter(b *testing.B) {
	const n = 1_000_000
	bucket, value := []byte("window/temp_1m"), []byte("0123456789abcdef")
	key := []byte("device-000000|0000")
	b.SetBytes(int64(n * (len(bucket) + len(key) + len(value))))
	b.ReportAllocs()
	w := NewWriter(io.Discard, KindFull, 1)
	for b.Loop() {
		w.Reset(io.Discard, KindFull, 1)
		for i := range n {
			key[12], key[11], key[10] = byte('0'+i%10), byte('0'+i/10%10), byte('0'+i/100%10)
			if err := w.Put(bucket, key, value); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReader reads and verifies the file of BenchmarkWriter.
func BenchmarkReader(b *testing.B) {
	const n = 1_000_000
	var buf bytes.Buffer
	w := NewWriter(&buf, KindFull, 1)
	bucket, key, value := []byte("window/temp_1m"), []byte("device-000000|0000"), []byte("0123456789abcdef")
	for range n {
		if err := w.Put(bucket, key, value); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	file := buf.Bytes()
	b.SetBytes(int64(n * (len(bucket) + len(key) + len(value))))
	b.ReportAllocs()
	for b.Loop() {
		if _, got, err := VerifySnapshot(bytes.NewReader(file)); err != nil || got != n {
			b.Fatal(got, err)
		}
	}
	b.ReportMetric(float64(len(file))/float64(n), "file-B/entry")
}

// FuzzReader feeds arbitrary bytes to the reader: it must never panic, and
// what it accepts must survive a write/read round trip unchanged.
func FuzzReader(f *testing.F) {
	f.Add(writeSnapshot(f, KindFull, 1, nil))
	f.Add(writeSnapshot(f, KindIncremental, 9, manyEntries(40)))
	f.Add(writeSnapshot(f, KindFull, 3, []testEntry{{"b", "k", "v", false}, {"b", "k", "", true}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		hdr, es, err := readSnapshot(t, b)
		if err != nil {
			return
		}
		hdr2, es2, err := readSnapshot(t, writeSnapshot(t, hdr.Kind, hdr.CheckpointID, es))
		if err != nil || hdr2 != hdr || len(es2) != len(es) {
			t.Fatalf("round trip of an accepted file: %v", err)
		}
		for i := range es {
			if es[i] != es2[i] {
				t.Fatalf("round trip: entry %d = %+v, want %+v", i, es2[i], es[i])
			}
		}
	})
}
