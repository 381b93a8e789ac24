//go:build !linux

package agent

import "errors"

// fileSystemStats is not implemented here: without max_disk the disk
// budget is unknown, and a full disk ends when a write succeeds again (the
// next savepoint or restart).
func fileSystemStats(string) (fsStats, error) {
	return fsStats{}, errors.New("file system size unknown on this system")
}
