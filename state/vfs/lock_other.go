//go:build !unix

package vfs

import (
	"io"
	"os"
)

// lockFile opens name; this platform has no advisory lock, so two processes
// are not prevented.
func lockFile(name string) (io.Closer, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
}
