package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update rewrites the golden segment: go test ./operators/io/ingest/ -run TestGolden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenSegment is a segment of today's format: a raw frame and an S2
// frame, records with every flag, a repeated topic and properties.
var goldenSegment = filepath.Join("testdata", "golden", segmentName(1))

// goldenSegmentV3 is the golden segment of format version 3, the first
// two batches of goldenBatches (no properties), as earlier builds wrote it:
// this build reads it.
var goldenSegmentV3 = filepath.Join("testdata", "golden-v3", segmentName(1))

// goldenBatches are the entries of the golden segment, one Append each.
// Arrival times are fixed: the log takes them from the caller.
func goldenBatches() [][]Entry {
	big := []byte(strings.Repeat(`{"device":"pump-7","temp":21.5,"unit":"C"}`, 8))
	return [][]Entry{
		{
			{Arrival: 1_700_000_000_000, Topic: []byte("sensors/a"), Payload: []byte(`{"t":1}`)},
			{Arrival: 1_700_000_000_005, Flags: FlagDup | FlagRetain, Topic: []byte("sensors/a"), Payload: []byte(`{"t":2}`)},
			{Arrival: 1_699_999_999_990, Flags: FlagResumed, Topic: []byte("sensors/b"), Payload: nil},
		},
		{
			{Arrival: 1_700_000_001_000, Topic: []byte("sensors/c"), Payload: big},
			{Arrival: 1_700_000_001_001, Flags: FlagTooLarge, Topic: []byte("sensors/c"), Payload: big[:100]},
		},
		{
			{Arrival: 1_700_000_002_000, Topic: []byte("sensors/d"), Props: goldenProps, Payload: []byte(`{"t":3}`)},
			{Arrival: 1_700_000_002_001, Topic: []byte("sensors/d"), Props: goldenProps[:8], Payload: []byte(`{"t":4}`)},
		},
	}
}

// goldenProps are MQTT 5 properties as a PUBLISH encodes them: the user
// property site=north, then the content type application/json.
var goldenProps = []byte("\x26\x00\x04site\x00\x05north\x03\x00\x10application/json")

// TestGolden_Segment: the segment in testdata/golden decodes to the
// entries it was written with, and a log of this build appending them
// writes the same bytes. A failure means the encoding changed: bump
// segmentVersion and rewrite the golden file with -update. A golden file
// of another version than segmentVersion fails too, so a bump comes with
// a new golden file.
func TestGolden_Segment(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{Compression: CompressS2})
	for _, b := range goldenBatches() {
		if _, _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, filepath.Join(dir, segmentName(1)))
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenSegment), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenSegment, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := readFile(t, goldenSegment)
	if len(want) < headerLen || string(want[:len(segmentMagic)]) != segmentMagic {
		t.Fatalf("golden %s has no segment header", goldenSegment)
	}
	if v := binary.LittleEndian.Uint32(want[len(segmentMagic):]); v != segmentVersion {
		t.Fatalf("golden %s is format version %d, this build writes %d: run with -update to write the golden file of the new version", goldenSegment, v, segmentVersion)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("this build writes\n%x\nthe golden segment of version %d holds\n%x\nthe encoding changed: bump segmentVersion and run with -update",
			got, segmentVersion, want)
	}
	if codecs := frameCodecs(t, goldenSegment); !bytes.Equal(codecs, []byte{codecRaw, codecS2, codecRaw}) {
		t.Errorf("golden frames have codecs %v, want raw, S2, raw", codecs)
	}

	golden := t.TempDir()
	if err := os.WriteFile(filepath.Join(golden, segmentName(1)), want, 0o644); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, golden, Options{})
	defer l.Close()
	r, err := l.Reader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	off := uint64(1)
	for _, b := range goldenBatches() {
		for _, w := range b {
			e, err := r.Next()
			if err != nil {
				t.Fatalf("entry %d: %v", off, err)
			}
			if e.Offset != off || e.Arrival != w.Arrival || e.Flags != w.Flags || !bytes.Equal(e.Topic, w.Topic) || !bytes.Equal(e.Payload, w.Payload) || !bytes.Equal(e.Props, w.Props) {
				t.Errorf("entry %d reads as %s, want %s", off, describeEntry(e), describeEntry(Entry{Offset: off, Arrival: w.Arrival, Flags: w.Flags, Topic: w.Topic, Payload: w.Payload, Props: w.Props}))
			}
			off++
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last entry: %v, want io.EOF", err)
	}
}

func describeEntry(e Entry) string {
	return fmt.Sprintf("{%d %d %#x %q %q %q}", e.Offset, e.Arrival, e.Flags, e.Topic, e.Props, e.Payload)
}

// TestGolden_SegmentV3: a log whose segment is of format version 3 reads
// its entries as they were written, and appends to a new segment of
// today's version, which reads back with its properties.
func TestGolden_SegmentV3(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, segmentName(1)), readFile(t, goldenSegmentV3), 0o644); err != nil {
		t.Fatal(err)
	}
	l := mustOpen(t, dir, Options{})
	defer l.Close()
	batches := goldenBatches()
	if _, _, err := l.Append(batches[2]); err != nil {
		t.Fatal(err)
	}
	r, err := l.Reader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	off := uint64(1)
	for _, b := range batches {
		for _, w := range b {
			e, err := r.Next()
			if err != nil {
				t.Fatalf("entry %d: %v", off, err)
			}
			if e.Arrival != w.Arrival || e.Flags != w.Flags || !bytes.Equal(e.Topic, w.Topic) || !bytes.Equal(e.Payload, w.Payload) || !bytes.Equal(e.Props, w.Props) {
				t.Errorf("entry %d reads as %s, want %s", off, describeEntry(e), describeEntry(Entry{Offset: off, Arrival: w.Arrival, Flags: w.Flags, Topic: w.Topic, Payload: w.Payload, Props: w.Props}))
			}
			off++
		}
	}
	if v := binary.LittleEndian.Uint32(readFile(t, filepath.Join(dir, segmentName(1)))[len(segmentMagic):]); v != oldestSegmentVersion {
		t.Errorf("the version 3 segment was rewritten as version %d", v)
	}
	if _, err := os.Stat(filepath.Join(dir, segmentName(off-2))); err != nil {
		t.Errorf("the append did not start a segment of its own: %v", err)
	}
}
