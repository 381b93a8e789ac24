package identity

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state/vfs"
)

// DeviceIDFile holds, in data_dir, the device id the directory's data was
// made under: client ids, topics, output ids and the S3 prefix follow from
// it, so a data_dir keeps its id across upgrades and config edits unless
// the operator says otherwise.
const DeviceIDFile = "device_id"

// deviceIDFacts is what settles the device id of a start.
type deviceIDFacts struct {
	configured string // the configuration's device id (set or default)
	stored     string // the data_dir's recorded id; "" if none
	allowNew   bool   // --allow-new-device-id
}

// errDeviceIDChanged refuses a start whose device id differs from the
// data_dir's.
var errDeviceIDChanged = errors.New("agent: the device id changed")

// decideDeviceID returns the id to run under and whether to record it:
//   - with no record, the configured id (set or default), recorded;
//   - a recorded id is kept when the configuration gives it;
//   - any other recorded id is an error (a data_dir copied to another
//     device, a clone that regenerated its machine id, an edited
//     device_id), unless allowNew, which records the configured one.
func decideDeviceID(f deviceIDFacts) (id string, record bool, err error) {
	switch {
	case f.stored == "":
		return f.configured, true, nil
	case f.stored == f.configured:
		return f.stored, false, nil
	case f.allowNew:
		return f.configured, true, nil
	}
	return "", false, fmt.Errorf("%w: data_dir holds the data of device %q, the configuration gives %q; to keep the data's identity (client ids, S3 prefix) set agent { device_id = %q }, or start once with --allow-new-device-id to adopt %q (a new S3 prefix)",
		errDeviceIDChanged, f.stored, f.configured, f.stored, f.configured)
}

// SettleDeviceID decides the device id for cfg's data_dir (decideDeviceID),
// records it there when write is set, and sets it as cfg.Agent.DeviceID.
func SettleDeviceID(cfg *config.Config, allowNew, write bool) error {
	dir := cfg.Agent.DataDir
	f := deviceIDFacts{configured: cfg.Agent.DeviceID, allowNew: allowNew}
	b, err := os.ReadFile(filepath.Join(dir, DeviceIDFile))
	switch {
	case err == nil:
		f.stored = strings.TrimSpace(string(b))
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("agent: read the data_dir's device id: %w", err)
	}
	id, record, err := decideDeviceID(f)
	if err != nil {
		return err
	}
	if record && write {
		if err := writeFileSynced(filepath.Join(dir, DeviceIDFile), []byte(id+"\n")); err != nil {
			return fmt.Errorf("agent: record the device id in data_dir: %w", err)
		}
	}
	cfg.Agent.DeviceID = id
	return nil
}

// writeFileSynced writes data to path through a synced temporary file and
// a rename, so a crash leaves the old content or the new, never a part.
func writeFileSynced(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := vfs.Default.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := vfs.Default.Rename(tmp, path); err != nil {
		return err
	}
	return vfs.Default.SyncDir(filepath.Dir(path))
}

// DeviceID returns the device id the agent of the configuration at cfgPath
// runs under (`eddy id -c`, `eddy probe`), without recording anything.
func DeviceID(cfgPath string) (string, error) {
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		return "", errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	if err := SettleDeviceID(cfg, false, false); err != nil {
		return "", err
	}
	return cfg.Agent.DeviceID, nil
}
