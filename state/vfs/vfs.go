package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// FS is the file system Eddy writes durable files through (as pebble's
// vfs.FS). Names are paths as filepath.Join builds them. Errors for a
// missing file or directory match fs.ErrNotExist; for an existing one where
// O_EXCL forbids it, fs.ErrExist.
type FS interface {
	// Create creates or truncates name, open for reading and writing.
	Create(name string) (File, error)
	// Open opens name for reading.
	Open(name string) (File, error)
	// OpenFile opens name with os.OpenFile's flags (O_RDONLY, O_WRONLY,
	// O_RDWR, O_CREATE, O_EXCL, O_TRUNC, O_APPEND); a created file has
	// mode 0o644.
	OpenFile(name string, flag int) (File, error)
	// Rename atomically replaces newname with oldname. Only the directory
	// entries change: see the package documentation for when they are
	// durable.
	Rename(oldname, newname string) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// MkdirAll creates dir and its missing parents with mode perm (less
	// the umask). The new entries are not durable yet: MkdirAllSynced.
	MkdirAll(dir string, perm fs.FileMode) error
	// List returns the base names of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes name.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the creations, renames and removals in dir durable
	// (an fsync of the directory).
	SyncDir(dir string) error
	// Lock takes an exclusive lock on the file name, creating it, so two
	// processes never write one log. It fails at once if another holder
	// has it. Close releases it; so does the holder's death.
	Lock(name string) (io.Closer, error)
}

// File is an open file. *os.File implements it. Write and Sync must not be
// called concurrently with each other on one File; Sync may run while
// another goroutine closes it (it then returns an error matching
// fs.ErrClosed).
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Sync makes the file's contents durable (fsync).
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Stat describes the open file.
	Stat() (fs.FileInfo, error)
	// Name is the name the file was opened with.
	Name() string
}

// Default is the operating system's file system. Its Files are the
// *os.File themselves, so a write costs what os.File.Write costs.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (osFS) Open(name string) (File, error) { return os.Open(name) }

func (osFS) OpenFile(name string, flag int) (File, error) { return os.OpenFile(name, flag, 0o644) }

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	return names, err
}

func (osFS) SyncDir(dir string) error {
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

func (osFS) Lock(name string) (io.Closer, error) { return lockFile(name) }

// MkdirAllSynced creates dir and its missing parents (mode perm) and makes
// them durable: it syncs the parent of every directory it created, deepest
// first, so no new directory's entry outlives its parent's. An existing dir
// costs one Stat.
func MkdirAllSynced(fsys FS, dir string, perm fs.FileMode) error {
	dir = filepath.Clean(dir)
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		_, err := fsys.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range created {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// RemoveAll removes name and, if it is a directory, everything under it,
// as os.RemoveAll does but through fsys. A missing name is no error. It
// removes each entry before looking inside it, so a symbolic link is
// removed itself and never followed. The removals are not durable until
// the caller syncs name's parent directory (SyncDir).
func RemoveAll(fsys FS, name string) error {
	err := fsys.Remove(name)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// Not removable as it is: a directory with entries, or a real error
	// that List reports too.
	entries, lerr := fsys.List(name)
	if lerr != nil {
		return err
	}
	for _, e := range entries {
		if err := RemoveAll(fsys, filepath.Join(name, e)); err != nil {
			return err
		}
	}
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
