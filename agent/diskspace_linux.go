package agent

import "syscall"

// freeBytes returns the bytes an unprivileged process may still write on
// the file system that holds path.
func freeBytes(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
