package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveAll removes a tree through each FS, leaves its siblings, and
// accepts a missing name.
func TestRemoveAll(t *testing.T) {
	for _, tc := range []struct {
		name string
		fsys func(t *testing.T) (FS, string)
	}{
		{"mem", func(*testing.T) (FS, string) { return NewCrashableMem(), "/d" }},
		{"os", func(t *testing.T) (FS, string) { return Default, t.TempDir() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := tc.fsys(t)
			tree := filepath.Join(dir, "tree")
			if err := fsys.MkdirAll(filepath.Join(tree, "a", "b"), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := fsys.MkdirAll(filepath.Join(tree, "empty"), 0o750); err != nil {
				t.Fatal(err)
			}
			write(t, fsys, filepath.Join(tree, "top"), "x", false)
			write(t, fsys, filepath.Join(tree, "a", "b", "partial"), "half", false)
			write(t, fsys, filepath.Join(dir, "sibling"), "keep", false)
			for range 2 { // the second time tree is missing
				if err := RemoveAll(fsys, tree); err != nil {
					t.Fatal(err)
				}
				if _, err := fsys.Stat(tree); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("Stat(tree) after RemoveAll: %v", err)
				}
			}
			if got := contents(t, fsys, filepath.Join(dir, "sibling")); got != "keep" {
				t.Fatalf("sibling = %q", got)
			}
		})
	}
}

// TestRemoveAll_SymlinkNotFollowed: a link to a directory outside the tree
// goes, the directory it points at stays whole.
func TestRemoveAll_SymlinkNotFollowed(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside")
	tree := filepath.Join(dir, "tree")
	for _, d := range []string{outside, tree} {
		if err := os.Mkdir(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	write(t, Default, filepath.Join(outside, "precious"), "keep", false)
	if err := os.Symlink(outside, filepath.Join(tree, "link")); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAll(Default, tree); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tree); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("tree after RemoveAll: %v", err)
	}
	if got := contents(t, Default, filepath.Join(outside, "precious")); got != "keep" {
		t.Fatalf("outside/precious = %q", got)
	}
}
