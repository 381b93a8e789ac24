package walsink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/io/walsink/wal"
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

// TestSink_RefusesOtherFormat: a WAL whose segments name a format version
// other than this build's (an earlier development build's, or a newer
// Eddy's) is refused with wal.ErrVersion naming the segment and both
// versions, and left as it is.
func TestSink_RefusesOtherFormat(t *testing.T) {
	for _, version := range []uint32{wal.FormatVersion - 1, wal.FormatVersion + 1} {
		t.Run(fmt.Sprintf("format_%d", version), func(t *testing.T) {
			dir := t.TempDir()
			s := offline(t, dir)
			writeEpochs(t, s, 1, 3, 10)
			s.Close()
			var before [][]byte
			rewriteSegments(t, s.wal, dir, func(b []byte) []byte {
				binary.LittleEndian.PutUint32(b[8:], version)
				before = append(before, bytes.Clone(b))
				return b
			})
			_, err := Open(dir, Options{Broker: "tcp://127.0.0.1:1", ClientID: "offline"}, testLogger(t))
			if !errors.Is(err, wal.ErrVersion) {
				t.Fatalf("Open = %v, want wal.ErrVersion", err)
			}
			for _, part := range []string{wal.SegmentPath(dir, s.wal.Segments()[0].ID), fmt.Sprintf("format version %d,", version), fmt.Sprintf("reads version %d only", wal.FormatVersion)} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("Open = %v, want it to name %q", err, part)
				}
			}
			i := 0
			rewriteSegments(t, s.wal, dir, func(b []byte) []byte {
				if !bytes.Equal(b, before[i]) {
					t.Errorf("segment %d changed by the refused Open", i)
				}
				i++
				return b
			})
		})
	}
}
