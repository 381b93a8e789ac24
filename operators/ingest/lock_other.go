//go:build !unix

package ingest

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDir opens dir/LOCK; this platform has no advisory lock, so two
// processes on one log are not prevented.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ingest: open lock file: %w", err)
	}
	return f, nil
}
