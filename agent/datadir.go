package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"

	"github.com/eddy-edge/eddy/agent/offsite"
	"github.com/eddy-edge/eddy/state/vfs"
)

// dataDirMode is the mode of a data_dir that checkDataDir creates: the
// agent's user reads and writes, its group may read (backups, log
// shippers), nobody else gets in.
const dataDirMode = 0o750

// checkDataDir makes sure the data_dir at path exists and that no other user
// can write it, since whoever can write it can plant a checkpoint the agent
// restores, swap its state or point a file at a symlink it then writes
// through. Run refuses to start when it returns an error.
//
// A missing path is created with mode 0o750 (parents too, the same mode,
// both less the umask), durably: each new directory's parent is fsynced
// (vfs.MkdirAllSynced), so a power cut cannot take the data_dir away from
// under the files written into it. An existing directory (symlinks are followed: the
// target is checked) is refused when:
//   - other users may write it (mode & 0o002), sticky bit or not: in a
//     sticky directory others can still create the names the agent is
//     about to use;
//   - its group may write it (mode & 0o020) and that group is not the
//     agent's effective group: group members are other users. With a
//     user-private group (Debian's default, systemd's DynamicUser) the
//     agent's own group holds only the agent, so g+w is accepted there;
//   - another user owns it (neither the agent's effective user nor root):
//     an owner can change the mode at any time.
//
// Only the directory itself is checked, not its parents or the files inside
// it (the agent creates those itself with modes no wider than 0o755). Where
// the platform reports no owner (Windows), only the mode bits are checked.
// Errors name the path and the command that fixes it.
func checkDataDir(path string) error {
	if path == "" {
		return errors.New("agent: data_dir is empty")
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := vfs.MkdirAllSynced(vfs.Default, path, dataDirMode); err != nil {
			return fmt.Errorf("agent: create data_dir: %w", err)
		}
		fi, err = os.Stat(path)
	}
	if err != nil {
		return fmt.Errorf("agent: data_dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("agent: data_dir %s is not a directory", path)
	}
	owner, ok := fileOwner(fi)
	return dataDirProblem(path, fi.Mode(), owner, ok, ids{uid: os.Geteuid(), gid: os.Getegid()})
}

// ids are a user and a group id: of the agent's process or of a file's owner.
type ids struct{ uid, gid int }

// dataDirProblem applies checkDataDir's rules to a directory's mode and
// owner (known says whether the platform reported one), for the agent
// running as self. It returns nil when the directory is acceptable.
func dataDirProblem(path string, mode fs.FileMode, owner ids, known bool, self ids) error {
	perm := mode.Perm()
	if perm&0o002 != 0 {
		return fmt.Errorf("agent: data_dir %s is writable by every user (mode %04o), who could replace its checkpoints or state; fix: chmod o-w %s",
			path, perm, path)
	}
	if !known {
		return nil
	}
	if owner.uid != self.uid && owner.uid != 0 {
		return fmt.Errorf("agent: data_dir %s is owned by uid %d, not by the agent's uid %d, and its owner can change what it holds; fix: chown %d %s",
			path, owner.uid, self.uid, self.uid, path)
	}
	if perm&0o020 != 0 && owner.gid != self.gid {
		return fmt.Errorf("agent: data_dir %s is writable by its group (gid %d, mode %04o), whose members could replace its checkpoints or state; fix: chmod g-w %s",
			path, owner.gid, perm, path)
	}
	return nil
}

// fileOwner returns the uid and gid of fi where the platform has them. It
// reads the Uid and Gid fields by name because syscall.Stat_t does not exist
// on every platform Eddy builds for.
func fileOwner(fi fs.FileInfo) (ids, bool) {
	v := reflect.Indirect(reflect.ValueOf(fi.Sys()))
	if v.Kind() != reflect.Struct {
		return ids{}, false
	}
	uid, gid := v.FieldByName("Uid"), v.FieldByName("Gid")
	if !uid.IsValid() || !gid.IsValid() || !uid.CanUint() || !gid.CanUint() {
		return ids{}, false
	}
	return ids{uid: int(uid.Uint()), gid: int(gid.Uint())}, true
}

// openDataDir is Run's first use of data_dir: checkDataDir, then the
// removal of a staging directory an interrupted restore left (one log
// line when there was one), so its partial files never outlive a start.
func openDataDir(dir string, log *slog.Logger) error {
	if err := checkDataDir(dir); err != nil {
		return err
	}
	removed, err := offsite.RemoveStaging(vfs.Default, dir)
	if err != nil {
		return fmt.Errorf("agent: remove an interrupted restore's %s: %w", filepath.Join(dir, offsite.StagingDir), err)
	}
	if removed {
		log.Info("removed an interrupted restore's staging directory", "path", filepath.Join(dir, offsite.StagingDir))
	}
	return nil
}
