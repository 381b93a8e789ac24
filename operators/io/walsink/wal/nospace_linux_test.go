//go:build linux

package wal

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

// TestLog_ShortWriteOnFullDiskIsCut fills a small file system (a tmpfs the
// test mounts) with frames until Write fails with ENOSPC: the partly
// written frame is cut, so once space is freed the next Write appends whole
// frames and a reopen reads every frame that was written, in order, with
// no corruption in between.
func TestLog_ShortWriteOnFullDiskIsCut(t *testing.T) {
	root := t.TempDir()
	tmpfs.Mount(t, root, "1m")
	dir := filepath.Join(root, "wal")
	l, _, err := collect(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Rotate(frames("h")); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(root, "filler")
	if err := os.WriteFile(filler, make([]byte, 900<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("x", 3000) // frames that straddle page boundaries
	var want []string
	want = append(want, "1:h")
	for i := 0; ; i++ {
		p := fmt.Sprintf("%d-%s", i, payload)
		err := l.Write(frames(p))
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("write %d: %v, want ENOSPC", i, err)
			}
			break
		}
		want = append(want, "1:"+p)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(frames("after")); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	want = append(want, "1:after")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, got, err := collect(t, dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer l.Close()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reopen read %d frames, want %d", len(got), len(want))
	}
}
