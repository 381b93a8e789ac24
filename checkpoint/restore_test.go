package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/state/vfs"
)

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// threeCheckpoints writes checkpoints 1 (full), 2 and 3 (incremental on 1)
// and returns the store and the file of each checkpoint.
func threeCheckpoints(t *testing.T) (*Store, []FileRef) {
	t.Helper()
	s, err := OpenStore(vfs.Default, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var refs []FileRef
	var chain []FileRef
	for id := uint64(1); id <= 3; id++ {
		kind := KindIncremental
		if id == 1 {
			kind = KindFull
		}
		r := mustWriteSnapshot(t, s, "window/0", kind, id, manyEntries(int(200*id)))
		refs = append(refs, r)
		chain = append(chain, r)
		mustWriteManifest(t, s, testManifest(id, kind, chain...))
	}
	return s, refs
}

// Corruption tests. The newest checkpoint that
// verifies is restored, and each skipped one says which file and what is
// wrong.
func TestStore_SelectRestore(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(t *testing.T, s *Store, refs []FileRef)
		want    uint64 // restored id, 0 for ErrNoCheckpoint
		skipped []uint64
		reason  string // in the first skip reason
	}{
		{"intact", func(*testing.T, *Store, []FileRef) {}, 3, nil, ""},
		{"truncated file", func(t *testing.T, s *Store, refs []FileRef) {
			if err := os.Truncate(s.path(refs[2].Name), refs[2].Size-10); err != nil {
				t.Fatal(err)
			}
		}, 2, []uint64{3}, refs3Name + ": truncated"},
		{"flipped byte", func(t *testing.T, s *Store, refs []FileRef) {
			b, _ := os.ReadFile(s.path(refs[2].Name))
			b[len(b)/2] ^= 1
			writeFile(t, s.path(refs[2].Name), b)
		}, 2, []uint64{3}, "checksum mismatch"},
		{"missing manifest: half-written checkpoint ignored", func(t *testing.T, s *Store, refs []FileRef) {
			os.Remove(s.path(manifestName(3)))
		}, 2, nil, ""},
		{"manifest references a missing file", func(t *testing.T, s *Store, refs []FileRef) {
			os.Remove(s.path(refs[2].Name))
		}, 2, []uint64{3}, ": missing"},
		{"garbage manifest", func(t *testing.T, s *Store, refs []FileRef) {
			writeFile(t, s.path(manifestName(3)), []byte("\x00not json"))
		}, 2, []uint64{3}, "decode manifest"},
		{"manifest under the wrong name", func(t *testing.T, s *Store, refs []FileRef) {
			os.Rename(s.path(manifestName(3)), s.path(manifestName(4)))
		}, 2, []uint64{4}, "holds checkpoint 3"},
		{"shared base damaged: every checkpoint skipped", func(t *testing.T, s *Store, refs []FileRef) {
			b, _ := os.ReadFile(s.path(refs[0].Name))
			b[30] ^= 0xff
			writeFile(t, s.path(refs[0].Name), b)
		}, 0, []uint64{3, 2, 1}, "checksum mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, refs := threeCheckpoints(t)
			tt.damage(t, s, refs)
			sel, err := s.SelectRestore("")
			if tt.want == 0 {
				if !errors.Is(err, ErrNoCheckpoint) {
					t.Fatalf("err = %v, want ErrNoCheckpoint", err)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if sel.Manifest.ID != tt.want || len(sel.Files) != int(tt.want) {
				t.Fatalf("restored %d with %d files, want %d", sel.Manifest.ID, len(sel.Files), tt.want)
			}
			var skipped []uint64
			for _, sk := range sel.Skipped {
				skipped = append(skipped, sk.ID)
				if !IsCorruption(sk.Reason) {
					t.Errorf("%v: not a corruption", sk)
				}
			}
			if !equalIDs(skipped, tt.skipped) {
				t.Fatalf("skipped %v, want %v", sel.Skipped, tt.skipped)
			}
			if tt.reason != "" {
				reason := strings.ReplaceAll(sel.Skipped[0].String(), refs[2].Name, refs3Name)
				if !strings.Contains(reason, tt.reason) {
					t.Errorf("reason %q does not contain %q", reason, tt.reason)
				}
				t.Log(sel.Skipped[0])
			}
			if sel.NewestID < tt.want || sel.NewestID < 2 {
				t.Errorf("NewestID = %d", sel.NewestID)
			}
		})
	}
}

const refs3Name = "<file of 3>"

func equalIDs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStore_SelectRestoreFrom(t *testing.T) {
	s, refs := threeCheckpoints(t)
	tests := []struct {
		name    string
		from    string
		want    uint64
		wantErr bool
	}{
		{"id", "2", 2, false},
		{"missing id", "9", 0, true},
		{"manifest path", filepath.Join(s.Dir(), manifestName(1)), 1, false},
		{"store dir", s.Dir(), 3, false},
		{"not a manifest name", filepath.Join(s.Dir(), "x.json"), 0, true},
		{"empty dir", t.TempDir(), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := s.SelectRestore(tt.from)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("restored %d", sel.Manifest.ID)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sel.Manifest.ID != tt.want || sel.NewestID != 3 {
				t.Errorf("restored %d (newest %d), want %d", sel.Manifest.ID, sel.NewestID, tt.want)
			}
		})
	}
	// An explicitly chosen checkpoint that does not verify is an error, not
	// a fallback.
	os.Truncate(s.path(refs[1].Name), 10)
	if _, err := s.SelectRestore("2"); !IsCorruption(err) {
		t.Errorf("--from 2 with a truncated file: err = %v", err)
	}
}

// An I/O error is not a corruption: restore stops instead of skipping to an
// older checkpoint.
func TestStore_SelectRestoreStopsOnIOError(t *testing.T) {
	s, refs := threeCheckpoints(t)
	bad := &Store{fs: failOpenFS{FS: vfs.Default, name: filepath.Base(refs[2].Name)}, dir: s.Dir()}
	_, err := bad.SelectRestore("")
	if !errors.Is(err, errInjected) || IsCorruption(err) || errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("err = %v, want the I/O error", err)
	}
}
