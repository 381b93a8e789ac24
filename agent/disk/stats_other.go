//go:build !linux

package disk

import "errors"

// FileSystemStats always fails here: without max_disk the disk budget is
// unknown, and a full disk ends when a write succeeds again (the next
// savepoint or restart), since no free space can be polled.
func FileSystemStats(string) (Stats, error) {
	return Stats{}, errors.New("file system size unknown on this system")
}
