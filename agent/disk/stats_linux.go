package disk

import "syscall"

// FileSystemStats returns the size of the file system that holds path and
// what an unprivileged process may still write on it (statfs's available
// blocks, not its free ones: the blocks reserved for root are no room for
// Eddy).
func FileSystemStats(path string) (Stats, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return Stats{}, err
	}
	return Stats{Size: int64(st.Blocks) * int64(st.Bsize), Free: int64(st.Bavail) * int64(st.Bsize)}, nil
}
