package state

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"
)

// TestBolt_WriteErrNamesTheWorkingFile: a failed write of the working file
// names it, also when bbolt returned a bare errno (its fdatasync does), so
// a caller waiting out a full disk knows which file system to poll.
func TestBolt_WriteErrNamesTheWorkingFile(t *testing.T) {
	s := &Bolt{path: "/data/state/p.db"}
	for _, cause := range []error{syscall.ENOSPC, &fs.PathError{Op: "write", Path: "/data/state/p.db", Err: syscall.ENOSPC}} {
		err := s.writeErr("commit", cause)
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != s.path || !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("writeErr(%v) = %v: does not name %s with ENOSPC", cause, err, s.path)
		}
	}
}
