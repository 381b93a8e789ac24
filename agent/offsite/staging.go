package offsite

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/eddy-edge/eddy/state/vfs"
)

// StagingDir is the directory in data_dir where a fetch of an uploaded
// checkpoint (`eddy restore --from s3://…`, or a start that finds no local
// checkpoint that verifies) stages its downloads until every checksum
// verified.
const StagingDir = "restore.tmp"

// RemoveStaging removes a staging directory an interrupted restore
// (crash, power cut) left in dataDir, with everything in it, and syncs
// dataDir so the removal is durable. Nothing in it is referenced: a
// restore moves files into the checkpoint store before it writes the
// manifest that names them. It reports whether there was one.
func RemoveStaging(fsys vfs.FS, dataDir string) (bool, error) {
	staging := filepath.Join(dataDir, StagingDir)
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
