package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The golden files of the on-disk formats: go test ./checkpoint/ -run TestGolden -update
// rewrites them (-rewrite does too). Each TestGolden_* decodes its file
// and checks the content, then encodes the same content and compares
// bytes: a difference means the encoding changed, and the format's
// version constant must be raised with it (then -update writes the golden
// file of the new version). A golden file of another version than the
// constant fails too, so a bump comes with a new golden file.
var update = flag.Bool("update", false, "rewrite the golden files of the formats in testdata/")

// formatGolden returns the golden file testdata/name, first writing got to
// it with -update or -rewrite, and fails if got differs from it.
func formatGolden(t *testing.T, name string, got []byte, version string) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update || *rewrite {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("this build encodes %s as\n%x\nthe golden file holds\n%x\nthe encoding changed: bump %s and run with -update",
			name, got, want, version)
	}
	return want
}

// goldenSnapshotEntries fill a compressed block (repetitive window state)
// and a raw one (an entry too large to join the first, of bytes zstd does
// not shrink), with puts and a tombstone.
func goldenSnapshotEntries() []testEntry {
	var es []testEntry
	for i := 0; i < 400; i++ {
		es = append(es, testEntry{bucket: "window/temp_1m", key: fmt.Sprintf("sensor-%04d/1700000000000", i), value: fmt.Sprintf(`{"count":%d,"sum":%d.5}`, i%13, i)})
	}
	var noise []byte
	for h := sha256.Sum256([]byte("eddy")); len(noise) < 9<<10; h = sha256.Sum256(h[:]) {
		noise = append(noise, h[:]...)
	}
	es = append(es,
		testEntry{bucket: "sink/file", key: "pending", value: string(noise)},
		testEntry{bucket: "window/temp_1m", key: "sensor-0003/1700000000000", deleted: true},
	)
	return es
}

// TestGolden_Snapshot: testdata/golden.snap, an incremental snapshot of
// checkpoint 7.
func TestGolden_Snapshot(t *testing.T) {
	es := goldenSnapshotEntries()
	golden := formatGolden(t, "golden.snap", writeSnapshot(t, KindIncremental, 7, es), "SnapshotVersion")
	if v := binary.BigEndian.Uint16(golden[8:]); v != SnapshotVersion {
		t.Fatalf("golden.snap is format version %d, this build writes %d: run with -update to write the golden file of the new version", v, SnapshotVersion)
	}
	types := map[byte]bool{}
	for b := golden[headerSize:]; len(b) > trailerSize; {
		types[b[0]] = true
		n := int(binary.BigEndian.Uint32(b[1:]))
		if b[0] == typeZstdBlock {
			n += 4
		}
		if blockHeaderSize+n+crcSize > len(b) {
			t.Fatalf("golden.snap: block of %d bytes overruns the file", n)
		}
		b = b[blockHeaderSize+n+crcSize:]
	}
	if !types[typeBlock] || !types[typeZstdBlock] {
		t.Errorf("golden.snap has block types %v, want a raw and a compressed block", types)
	}
	hdr, got, err := readSnapshot(t, golden)
	if err != nil {
		t.Fatal(err)
	}
	if hdr != (Header{Version: SnapshotVersion, Kind: KindIncremental, CheckpointID: 7}) {
		t.Errorf("header %+v", hdr)
	}
	if !reflect.DeepEqual(got, es) {
		t.Errorf("golden.snap holds %d entries, not the %d written (first %+v)", len(got), len(es), got[:min(len(got), 1)])
	}
}

// goldenManifest is a manifest with every field set: a full and an
// incremental file, source positions and extra data (control text with
// U+2028 among it).
func goldenManifest() *Manifest {
	sum := func(c byte) string { return strings.Repeat(string([]byte{c, c}), 32) }
	return &Manifest{
		FormatVersion: ManifestVersion, ID: 8, Time: time.Date(2026, 11, 29, 10, 0, 8, 123_000_000, time.UTC), Kind: KindIncremental,
		Files: []FileRef{
			{Name: "files/" + sum('a') + ".snap", Size: 1234, SHA256: sum('a'), Kind: KindFull, Checkpoint: 6, Task: "window/0", Pipeline: "temp_1m"},
			{Name: "files/" + sum('b') + ".snap", Size: 99, SHA256: sum('b'), Kind: KindIncremental, Checkpoint: 8, Task: "window/0", Pipeline: "temp_1m"},
		},
		SourcePositions:   map[string]uint64{"sensors": 800, "thresholds": 3},
		ConfigFingerprint: "cafe",
		DurationMs:        12, AlignmentMs: 3,
		Extra: map[string][]byte{
			"sink/file/pending": []byte(`["part-8"]`),
			"control/alerts":    []byte(`{"note":"a\u2028b","threshold":{"a":20}}`),
		},
	}
}

// TestGolden_Manifest: testdata/golden-manifest.json.
func TestGolden_Manifest(t *testing.T) {
	m := goldenManifest()
	b, err := MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	golden := formatGolden(t, "golden-manifest.json", b, "ManifestVersion")
	var raw struct {
		FormatVersion int `json:"format_version"`
	}
	if err := json.Unmarshal(golden, &raw); err != nil || raw.FormatVersion != ManifestVersion {
		t.Fatalf("golden-manifest.json is format version %d (%v), this build writes %d: run with -update to write the golden file of the new version", raw.FormatVersion, err, ManifestVersion)
	}
	got, err := UnmarshalManifest(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Time.Equal(m.Time) {
		t.Errorf("time %v, want %v", got.Time, m.Time)
	}
	got.Time = m.Time
	if !reflect.DeepEqual(got, m) {
		t.Errorf("golden-manifest.json reads as\n%+v\nwant\n%+v", got, m)
	}
}

// TestGolden_InFlight: testdata/golden-inflight.bin, two in-flight records
// (without and with a control vector), each preceded by its length as a
// uvarint.
func TestGolden_InFlight(t *testing.T) {
	recs := []InFlightRecord{
		{Seq: 1, KeyGroup: 17, Key: []byte("sensor-1"), Time: 1_700_000_000_000, Watermark: math.MinInt64, Arrival: math.MinInt64, Offset: 41,
			Values: []float64{21.5, -3}, Payload: []byte(`{"t":21.5}`)},
		{Seq: 2, KeyGroup: 300, Key: []byte("sensor-2"), Time: 1_700_000_000_500, Watermark: 1_699_999_999_000, Arrival: 1_700_000_000_731, Offset: 42,
			Values: []float64{}, Payload: []byte(`{}`), Control: []byte(`{"threshold":20}`)},
	}
	var enc []byte
	for i := range recs {
		r := AppendInFlight(nil, &recs[i])
		enc = binary.AppendUvarint(enc, uint64(len(r)))
		enc = append(enc, r...)
	}
	golden := formatGolden(t, "golden-inflight.bin", enc, "InFlightVersion")
	for i, b := 0, golden; len(b) > 0; i++ {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) || i >= len(recs) {
			t.Fatalf("golden-inflight.bin: bad framing at record %d", i)
		}
		r := b[k : k+int(n)]
		b = b[k+int(n):]
		if r[0] != InFlightVersion {
			t.Fatalf("golden record %d is version %d, this build writes %d: run with -update to write the golden file of the new version", i, r[0], InFlightVersion)
		}
		got, err := DecodeInFlight(r)
		if err != nil {
			t.Fatalf("golden record %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, recs[i]) {
			t.Errorf("golden record %d reads as %+v, want %+v", i, got, recs[i])
		}
	}
}
