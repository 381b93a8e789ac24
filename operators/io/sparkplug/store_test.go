package sparkplug

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/eddy-edge/eddy/state/vfs"
)

// heldSummary is "key@ts=names values" per held result, oldest first, as
// the store reads them back; it leaves the store as it found it.
func heldSummary(t *testing.T, s *store) []string {
	t.Helper()
	var out []string
	floor, recorded := s.floor, s.recorded
	for s.Len() > 0 {
		h, key, vals, err := s.first()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s@%d=%v%v", key, h.tsMs, h.names, vals))
		s.pop()
	}
	s.floor, s.recorded, s.curOK = floor, recorded, false
	if s.rd != nil {
		s.rd.Close()
		s.rd, s.rdSeg = nil, 0
	}
	return out
}

// TestStore_SurvivesReopen: what the store holds reads back after a
// reopen, in order, whatever happened before: results published are gone
// for good, Recover's discard of the epochs after the restored checkpoint
// holds, and results written after it are kept.
func TestStore_SurvivesReopen(t *testing.T) {
	names := []string{"n", "avg"}
	other := []string{"max"}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s *store)
		want []string
	}{
		{"held", func(t *testing.T, s *store) {
			s.add(1, []byte("a"), names, []float64{1, 2}, 10)
			s.add(1, []byte("b"), other, []float64{3}, 20)
			flush(t, s)
		}, []string{"a@10=[n avg][1 2]", "b@20=[max][3]"}},
		{"published then held", func(t *testing.T, s *store) {
			s.add(1, []byte("a"), names, []float64{1, 2}, 10)
			s.add(1, []byte("b"), names, []float64{3, 4}, 20)
			flush(t, s)
			popOne(t, s)
			if err := s.published(); err != nil {
				t.Fatal(err)
			}
			s.add(2, []byte("c"), names, []float64{5, 6}, 30)
			flush(t, s)
		}, []string{"b@20=[n avg][3 4]", "c@30=[n avg][5 6]"}},
		{"recover discards the epochs after the checkpoint", func(t *testing.T, s *store) {
			s.add(1, []byte("a"), names, []float64{1, 2}, 10)
			s.add(2, []byte("b"), names, []float64{3, 4}, 20)
			s.add(3, []byte("c"), names, []float64{5, 6}, 30)
			flush(t, s)
			if n, err := s.recover(1); err != nil || n != 2 {
				t.Fatalf("recover: %d, %v; want 2 discarded", n, err)
			}
			s.add(2, []byte("b2"), names, []float64{3, 4}, 20)
			flush(t, s)
		}, []string{"a@10=[n avg][1 2]", "b2@20=[n avg][3 4]"}},
		{"all published", func(t *testing.T, s *store) {
			s.add(1, []byte("a"), names, []float64{1, 2}, 10)
			flush(t, s)
			popOne(t, s)
			if err := s.published(); err != nil {
				t.Fatal(err)
			}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := openStore(vfs.Default, dir, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			tc.run(t, s)
			before := heldSummary(t, s)
			if !slices.Equal(before, tc.want) {
				t.Fatalf("held %q, want %q", before, tc.want)
			}
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			for range 2 { // a second reopen reads what the first one wrote
				if s, err = openStore(vfs.Default, dir, 1<<20); err != nil {
					t.Fatal(err)
				}
				if got := heldSummary(t, s); !slices.Equal(got, tc.want) {
					t.Fatalf("after reopen held %q, want %q", got, tc.want)
				}
				s.close()
			}
		})
	}
}

func popOne(t *testing.T, s *store) {
	t.Helper()
	if _, _, _, err := s.first(); err != nil {
		t.Fatal(err)
	}
	s.pop()
}

func flush(t *testing.T, s *store) {
	t.Helper()
	if _, err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(); err != nil {
		t.Fatal(err)
	}
}

// TestStore_BoundDropsOldest: past maxBytes the oldest segment's results
// are dropped and counted, the newest kept in order, the log stays near
// the bound, and published results free their segments.
func TestStore_BoundDropsOldest(t *testing.T) {
	dir := t.TempDir()
	const maxBytes = 1 << 20
	s, err := openStore(vfs.Default, dir, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	names := []string{"n", "avg", "max"}
	const n = 40000
	dropped := 0
	for i := range n {
		s.add(uint64(i/1000), []byte(fmt.Sprintf("sensor-%d", i%50)), names, []float64{float64(i), 1, 2}, int64(i))
		if i%100 == 99 {
			d, err := s.flush()
			if err != nil {
				t.Fatal(err)
			}
			dropped += d
		}
	}
	if dropped == 0 || dropped+s.Len() != n {
		t.Fatalf("dropped %d, held %d; want some dropped and the rest of %d held", dropped, s.Len(), n)
	}
	if size := s.Bytes(); size > maxBytes+s.segBytes {
		t.Errorf("log %d bytes, bound %d", size, maxBytes)
	}
	for i := dropped; s.Len() > 0; i++ {
		h, _, v, err := s.first()
		if err != nil {
			t.Fatal(err)
		}
		if int(v[0]) != i || h.tsMs != int64(i) {
			t.Fatalf("held result %v (ts %d) next, want %d", v[0], h.tsMs, i)
		}
		s.pop()
	}
	if err := s.published(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d segments left after everything was published, want the active one: %v", len(entries), entries)
	}
}

// TestStore_TornTail: a crash that tears the last frame (a batch written
// after the last sync) loses only what it tore: the store opens with the
// results before it, and the next results follow them.
func TestStore_TornTail(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(vfs.Default, dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"avg"}
	s.add(1, []byte("a"), names, []float64{1}, 10)
	flush(t, s)
	s.add(2, []byte("b"), names, []float64{2}, 20)
	if _, err := s.flush(); err != nil {
		t.Fatal(err)
	}
	seg, _ := s.log.Active()
	s.close()
	path := filepath.Join(dir, fmt.Sprintf("%016x.wal", seg.ID))
	if err := os.Truncate(path, seg.Size-3); err != nil {
		t.Fatal(err)
	}
	if s, err = openStore(vfs.Default, dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	s.add(2, []byte("c"), names, []float64{3}, 30)
	flush(t, s)
	if got, want := heldSummary(t, s), []string{"a@10=[avg][1]", "c@30=[avg][3]"}; !slices.Equal(got, want) {
		t.Fatalf("held %q, want %q", got, want)
	}
}
