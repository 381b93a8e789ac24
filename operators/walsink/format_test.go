package walsink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/walsink/qos2"
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

// toEarlierFormat returns a function that rewrites the segments of a WAL
// of this build, oldest first, into the layout of format version (1: no
// segment header; 3: the header naming 3), with every message and every
// batch of publish-flow steps written as the earlier builds wrote them
// (kindData, fixed-width integers; kindSession, 11 bytes a step). It counts
// the messages and steps so rewritten and the flows left open at the end
// of the WAL.
func toEarlierFormat(t *testing.T, version uint32, c *converted) func([]byte) []byte {
	st := newLogState() // gives the packet ids kindSteps leaves out
	var seg uint64
	return func(b []byte) []byte {
		t.Helper()
		if !bytes.HasPrefix(b, binary.LittleEndian.AppendUint32([]byte("EDDYWSNK"), wal.FormatVersion)) {
			t.Fatalf("segment does not start with the header of format %d: %q", wal.FormatVersion, b[:min(len(b), 12)])
		}
		var out []byte
		if version != wal.LegacyVersion {
			out = binary.LittleEndian.AppendUint32([]byte("EDDYWSNK"), version)
		}
		seg++
		for rest := b[wal.HeaderBytes:]; len(rest) > 0; {
			n := wal.FrameHeaderBytes + int(binary.LittleEndian.Uint32(rest))
			p := rest[wal.FrameHeaderBytes:n]
			rest = rest[n:]
			if version == 4 { // the records of format 5, as format 4 wrote them
				switch p[0] {
				case kindSteps:
					c.steps += countSteps(t, &st, p)
				case kindDataCompact:
					c.data++
					fallthrough
				default:
					if err := st.apply(seg, p); err != nil {
						t.Fatal(err)
					}
				}
				out = wal.AppendFrame(out, p)
				continue
			}
			if p[0] == kindDataCompact {
				d, err := decodeData(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := st.apply(seg, p); err != nil {
					t.Fatal(err)
				}
				c.data++
				out = appendDataFixed(out, d)
				continue
			}
			if p[0] != kindSteps {
				if err := st.apply(seg, p); err != nil {
					t.Fatal(err)
				}
				out = wal.AppendFrame(out, p)
				continue
			}
			var recs []qos2.Record
			if err := forEachStep(p, st.flowID, func(r qos2.Record) {
				recs = append(recs, r)
				st.applyStep(r)
			}); err != nil {
				t.Fatal(err)
			}
			c.steps += len(recs)
			out = appendSession(out, recs)
		}
		c.openFlows = len(st.flows)
		return out
	}
}

type converted struct{ data, steps, openFlows int }

// countSteps applies the steps of the kindSteps record p to st and counts
// them.
func countSteps(t *testing.T, st *logState, p []byte) int {
	t.Helper()
	n := 0
	if err := forEachStep(p, st.flowID, func(r qos2.Record) {
		n++
		st.applyStep(r)
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// appendDataFixed appends a kindData frame, as builds of format 3 and
// earlier recorded a message.
func appendDataFixed(dst []byte, d dataRecord) []byte {
	start := len(dst)
	dst = wal.BeginFrame(dst)
	dst = append(dst, kindData)
	dst = binary.LittleEndian.AppendUint64(dst, d.epoch)
	dst = binary.LittleEndian.AppendUint64(dst, d.seq)
	var flags byte
	if d.retain {
		flags |= flagRetain
	}
	dst = append(dst, flags)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(d.topic)))
	dst = append(dst, d.topic...)
	dst = append(dst, d.payload...)
	return wal.EndFrame(dst, start)
}

// appendSession appends a kindSession frame, as builds of format 3 and
// earlier recorded a batch of flow steps.
func appendSession(dst []byte, recs []qos2.Record) []byte {
	start := len(dst)
	dst = wal.BeginFrame(dst)
	dst = append(dst, kindSession)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(recs)))
	for _, r := range recs {
		dst = binary.LittleEndian.AppendUint64(dst, r.Seq)
		dst = binary.LittleEndian.AppendUint16(dst, r.ID)
		dst = append(dst, byte(r.Step))
	}
	return wal.EndFrame(dst, start)
}

// TestSink_OpensWALOfEarlierBuild: a WAL in the layout of an earlier build
// (format 1: the same frames and records, no segment header; format 3: the
// header, and flow steps in 11-byte entries; format 4: the records of
// format 5, every PUBLISH step synced), left with undelivered
// committed messages, open flows and a pre-committed epoch, is read by Open
// and delivered in full, exactly once and in order; new writes go to
// segments of the current format, and the old segments are deleted once
// delivered.
func TestSink_OpensWALOfEarlierBuild(t *testing.T) {
	for _, version := range []uint32{wal.LegacyVersion, 3, 4} {
		t.Run(fmt.Sprintf("format_%d", version), func(t *testing.T) { testOpensWALOfEarlierBuild(t, version) })
	}
}

func testOpensWALOfEarlierBuild(t *testing.T, version uint32) {
	b := mosquitto.Start(t)
	c := startCollector(t, b.URL(), "up/#")
	dir := t.TempDir()
	opts := Options{Broker: b.URL(), ClientID: "walsink-" + sanitize(t.Name()), SegmentBytes: 8 << 10, MaxInflight: 20}
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
	var conv converted
	rewriteSegments(t, s.wal, dir, toEarlierFormat(t, version, &conv))
	if conv.data == 0 || conv.steps == 0 || conv.openFlows == 0 {
		t.Fatalf("the WAL held %d messages, %d flow steps and %d open flows, want some of each in the earlier format",
			conv.data, conv.steps, conv.openFlows)
	}

	s = mustOpen(t, dir, opts)
	if err := s.Recover(31); err != nil {
		t.Fatal(err)
	}
	segs := s.wal.Segments()
	if active := segs[len(segs)-1]; active.Version != wal.FormatVersion {
		t.Errorf("active segment after Open: %+v, want format version %d", active, wal.FormatVersion)
	}
	if segs[0].Version != version {
		t.Errorf("oldest segment %+v, want the earlier build's version %d", segs[0], version)
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
