package agent

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/state/vfs"
)

// TestRetainedPositions: the oldest position per source over the manifests
// listed, savepoints left out; each manifest is read once (a removed file
// whose id is still listed keeps its positions), a completed checkpoint is
// taken without reading, and ids no longer listed are forgotten.
func TestRetainedPositions(t *testing.T) {
	dir := t.TempDir()
	store, err := checkpoint.OpenStore(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	manifest := func(id uint64, kind checkpoint.Kind, pos map[string]uint64) *checkpoint.Manifest {
		return &checkpoint.Manifest{FormatVersion: checkpoint.ManifestVersion, ID: id, Time: time.Unix(1700000000, 0).UTC(),
			Kind: kind, SourcePositions: pos}
	}
	for _, m := range []*checkpoint.Manifest{
		manifest(1, checkpoint.KindFull, map[string]uint64{"a": 10, "b": 7}),
		manifest(2, checkpoint.KindSavepoint, map[string]uint64{"a": 5, "b": 1}),
		manifest(3, checkpoint.KindFull, map[string]uint64{"a": 30, "b": 31}),
	} {
		if err := store.WriteManifest(m); err != nil {
			t.Fatal(err)
		}
	}
	r := retainedPositions{}
	for _, step := range []struct {
		name  string
		do    func(t *testing.T)
		ids   []uint64
		want  map[string]uint64
		known []uint64
	}{
		{name: "read from disk, savepoint left out", ids: []uint64{1, 2, 3},
			want: map[string]uint64{"a": 10, "b": 7}, known: []uint64{1, 2, 3}},
		{name: "read once: files gone, ids still listed", do: func(t *testing.T) {
			if err := os.RemoveAll(filepath.Join(dir, "manifests")); err != nil {
				t.Fatal(err)
			}
		}, ids: []uint64{1, 2, 3}, want: map[string]uint64{"a": 10, "b": 7}, known: []uint64{1, 2, 3}},
		{name: "completed checkpoint taken without reading, retired ids forgotten", do: func(*testing.T) {
			r.note(checkpoint.Completed{ID: 4, Kind: checkpoint.KindFull, Manifest: manifest(4, checkpoint.KindFull, map[string]uint64{"a": 40, "b": 25})})
		}, ids: []uint64{3, 4}, want: map[string]uint64{"a": 30, "b": 25}, known: []uint64{3, 4}},
		{name: "an unreadable manifest is skipped and not remembered", ids: []uint64{3, 4, 5},
			want: map[string]uint64{"a": 30, "b": 25}, known: []uint64{3, 4}},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.do != nil {
				step.do(t)
			}
			if got := r.oldest(store, step.ids); !maps.Equal(got, step.want) {
				t.Errorf("oldest = %v, want %v", got, step.want)
			}
			for _, id := range step.known {
				if _, ok := r[id]; !ok {
					t.Errorf("id %d not remembered", id)
				}
			}
			if len(r) != len(step.known) {
				t.Errorf("remembers %d ids, want %d (%v)", len(r), len(step.known), step.known)
			}
		})
	}
}
