package sink

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/state/vfs"
)

func TestPartsToDelete(t *testing.T) {
	now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	parts := []committedPart{{1, now.Add(-5 * day)}, {2, now.Add(-3 * day)}, {3, now.Add(-day)}, {4, now}}
	for _, tc := range []struct {
		name string
		r    PartRetention
		want []uint64
	}{
		{"keep everything", PartRetention{}, nil},
		{"max_files", PartRetention{MaxFiles: 2}, []uint64{1, 2}},
		{"max_files above count", PartRetention{MaxFiles: 10}, nil},
		{"max_age", PartRetention{MaxAge: 2 * day}, []uint64{1, 2}},
		{"max_age everything old", PartRetention{MaxAge: time.Hour}, []uint64{1, 2, 3}},
		{"both: max_files decides", PartRetention{MaxFiles: 1, MaxAge: 4 * day}, []uint64{1, 2, 3}},
		{"both: max_age decides", PartRetention{MaxFiles: 3, MaxAge: 2 * day}, []uint64{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := partsToDelete(parts, tc.r, now); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTwoPhaseFile_RetentionDeletesOnlyCommittedParts: with max_files = 2,
// each commit leaves the two newest committed parts; pending and
// in-progress parts (results not committed yet) are never deleted, however
// many there are.
func TestTwoPhaseFile_RetentionDeletesOnlyCommittedParts(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenTwoPhaseFile(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	s.SetRetention(PartRetention{MaxFiles: 2})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for e := uint64(1); e <= 5; e++ {
		must(s.Write(e, items(string(rune('a'+e-1)))))
		must(s.PreCommit(e))
	}
	must(s.Write(6, items("f")))
	must(s.Commit(3))
	if got := committed(t, dir); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("after commit 3: %v, want [b c]", got)
	}
	for _, e := range []uint64{4, 5} {
		if _, err := os.Stat(s.path(e, pendingSuffix)); err != nil {
			t.Errorf("pending part %d: %v", e, err)
		}
	}
	if _, err := os.Stat(s.path(6, inprogressSufix)); err != nil {
		t.Errorf("in-progress part 6: %v", err)
	}
	must(s.Commit(5))
	if got := committed(t, dir); !slices.Equal(got, []string{"d", "e"}) {
		t.Fatalf("after commit 5: %v, want [d e]", got)
	}
	must(s.Close())
}

// TestTwoPhaseFile_RetentionResumesAtRecover: deleting is idempotent, so a
// crash part way through (here: parts left over from a run without a bound,
// and one already gone) is finished by the next start's Recover, by age.
func TestTwoPhaseFile_RetentionResumesAtRecover(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenTwoPhaseFile(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	for e := uint64(1); e <= 4; e++ {
		if err := s.Write(e, items("x")); err != nil {
			t.Fatal(err)
		}
		if err := s.PreCommit(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(3); err != nil {
		t.Fatal(err)
	}
	s.Close()
	old := time.Now().Add(-48 * time.Hour)
	for _, e := range []uint64{2, 3} {
		if err := os.Chtimes(s.path(e, ""), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(s.path(1, "")); err != nil { // the crash deleted part 1 only
		t.Fatal(err)
	}

	s2, err := OpenTwoPhaseFile(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	s2.SetRetention(PartRetention{MaxAge: 24 * time.Hour})
	if err := s2.Recover(4); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	want := []string{s2.path(4, "")}
	if !slices.Equal(names, want) {
		t.Fatalf("files after Recover: %v, want %v", names, want)
	}
}
