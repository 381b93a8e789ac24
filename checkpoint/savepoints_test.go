package checkpoint

import (
	"errors"
	"slices"
	"testing"
)

// TestStore_RemoveSavepoint: Savepoints lists the savepoints only;
// RemoveSavepoint removes the savepoint's manifest and the files only it
// referenced, and refuses to remove a checkpoint that is not a savepoint.
func TestStore_RemoveSavepoint(t *testing.T) {
	s, _ := newRecordingStore(t)
	f1 := mustWriteSnapshot(t, s, "a", KindFull, 1, []testEntry{{"b", "k", "1", false}})
	mustWriteManifest(t, s, testManifest(1, KindFull, f1))
	sp2 := mustWriteSnapshot(t, s, "a", KindFull, 2, []testEntry{{"b", "k", "2", false}})
	mustWriteManifest(t, s, testManifest(2, KindSavepoint, sp2))
	sp3 := mustWriteSnapshot(t, s, "a", KindFull, 3, []testEntry{{"b", "k", "3", false}})
	mustWriteManifest(t, s, testManifest(3, KindSavepoint, sp3))

	if sps, err := s.Savepoints(); err != nil || !slices.Equal(sps, []uint64{2, 3}) {
		t.Fatalf("Savepoints = %v, %v; want [2 3]", sps, err)
	}
	if _, err := s.RemoveSavepoint(1); !errors.Is(err, ErrNotSavepoint) {
		t.Fatalf("RemoveSavepoint(full checkpoint) = %v, want ErrNotSavepoint", err)
	}
	removed, err := s.RemoveSavepoint(3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{sp3.Name}) {
		t.Errorf("removed %v, want %s", removed, sp3.Name)
	}
	ids, _ := s.ManifestIDs()
	files, _ := s.Files()
	want := []string{f1.Name, sp2.Name}
	slices.Sort(want)
	if !slices.Equal(ids, []uint64{1, 2}) || !slices.Equal(files, want) {
		t.Errorf("after removal: manifests %v files %v", ids, files)
	}
	if _, err := s.RemoveSavepoint(3); err == nil {
		t.Error("removing it again succeeded")
	}
}
