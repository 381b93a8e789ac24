package walsink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/walsink/wal"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// rewriteSegments applies fn to the bytes of every segment file in dir.
func rewriteSegments(t *testing.T, l *wal.Log, dir string, fn func([]byte) []byte) {
	t.Helper()
	for _, seg := range l.Segments() {
		p := wal.SegmentPath(dir, seg.ID)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, fn(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSink_OpensWALOfEarlierBuild: a WAL in the layout of builds before the
// segment header (the same frames and records, no header), left with
// undelivered committed messages, open flows and a pre-committed epoch, is
// read by Open and delivered in full, exactly once and in order; new writes
// go to segments of the current format, and the old segments are deleted
// once delivered.
func TestSink_OpensWALOfEarlierBuild(t *testing.T) {
	b := mosquitto.Start(t)
	c := startCollector(t, b.URL(), "up/#")
	dir := t.TempDir()
	opts := Options{Broker: b.URL(), ClientID: "walsink-" + t.Name(), SegmentBytes: 8 << 10, MaxInflight: 20}
	s, err := Open(dir, opts, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	want := writeEpochs(t, s, 1, 30, 50)
	if err := s.Write(31, msgs(31, 50)); err != nil {
		t.Fatal(err)
	}
	if err := s.PreCommit(31); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		want = append(want, string(testID(nil, 31, i)))
	}
	waitDelivered(t, s, 300, 30*time.Second)
	s.Close() // mid-drain: open flows stay in the WAL
	rewriteSegments(t, s.wal, dir, func(b []byte) []byte {
		if !bytes.HasPrefix(b, []byte("EDDYWSNK\x03\x00\x00\x00")) {
			t.Fatalf("segment does not start with the header: %q", b[:min(len(b), 12)])
		}
		return b[wal.HeaderBytes:] // the earlier build's layout
	})

	s = mustOpen(t, dir, opts)
	if err := s.Recover(31); err != nil {
		t.Fatal(err)
	}
	segs := s.wal.Segments()
	if active := segs[len(segs)-1]; active.Version != wal.FormatVersion {
		t.Errorf("active segment after Open: %+v, want format version %d", active, wal.FormatVersion)
	}
	if segs[0].Version != wal.LegacyVersion {
		t.Errorf("oldest segment %+v, want the earlier build's version %d", segs[0], wal.LegacyVersion)
	}
	got := c.waitFor(t, len(want), 60*time.Second)
	waitDrained(t, s, 10*time.Second)
	checkExactlyOnce(t, got, want)
	for _, seg := range s.wal.Segments() {
		if seg.Version != wal.FormatVersion {
			t.Errorf("segment %+v of the earlier format left after delivering everything", seg)
		}
	}
}

// TestSink_RefusesNewerFormat: a WAL whose segments name a format version
// this build does not know is refused with wal.ErrVersion, and left as it
// is for the build that wrote it.
func TestSink_RefusesNewerFormat(t *testing.T) {
	dir := t.TempDir()
	s := offline(t, dir)
	writeEpochs(t, s, 1, 3, 10)
	s.Close()
	var before [][]byte
	rewriteSegments(t, s.wal, dir, func(b []byte) []byte {
		binary.LittleEndian.PutUint32(b[8:], wal.FormatVersion+1)
		before = append(before, bytes.Clone(b))
		return b
	})
	_, err := Open(dir, Options{Broker: "tcp://127.0.0.1:1", ClientID: "offline"}, testLogger(t))
	if !errors.Is(err, wal.ErrVersion) {
		t.Fatalf("Open = %v, want wal.ErrVersion", err)
	}
	t.Logf("error: %v", err)
	i := 0
	rewriteSegments(t, s.wal, dir, func(b []byte) []byte {
		if !bytes.Equal(b, before[i]) {
			t.Errorf("segment %d changed by the refused Open", i)
		}
		i++
		return b
	})
}
