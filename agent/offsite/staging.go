package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/eddy-edge/eddy/state/vfs"
)

// restoreStagingDir is the directory in data_dir where `eddy restore --from
// s3://…` stages its downloads until every checksum verified.
const restoreStagingDir = "restore.tmp"

// removeRestoreStaging removes a staging directory an interrupted restore
// (crash, power cut) left in dataDir, with everything in it, and syncs
// dataDir so the removal is durable. Nothing in it is referenced: a
// restore moves files into the checkpoint store before it writes the
// manifest that names them. It reports whether there was one.
func removeRestoreStaging(fsys vfs.FS, dataDir string) (bool, error) {
	staging := filepath.Join(dataDir, restoreStagingDir)
	if _, err := fsys.Stat(staging); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := vfs.RemoveAll(fsys, staging); err != nil {
		return true, err
	}
	return true, fsys.SyncDir(dataDir)
}

// openDataDir is Run's first use of data_dir: checkDataDir, then the
// removal of a staging directory an interrupted restore left (one log
// line when there was one), so its partial files never outlive a start.
func openDataDir(dir string, log *slog.Logger) error {
	if err := checkDataDir(dir); err != nil {
		return err
	}
	removed, err := removeRestoreStaging(vfs.Default, dir)
	if err != nil {
		return fmt.Errorf("agent: remove an interrupted restore's %s: %w", filepath.Join(dir, restoreStagingDir), err)
	}
	if removed {
		log.Info("removed an interrupted restore's staging directory", "path", filepath.Join(dir, restoreStagingDir))
	}
	return nil
}
