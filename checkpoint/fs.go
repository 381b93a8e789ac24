package checkpoint

import (
	"io"
	"os"
	"path/filepath"
)

// FS is the file-system seam of the Store (as pebble's vfs.FS): DiskFS in
// production, a recording or failing wrapper in tests that pins the order of
// creates, syncs and renames. Names are slash-separated paths as the Store
// builds them (filepath.Join of its directory and a relative name).
type FS interface {
	// Create creates or truncates name for writing.
	Create(name string) (File, error)
	// Open opens name for reading. A missing file gives an error matching
	// fs.ErrNotExist.
	Open(name string) (File, error)
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// Remove removes a file. A missing file gives an error matching
	// fs.ErrNotExist.
	Remove(name string) error
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string) error
	// List returns the base names of the entries of dir, in any order.
	List(dir string) ([]string, error)
	// SyncDir makes the creations, renames and removals in dir durable.
	SyncDir(dir string) error
	// Size returns the size of a file; fs.ErrNotExist if it is missing.
	Size(name string) (int64, error)
}

// File is an open file. Write and Sync must not be called concurrently.
type File interface {
	io.Reader
	io.Writer
	io.Closer
	// Sync makes the file's contents durable (fsync).
	Sync() error
}

// DiskFS is the FS of the operating system.
type DiskFS struct{}

var _ FS = DiskFS{}

func (DiskFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (DiskFS) Open(name string) (File, error)       { return os.Open(name) }
func (DiskFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (DiskFS) Remove(name string) error             { return os.Remove(name) }
func (DiskFS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o755) }

func (DiskFS) List(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	return names, err
}

func (DiskFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

func (DiskFS) Size(name string) (int64, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
