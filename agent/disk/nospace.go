package disk

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// IsNoSpace reports whether err says the file system is full: ENOSPC, or a
// quota (EDQUOT).
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// failedPath returns the file or directory a failed write names in err:
// the path of an *fs.PathError (what os.File, os.Remove and the vfs return,
// and what the state store wraps bbolt's bare errnos in), else the target
// of an *os.LinkError (a rename), else "". Eddy's writes outside data_dir
// (file sinks, dead letters) go through os files, so an error that names
// no path comes from data_dir.
func failedPath(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.New
	}
	return ""
}

// freeNear returns the free bytes of the file system that holds path, or
// its nearest existing parent (a part file may be gone by the time its
// failure is looked at).
func freeNear(path string) (int64, error) {
	for {
		free, err := FreeBytes(path)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return free, err
		}
		parent := filepath.Dir(path)
		if parent == path {
			return free, err
		}
		path = parent
	}
}

// minFreed is how much free space must come back, at least, before what
// failed for lack of space is tried again: less would fail again at once.
const minFreed = 1 << 20

// fullBelow of free space makes a file system count as full when a write
// on it fails with ENOSPC or EDQUOT: above the 16 MiB bbolt grows its file
// by (the largest piece a pipeline writes at once), with room to spare. A
// file system with more free space had room for the write; what refused
// it is something polling free space would never see end — a quota
// (statfs does not show quotas), inodes or metadata running out — so the
// failure goes to the restart strategy like any other.
const fullBelow = 64 << 20

// Shortage is a write that failed for lack of space on a file system that
// is full. The zero value is no shortage.
type Shortage struct {
	path string // the file or directory the error named (or data_dir)
	free int64  // what that file system had free then
}

// ShortageOf tells whether err, from a pipeline's write, is a full file
// system to wait out, and which: a write that failed with ENOSPC or EDQUOT
// on a regular file or directory whose file system has less than 64 MiB
// free. A device (/dev/full fails every write with ENOSPC), a pipe or a
// socket is never full; nor is a file system whose free space cannot be
// read (so never on systems other than Linux). dataDir stands for an error
// that names no path. It looks at the file system now: call it before
// anything removes files the failure left.
func ShortageOf(err error, dataDir string) (Shortage, bool) {
	if !IsNoSpace(err) {
		return Shortage{}, false
	}
	path := failedPath(err)
	if path == "" {
		path = dataDir
	}
	if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		return Shortage{}, false
	}
	free, serr := freeNear(path)
	if serr != nil || free >= fullBelow {
		return Shortage{}, false
	}
	return Shortage{path: path, free: free}, true
}

// waitForFreeSpace polls the file system of path (or its nearest existing
// parent) once a second until at least want bytes are free, and returns
// nil then, or ctx's error once ctx ends.
func waitForFreeSpace(ctx context.Context, path string, want int64) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if free, err := freeNear(path); err == nil && free >= want {
				return nil
			}
		}
	}
}
