//go:build unix

package vfs

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// lockFile takes an advisory flock on name; the kernel drops it when the
// process dies.
func lockFile(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return f, nil
}
