package agent

import "syscall"

// fileSystemStats returns the size of the file system that holds path and
// what an unprivileged process may still write on it.
func fileSystemStats(path string) (fsStats, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return fsStats{}, err
	}
	return fsStats{size: int64(st.Blocks) * int64(st.Bsize), free: int64(st.Bavail) * int64(st.Bsize)}, nil
}
