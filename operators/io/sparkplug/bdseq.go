package sparkplug

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/eddy-edge/eddy/state/vfs"
)

// NextBdSeq returns the bdSeq for the connection about to be made and
// durably stores its successor (mod 256) in the file at path first, so a
// crash after the CONNECT never lets two connections share a bdSeq: a host
// would take the older connection's will for the newer session's death.
// An absent file starts at 0. The file holds the next value as decimal
// text; it is replaced by a synced temporary file and a rename.
func NextBdSeq(fsys vfs.FS, path string) (uint64, error) {
	cur := uint64(0)
	f, err := fsys.Open(path)
	switch {
	case err == nil:
		b, rerr := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		if rerr != nil {
			return 0, rerr
		}
		v, perr := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 8)
		if perr != nil {
			return 0, errors.New("sparkplug: " + path + ": not a bdSeq (0–255): " + strconv.Quote(string(b)))
		}
		cur = v
	case errors.Is(err, fs.ErrNotExist):
	default:
		return 0, err
	}
	tmp := path + ".tmp"
	w, err := fsys.Create(tmp)
	if err != nil {
		return 0, err
	}
	_, err = w.Write(strconv.AppendUint(nil, (cur+1)%256, 10))
	if err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err == nil {
		err = fsys.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		return 0, err
	}
	return cur, nil
}
