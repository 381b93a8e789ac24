package watermark

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update rewrites the golden resume state: go test ./window/watermark/ -run TestGolden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden_ResumeState: testdata/golden-resume-state.bin is a resume
// state as checkpoints store it; it decodes to the state it was made
// from, and encoding that state gives the same bytes. A difference means
// the encoding changed: bump resumeStateVersion and run with -update. A
// golden file of another version than resumeStateVersion fails too, so a
// bump comes with a new golden file.
func TestGolden_ResumeState(t *testing.T) {
	st := ResumeState{Episode: 3, Elapsed: 12_000, Quiet: 4_500, LastArrival: 1_700_000_000_000, Held: true, HeldAt: 1_699_999_990_000}
	path := filepath.Join("testdata", "golden-resume-state.bin")
	got := st.AppendBinary(nil)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
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
	if len(want) == 0 || want[0] != resumeStateVersion {
		t.Fatalf("golden resume state is version %v, this build writes %d: run with -update to write the golden file of the new version", want[:min(len(want), 1)], resumeStateVersion)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("this build encodes %x, the golden file holds %x: the encoding changed: bump resumeStateVersion and run with -update", got, want)
	}
	dec, err := UnmarshalResumeState(want)
	if err != nil {
		t.Fatal(err)
	}
	if dec != st {
		t.Errorf("golden resume state reads as %+v, want %+v", dec, st)
	}
}
