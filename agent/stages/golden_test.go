package stages

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update rewrites the golden files: go test ./agent/ -run TestGolden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden_InflightExtra: testdata/golden/inflight-extra.bin is a
// subtask's in-flight summary as manifests store it; it decodes to what
// it was made from, and encoding that gives the same bytes. A difference
// means the encoding changed: bump inflightExtraVersion and run with
// -update. A golden file of another version than inflightExtraVersion
// fails too, so a bump comes with a new golden file.
func TestGolden_InflightExtra(t *testing.T) {
	const wm, n = int64(1_700_000_000_000), uint64(42)
	path := filepath.Join("testdata", "golden", "inflight-extra.bin")
	got := encodeInflightExtra(wm, n)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if len(want) == 0 || want[0] != inflightExtraVersion {
		t.Fatalf("golden in-flight summary is version %v, this build writes %d: run with -update to write the golden file of the new version", want[:min(len(want), 1)], inflightExtraVersion)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("this build encodes %x, the golden file holds %x: the encoding changed: bump inflightExtraVersion and run with -update", got, want)
	}
	if gotWM, gotN, ok := decodeInflightExtra(want); !ok || gotWM != wm || gotN != n {
		t.Errorf("golden in-flight summary reads as %d, %d, %v; want %d, %d", gotWM, gotN, ok, wm, n)
	}
}
