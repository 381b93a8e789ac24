//go:build linux

package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/eddy-edge/eddy/scripts/tmpfs"
)

// TestBolt_RestoreNoSpaceRetries restores a state larger than what is free
// on a small file system (a tmpfs the test mounts): Restore fails with
// ENOSPC, leaving no partial working file, and the backend is not closed;
// once space is freed the same Restore succeeds and holds every entry.
func TestBolt_RestoreNoSpaceRetries(t *testing.T) {
	root := t.TempDir()
	tmpfs.Mount(t, root, "4m")
	be, err := OpenBolt(filepath.Join(root, "state.db"), BoltOptions{MaxSize: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	filler := filepath.Join(root, "filler")
	if err := os.WriteFile(filler, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	const bucket = "p/windows"
	if _, err := be.Bucket(bucket, KeyGroupPrefix); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	value := strings.Repeat("v", 200)
	for i := range 10_000 { // ~2.3 MiB of pages: more than the 1 MiB left
		want[bucket+"|"+string([]byte{0, byte(i % 8)})+fmt.Sprintf("k%09d", i)] = value
	}
	// Keys must come in order for the bulk load: group them by key group.
	ordered := func(fn func(b, k, v []byte, del bool) error) error {
		for g := range 8 {
			for i := g; i < 10_000; i += 8 {
				if err := fn([]byte(bucket), append([]byte{0, byte(g)}, fmt.Sprintf("k%09d", i)...), []byte(value), false); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err = be.Restore(ordered, RestoreOptions{})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Restore on a full file system: %v, want ENOSPC", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := be.Restore(ordered, RestoreOptions{}); err != nil {
		t.Fatalf("Restore after space was freed: %v", err)
	}
	if got := dump(t, be, []string{bucket}); !mapsEqual(got, want) {
		t.Fatalf("%d entries after the retried restore, want %d", len(got), len(want))
	}
}
