//go:build linux

// Package tmpfs mounts small file systems for the tests that fill a disk:
// a tmpfs of a given size, which runs out of space (ENOSPC) like a full SD
// card. Mounting needs root with CAP_SYS_ADMIN; where it is not allowed the
// test is skipped with a message saying so (CI runs them as root).
package tmpfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size (mount's size= option, e.g. "1m") on dir,
// creating dir, with mode 0750 (the agent refuses a data_dir every user may
// write), and unmounts it when the test ends; it skips the test where
// mounting is not allowed.
func Mount(tb testing.TB, dir, size string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0750", "tmpfs", dir).CombinedOutput(); err != nil {
		tb.Skipf("cannot mount a tmpfs to fill (%v: %s): a full disk is tested as root with CAP_SYS_ADMIN", err, strings.TrimSpace(string(out)))
	}
	tb.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}

// Fill writes a file into dir until its file system has less than leave
// bytes free (or a write fails: it is full), and returns the file's path:
// removing it frees the space again.
func Fill(tb testing.TB, dir string, leave int64) string {
	tb.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			tb.Fatal(err)
		}
		free := int64(st.Bavail) * int64(st.Bsize)
		if free < leave {
			return path
		}
		if _, err := f.Write(block[:min(int64(len(block)), free-leave/2)]); err != nil {
			return path // full
		}
	}
}
