package agent

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/state/vfs"
)

// fillLog opens an ingest log of 1 KiB segments, 4 KiB at most, and appends
// one 100-byte entry at a time until it is full (Append said ErrFull), or,
// unless full, until it holds 3 KiB; it returns the log and the offset of
// its last entry.
func fillLog(t *testing.T, full bool) (*ingest.Log, uint64) {
	t.Helper()
	l, err := ingest.Open(t.TempDir(), ingest.Options{SegmentBytes: 1 << 10, MaxDiskBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for full || l.SizeBytes() < 3<<10 {
		_, _, err := l.Append([]ingest.Entry{{Topic: []byte("t"), Payload: bytes.Repeat([]byte("x"), 100)}})
		if errors.Is(err, ingest.ErrFull) {
			return l, l.LastOffset()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return l, l.LastOffset()
}

// TestSourceRunner_Ingest: the checkpoint driver sees a source's ingest
// log as full while it refuses appends, and read to its end once the
// runner forwarded its last entry; a source without one is never full.
func TestSourceRunner_Ingest(t *testing.T) {
	l, last := fillLog(t, true)
	s := &sourceRunner{name: "s", ilog: l}
	s.pos.Store(last - 1)
	if got := s.Ingest(); !got.Full || got.ReadToEnd {
		t.Fatalf("Ingest() = %+v with the log full and the reader behind its end", got)
	}
	s.pos.Store(last)
	if got := s.Ingest(); !got.Full || !got.ReadToEnd {
		t.Fatalf("Ingest() = %+v with the log full and read to its end", got)
	}
	if err := l.Truncate(last + 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Append([]ingest.Entry{{Payload: []byte("y")}}); err != nil {
		t.Fatal(err)
	}
	if got := s.Ingest(); got.Full {
		t.Fatalf("Ingest() = %+v with the log taking appends again", got)
	}
	if got := (&sourceRunner{name: "file"}).Ingest(); got.Full {
		t.Fatalf("Ingest() = %+v without an ingest log", got)
	}
}

// TestTruncateIngest_FullLogShrinksToNewestCheckpoint: retention keeps
// the ingest log from the oldest retained checkpoint's position, but a full
// log (whose intake holds messages, so no later checkpoint would hold a
// newer position) is truncated below the newest checkpoint's, with a line
// saying so; savepoints hold nothing back either way.
func TestTruncateIngest_FullLogShrinksToNewestCheckpoint(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(map[bool]string{false: "not full", true: "full"}[full], func(t *testing.T) {
			l, last := fillLog(t, full)
			store, err := checkpoint.OpenStore(vfs.Default, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			manifest := func(id uint64, kind checkpoint.Kind, pos uint64) *checkpoint.Manifest {
				return &checkpoint.Manifest{FormatVersion: checkpoint.ManifestVersion, ID: id, Time: time.Unix(1700000000, 0).UTC(),
					Kind: kind, SourcePositions: map[string]uint64{"s": pos}}
			}
			ms := []*checkpoint.Manifest{
				manifest(1, checkpoint.KindFull, 2),
				manifest(2, checkpoint.KindFull, last/2),
				manifest(3, checkpoint.KindSavepoint, 1),
				manifest(4, checkpoint.KindIncremental, last),
			}
			for _, m := range ms {
				if err := store.WriteManifest(m); err != nil {
					t.Fatal(err)
				}
			}
			var out strings.Builder
			df := &dataflow{log: slog.New(slog.NewTextHandler(&out, nil)), retained: retainedPositions{},
				sources: map[string]*sourceRunner{"s": {name: "s", ilog: l}}}
			size := l.SizeBytes()
			df.truncateIngest(store, checkpoint.Completed{ID: 4, Kind: checkpoint.KindIncremental, Manifest: ms[3]})
			first := l.FirstOffset()
			switch {
			case full && (first <= last/2+1 || l.SizeBytes() >= size):
				t.Errorf("full log kept from offset %d (%d → %d bytes); want the segments below the newest checkpoint's position %d dropped",
					first, size, l.SizeBytes(), last)
			case full && !strings.Contains(out.String(), "ingest log full: shrunk"):
				t.Errorf("no line saying the full log was shrunk to the newest checkpoint:\n%s", out.String())
			case !full && first > 3:
				t.Errorf("log kept from offset %d; want it kept from the oldest retained checkpoint's position 2", first)
			}
		})
	}
}

// TestBatchFits: a batch is cut where its entries, each its size plus
// ingest.EntryOverhead, pass the limit; at least one entry goes, however
// large.
func TestBatchFits(t *testing.T) {
	o := int(ingest.EntryOverhead)
	for _, tt := range []struct {
		sizes []int
		limit int64
		want  int
	}{
		{[]int{10, 10, 10}, int64(3 * (10 + o)), 3},
		{[]int{10, 10, 10}, int64(3*(10+o) - 1), 2},
		{[]int{1000, 10}, 100, 1},
		{[]int{10, 1000}, 100, 1},
		{nil, 100, 0},
	} {
		if got := batchFits(len(tt.sizes), tt.limit, func(i int) int { return tt.sizes[i] }); got != tt.want {
			t.Errorf("batchFits(%v, %d) = %d, want %d", tt.sizes, tt.limit, got, tt.want)
		}
	}
}
