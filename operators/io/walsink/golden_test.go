package walsink

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/io/walsink/qos2"
	"github.com/eddy-edge/eddy/operators/io/walsink/wal"
)

// update rewrites the golden WAL: go test ./operators/io/walsink/ -run TestGolden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenDir holds two segments of today's WAL format, with a record of
// every kind the sink writes.
var goldenDir = filepath.Join("testdata", "golden-wal")

// writeGoldenWAL writes the golden WAL's content into dir through package
// wal, as the sink does: fixed epochs, seqs and commit times.
func writeGoldenWAL(t *testing.T, dir string) {
	t.Helper()
	l, err := wal.Open(nil, dir, func(uint64, []byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st := newLogState()
	write := func(frames []byte) {
		t.Helper()
		for rest := frames; len(rest) > 0; {
			n := wal.FrameHeaderBytes + int(binary.LittleEndian.Uint32(rest))
			if err := st.apply(1, rest[wal.FrameHeaderBytes:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := l.Write(frames); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Rotate(st.appendState(nil)); err != nil {
		t.Fatal(err)
	}
	var b []byte
	b = appendData(b, 1, 1, false, "up/a", []byte(`{"v":1}`))
	b = appendData(b, 1, 2, true, "up/b", []byte(`{"v":2}`))
	b = appendWords(b, kindPreCommit, 1, 2)
	b = appendWords(b, kindCommit, 1, 2, 1_700_000_000_000_000_000)
	b = appendData(b, 2, 3, false, "up/c", []byte("x"))
	b = appendWords(b, kindPreCommit, 2, 3)
	b = appendSteps(b, []qos2.Record{
		{Seq: 1, ID: qos2.IDOf(1), Step: qos2.StepPublishSent},
		{Seq: 2, ID: qos2.IDOf(2), Step: qos2.StepPublishSent},
	})
	write(b)
	write(appendSteps(nil, []qos2.Record{{Seq: 1, ID: qos2.IDOf(1), Step: qos2.StepPubrecReceived}}))
	write(appendSteps(nil, []qos2.Record{{Seq: 1, ID: qos2.IDOf(1), Step: qos2.StepPubcompReceived}}))
	if _, err := l.Rotate(st.appendState(nil)); err != nil {
		t.Fatal(err)
	}
	b = appendWords(nil, kindAbort, 1, 3, 3)
	b = appendData(b, 3, 4, false, "up/d", []byte(`{"v":4}`))
	b = appendWords(b, kindPreCommit, 3, 4)
	b = appendWords(b, kindCommit, 3, 4, 1_700_000_001_000_000_000)
	b = appendWords(b, kindDrop, 4, 4, 1, 11)
	b = appendWords(b, kindResume, 5)
	write(b)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}

// describeWAL reads the WAL in dir record by record and says what each
// holds, decoding each kind on its own (not through the sink's state), so
// the golden file's content is checked field by field.
func describeWAL(t *testing.T, dir string) string {
	t.Helper()
	var out strings.Builder
	st := newLogState()
	l, err := wal.Open(nil, dir, func(seg uint64, p []byte) error {
		fmt.Fprintf(&out, "%d: ", seg)
		switch p[0] {
		case kindState:
			s := newLogState()
			if err := s.applyState(p); err != nil {
				return err
			}
			fmt.Fprintf(&out, "state next=%d last=%d committed=%d/%d assign=%d precommits=%v aborted=%v times=%v flows=%v",
				s.nextSeq, s.lastEpoch, s.committedEpoch, s.committedSeq, s.nextAssign, s.precommits, s.aborted, s.commitTimes, s.flows)
		case kindDataCompact:
			d, err := decodeData(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&out, "data epoch=%d seq=%d retain=%v %s %s", d.epoch, d.seq, d.retain, d.topic, d.payload)
		case kindSteps:
			out.WriteString("steps")
			if err := forEachStep(p, st.flowID, func(r qos2.Record) {
				fmt.Fprintf(&out, " %d:%d:%d", r.Seq, r.ID, r.Step)
			}); err != nil {
				return err
			}
		default:
			n := map[byte]int{kindPreCommit: 2, kindCommit: 3, kindAbort: 3, kindDrop: 4, kindResume: 1}[p[0]]
			w, err := decodeWords(p, n)
			if err != nil {
				return err
			}
			fmt.Fprintf(&out, "kind %d %v", p[0], w)
		}
		out.WriteByte('\n')
		return st.apply(seg, p)
	})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	return out.String()
}

const goldenWALContent = `1: state next=1 last=0 committed=0/0 assign=1 precommits=[] aborted=[] times=[] flows=map[]
1: data epoch=1 seq=1 retain=false up/a {"v":1}
1: data epoch=1 seq=2 retain=true up/b {"v":2}
1: kind 3 [1 2]
1: kind 4 [1 2 1700000000000000000]
1: data epoch=2 seq=3 retain=false up/c x
1: kind 3 [2 3]
1: steps 1:1:1 2:2:1
1: steps 1:1:2
1: steps 1:1:3
2: state next=4 last=2 committed=1/2 assign=3 precommits=[{2 3}] aborted=[] times=[{2 1700000000000000000}] flows=map[2:{2 2 publish-sent}]
2: kind 5 [1 3 3]
2: data epoch=3 seq=4 retain=false up/d {"v":4}
2: kind 3 [3 4]
2: kind 4 [3 4 1700000001000000000]
2: kind 7 [4 4 1 11]
2: kind 8 [5]
`

// TestGolden_WAL: the WAL in testdata/golden-wal, written by this build's
// format, decodes to the records it was written with, and writing those
// records again gives the same bytes. A failure means the encoding changed:
// bump wal.FormatVersion and rewrite the golden files with -update. A
// golden file of another version than wal.FormatVersion fails too, so a
// bump comes with a new golden file.
func TestGolden_WAL(t *testing.T) {
	fresh := t.TempDir()
	writeGoldenWAL(t, fresh)
	names, err := os.ReadDir(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.RemoveAll(goldenDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(fresh, n.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(goldenDir, n.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	goldenNames, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(goldenNames) != len(names) {
		t.Fatalf("golden WAL has %d segments, this build writes %d: the encoding changed without a new version: bump wal.FormatVersion and run with -update", len(goldenNames), len(names))
	}
	golden := t.TempDir()
	for i, n := range goldenNames {
		want, err := os.ReadFile(filepath.Join(goldenDir, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(want) < wal.HeaderBytes || string(want[:8]) != "EDDYWSNK" {
			t.Fatalf("golden %s has no segment header", n.Name())
		}
		if v := binary.LittleEndian.Uint32(want[8:]); v != wal.FormatVersion {
			t.Fatalf("golden %s is format version %d, this build writes %d: run with -update to write the golden file of the new version", n.Name(), v, wal.FormatVersion)
		}
		got, err := os.ReadFile(filepath.Join(fresh, names[i].Name()))
		if err != nil {
			t.Fatal(err)
		}
		if n.Name() != names[i].Name() || !bytes.Equal(got, want) {
			t.Errorf("segment %s: this build writes\n%x\nthe golden file of version %d holds\n%x\nthe encoding changed: bump wal.FormatVersion and run with -update",
				names[i].Name(), got, wal.FormatVersion, want)
		}
		if err := os.WriteFile(filepath.Join(golden, n.Name()), want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := describeWAL(t, golden); got != goldenWALContent {
		t.Errorf("golden WAL reads as\n%s\nwant\n%s", got, goldenWALContent)
	}
}
