package keyed

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// update rewrites the golden block states: go test ./operators/keyed/ -run TestGolden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenBlocksPath holds the blocks' state encodings as snapshot files
// store them, one per line: a name, then the bytes in hex.
var goldenBlocksPath = filepath.Join("testdata", "golden", "block-states.txt")

// goldenBlockState is one state, its encoding and its decoding.
type goldenBlockState struct {
	name   string
	state  any
	encode func() []byte
	decode func([]byte) (any, error)
}

func goldenBlockStates() []goldenBlockState {
	ab := AbsenceState{Seen: true, Silent: true, Seq: 3, Last: 1_700_000_000_000, From: 41}
	al := AlarmState{Phase: AlarmPending, Seq: 2, Since: 1_700_000_000_500}
	rb := ReportState{Reported: true, Seq: 7, Value: 21.5, Time: 1_700_000_001_000, From: 42, Beats: 4}
	de := DedupEntry{Seen: 1_700_000_002_000}
	return []goldenBlockState{
		{"absence", ab, func() []byte { return AbsenceCodec{}.Append(nil, ab) }, func(b []byte) (any, error) { return AbsenceCodec{}.Decode(b) }},
		{"absence_offsets", ab, func() []byte { return AbsenceCodec{Offsets: true}.Append(nil, ab) }, func(b []byte) (any, error) { return AbsenceCodec{Offsets: true}.Decode(b) }},
		{"alarm", al, func() []byte { return AlarmCodec{}.Append(nil, al) }, func(b []byte) (any, error) { return AlarmCodec{}.Decode(b) }},
		{"report", rb, func() []byte { return ReportCodec{}.Append(nil, rb) }, func(b []byte) (any, error) { return ReportCodec{}.Decode(b) }},
		{"report_offsets", rb, func() []byte { return ReportCodec{Offsets: true}.Append(nil, rb) }, func(b []byte) (any, error) { return ReportCodec{Offsets: true}.Decode(b) }},
		{"dedup", de, func() []byte { return DedupCodec{}.Append(nil, de) }, func(b []byte) (any, error) { return DedupCodec{}.Decode(b) }},
	}
}

// TestGolden_BlockStates: testdata/golden/block-states.txt holds each
// block's state encoding as this build writes it, and each decodes to the
// state it was made from (the variants without offsets drop From and
// Beats). A difference means the encoding changed: bump stateVersion and
// run with -update. A golden state of another version than stateVersion
// fails too, so a bump comes with a new golden file.
func TestGolden_BlockStates(t *testing.T) {
	states := goldenBlockStates()
	if *update {
		var b strings.Builder
		for _, s := range states {
			fmt.Fprintf(&b, "%s %x\n", s.name, s.encode())
		}
		if err := os.WriteFile(goldenBlocksPath, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.ReadFile(goldenBlocksPath)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	golden := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		name, h, ok := strings.Cut(sc.Text(), " ")
		b, err := hex.DecodeString(h)
		if !ok || err != nil || len(b) == 0 {
			t.Fatalf("golden line %q", sc.Text())
		}
		if b[0] != stateVersion {
			t.Fatalf("golden %s is version %d, this build writes %d: run with -update to write the golden file of the new version", name, b[0], stateVersion)
		}
		golden[name] = b
	}
	for _, s := range states {
		want := golden[s.name]
		if got := s.encode(); !bytes.Equal(got, want) {
			t.Errorf("%s: this build encodes %x, the golden file holds %x: the encoding changed: bump stateVersion and run with -update", s.name, got, want)
		}
		got, err := s.decode(want)
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
			continue
		}
		exp := s.state
		if !strings.HasSuffix(s.name, "_offsets") {
			switch st := exp.(type) {
			case AbsenceState:
				st.From = 0
				exp = st
			case ReportState:
				st.From, st.Beats = 0, 0
				exp = st
			}
		}
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("golden %s reads as %+v, want %+v", s.name, got, exp)
		}
	}
}
