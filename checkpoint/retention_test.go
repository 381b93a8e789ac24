package checkpoint

import (
	"fmt"
	"slices"
	"testing"

	"github.com/eddy-edge/eddy/state/vfs"
)

// ref makes a FileRef named after a short label, for plans.
func ref(label string) FileRef {
	sum := fmt.Sprintf("%064x", []byte(label))[:64]
	return FileRef{Name: "files/" + sum + ".snap", SHA256: sum}
}

func TestPlanRetention(t *testing.T) {
	m := func(id uint64, kind Kind, files ...string) *Manifest {
		mf := &Manifest{ID: id, Kind: kind}
		for _, f := range files {
			mf.Files = append(mf.Files, ref(f))
		}
		return mf
	}
	names := func(labels ...string) []string {
		var out []string
		for _, l := range labels {
			out = append(out, ref(l).Name)
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name          string
		manifests     []*Manifest
		retain        int
		manifestsGone []uint64
		filesGone     []string
	}{
		{"fewer than retain", []*Manifest{m(1, KindFull, "f1")}, 3, nil, nil},
		{"drop the oldest full", []*Manifest{m(1, KindFull, "f1"), m(2, KindFull, "f2"), m(3, KindFull, "f3")}, 2, []uint64{1}, names("f1")},
		{"shared base stays while referenced", []*Manifest{
			m(1, KindFull, "f1"), m(2, KindIncremental, "f1", "i2"), m(3, KindIncremental, "f1", "i2", "i3"),
		}, 1, []uint64{1, 2}, nil},
		{"base goes with its last referrer", []*Manifest{
			m(1, KindFull, "f1"), m(2, KindIncremental, "f1", "i2"), m(3, KindFull, "f3"), m(4, KindIncremental, "f3", "i4"),
		}, 2, []uint64{1, 2}, names("f1", "i2")},
		{"savepoints are never deleted and do not count", []*Manifest{
			m(1, KindFull, "f1"), m(2, KindSavepoint, "s2"), m(3, KindFull, "f3"), m(4, KindSavepoint, "s4"), m(5, KindFull, "f5"),
		}, 1, []uint64{1, 3}, names("f1", "f3")},
		{"unordered input", []*Manifest{m(3, KindFull, "f3"), m(1, KindFull, "f1"), m(2, KindFull, "f2")}, 1, []uint64{1, 2}, names("f1", "f2")},
		{"retain 0 keeps all", []*Manifest{m(1, KindFull, "f1"), m(2, KindFull, "f2")}, 0, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PlanRetention(tt.manifests, tt.retain)
			if !slices.Equal(p.Manifests, tt.manifestsGone) || !slices.Equal(p.Files, tt.filesGone) {
				t.Errorf("plan %+v, want manifests %v files %v", p, tt.manifestsGone, tt.filesGone)
			}
		})
	}
}

// Retention (checkpoint/doc.go "On disk"), and the crash-safe order: manifests are removed
// (and their directory synced) before the files they referenced.
func TestStore_Retain(t *testing.T) {
	s, rfs := newRecordingStore(t)
	f1 := mustWriteSnapshot(t, s, "a", KindFull, 1, []testEntry{{"b", "k", "1", false}})
	mustWriteManifest(t, s, testManifest(1, KindFull, f1))
	i2 := mustWriteSnapshot(t, s, "a", KindIncremental, 2, []testEntry{{"b", "k", "2", false}})
	mustWriteManifest(t, s, testManifest(2, KindIncremental, f1, i2))
	f3 := mustWriteSnapshot(t, s, "a", KindFull, 3, []testEntry{{"b", "k", "3", false}})
	mustWriteManifest(t, s, testManifest(3, KindFull, f3))
	sp := mustWriteSnapshot(t, s, "a", KindFull, 4, []testEntry{{"b", "k", "4", false}})
	mustWriteManifest(t, s, testManifest(4, KindSavepoint, sp))
	// A file of a checkpoint in progress (no manifest yet) must survive.
	inProgress := mustWriteSnapshot(t, s, "a", KindIncremental, 5, []testEntry{{"b", "k", "5", false}})

	rfs.reset()
	plan, err := s.Retain(1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Manifests, []uint64{1, 2}) {
		t.Errorf("removed manifests %v", plan.Manifests)
	}
	checkGolden(t, "retain_order.txt", rfs.log())
	ids, _ := s.ManifestIDs()
	files, _ := s.Files()
	want := []string{f3.Name, sp.Name, inProgress.Name}
	slices.Sort(want)
	if !slices.Equal(ids, []uint64{3, 4}) || !slices.Equal(files, want) {
		t.Errorf("after retention: manifests %v files %v", ids, files)
	}

	// CollectGarbage, with nothing in progress, removes the orphan.
	garbage, err := s.CollectGarbage()
	if err != nil || !slices.Equal(garbage, []string{inProgress.Name}) {
		t.Errorf("CollectGarbage = %v, %v", garbage, err)
	}
}

func TestStore_RetainRemovesOldGarbageManifest(t *testing.T) {
	s, _ := newRecordingStore(t)
	for id := uint64(1); id <= 3; id++ {
		f := mustWriteSnapshot(t, s, "a", KindFull, id, nil)
		mustWriteManifest(t, s, testManifest(id, KindFull, f))
	}
	if err := vfs.Default.Remove(s.path(manifestName(1))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, s.path(manifestName(1)), []byte("{garbage"))
	writeFile(t, s.path(manifestName(9)), []byte("{garbage"))
	plan, err := s.Retain(2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Manifests, []uint64{1}) {
		t.Errorf("removed %v, want the garbage manifest 1 only (9 is newer than the kept ones)", plan.Manifests)
	}
}

// Retention remembers the manifests it has seen, but a manifest removed by
// hand meanwhile (eddy savepoint rm) is neither removed again nor keeps its
// files, and one written by another Store on the directory is read.
func TestStore_RetainAfterManifestsChangedByHand(t *testing.T) {
	s, _ := newRecordingStore(t)
	var files []FileRef
	for id := uint64(1); id <= 3; id++ {
		f := mustWriteSnapshot(t, s, "a", KindFull, id, []testEntry{{"b", "k", fmt.Sprint(id), false}})
		files = append(files, f)
		kind := KindFull
		if id == 2 {
			kind = KindSavepoint
		}
		mustWriteManifest(t, s, testManifest(id, kind, f))
	}
	if _, err := s.Retain(1); err != nil {
		t.Fatal(err)
	}
	if err := vfs.Default.Remove(s.path(manifestName(2))); err != nil { // the savepoint, by hand
		t.Fatal(err)
	}
	other, err := OpenStore(vfs.Default, s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	f4 := mustWriteSnapshot(t, other, "a", KindFull, 4, []testEntry{{"b", "k", "4", false}})
	mustWriteManifest(t, other, testManifest(4, KindFull, f4))
	plan, err := s.Retain(1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Manifests, []uint64{3}) || !slices.Equal(plan.Files, []string{files[2].Name}) {
		t.Errorf("plan %+v, want manifest 3 and its file removed", plan)
	}
	if ids, _ := s.ManifestIDs(); !slices.Equal(ids, []uint64{4}) {
		t.Errorf("manifests left %v, want [4]", ids)
	}
}
