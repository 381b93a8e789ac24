//go:build linux

package ingest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/eddy-edge/eddy/scripts/tmpfs"
)

// TestAppend_NoSpaceUndoesTheBatch fills a small file system (a tmpfs the
// test mounts) until Append fails: the failure is ErrNoSpace, not a sticky
// one; nothing of the failed batch is readable or survives a reopen; and
// once space is freed the same log appends again at the next offset.
func TestAppend_NoSpaceUndoesTheBatch(t *testing.T) {
	root := t.TempDir()
	tmpfs.Mount(t, root, "1m")
	dir := filepath.Join(root, "log")
	// One segment larger than the file system: the batch that fills it
	// does not roll.
	opts := Options{SegmentBytes: 8 << 20, MaxDiskBytes: 64 << 20}
	l := mustOpen(t, dir, opts)
	filler := filepath.Join(root, "filler")
	if err := os.WriteFile(filler, make([]byte, 640<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	for range 10000 {
		next := l.LastOffset() + 1
		b := make([]Entry, 50)
		for i := range b {
			b[i] = testEntry(next + uint64(i))
		}
		if _, _, err = l.Append(b); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Append on a full file system: %v, want ErrNoSpace", err)
	}
	acked := l.LastOffset()
	if n := readAll(t, l, 0); uint64(n) != acked {
		t.Fatalf("read %d entries, want the %d acknowledged", n, acked)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, 100, 50)
	if n := readAll(t, l, 0); uint64(n) != acked+100 {
		t.Fatalf("after space freed: read %d entries, want %d", n, acked+100)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, opts)
	defer l.Close()
	if rec := l.Recovery(); rec.CutBytes != 0 {
		t.Errorf("reopen cut %d torn bytes: the failed batch left some behind", rec.CutBytes)
	}
	if n := readAll(t, l, 0); uint64(n) != acked+100 {
		t.Fatalf("after reopen: read %d entries, want %d", n, acked+100)
	}
}
