package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"sync"
)

// ErrPowerCut is what every operation of a CutFS returns once its power is
// cut.
var ErrPowerCut = errors.New("vfs: power cut")

// CutOptions configure a CutFS.
type CutOptions struct {
	// At is the mutating operation (counted from 1: a write, truncate,
	// file or directory sync, create, rename, remove, mkdir or lock)
	// during which the power fails. 0: only Cut cuts it.
	At int
	// Rand, if set, decides what the operation in flight leaves: a write
	// lands a random prefix of its bytes (none to all), any other
	// operation lands whole or not at all, with probability one half;
	// and the image is taken with CrashOptions{Rand: Rand} (torn
	// writeback). Nil: the operation in flight does not land and the
	// image is strictly the durable state.
	Rand *rand.Rand
	// BreakSyncDir and BreakSync, if set, make SyncDir of the directories
	// and File.Sync of the files (by the name they were opened with) they
	// accept do nothing and report success: the fsync discipline broken on
	// purpose, for tests that show a checker notices.
	BreakSyncDir, BreakSync func(name string) bool
}

// CutFS runs a device on a MemFS until its power is cut: during the At-th
// mutating operation, or at Cut. From then on every operation, reads
// included, fails with ErrPowerCut, as the dead process would see nothing
// more, and Image is what the disk holds. The MemFS itself is left as it
// was at the cut (the in-flight operation's share applied). Safe for
// concurrent use; operations are serialised.
type CutFS struct {
	mu    sync.Mutex
	mem   *MemFS
	opts  CutOptions
	ops   int
	image *MemFS
}

var _ FS = (*CutFS)(nil)

// NewCutFS returns a CutFS on disk.
func NewCutFS(disk *MemFS, opts CutOptions) *CutFS {
	return &CutFS{mem: disk, opts: opts}
}

// Arm sets the power to fail during the at-th mutating operation from now
// (0: not before Cut). It does nothing once the power is cut.
func (c *CutFS) Arm(at int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops, c.opts.At = 0, at
}

// Cut cuts the power now, if it is still on.
func (c *CutFS) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cutLocked()
}

func (c *CutFS) cutLocked() {
	if c.image == nil {
		c.image = c.mem.CrashClone(CrashOptions{Rand: c.opts.Rand})
	}
}

// Image returns what the disk held when the power was cut, as a new MemFS
// to run the next boot on; nil while the power is on.
func (c *CutFS) Image() *MemFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.image
}

// mutate runs one mutating operation: do, or at the armed count the share
// of it that lands (partial, when not nil, lands part of it; else do lands
// whole or not at all), then the cut.
func (c *CutFS) mutate(do func() error, partial func(rng *rand.Rand)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.image != nil {
		return ErrPowerCut
	}
	if c.opts.At == 0 {
		return do()
	}
	if c.ops++; c.ops < c.opts.At {
		return do()
	}
	if rng := c.opts.Rand; rng != nil {
		switch {
		case partial != nil:
			partial(rng)
		case rng.IntN(2) == 0:
			do()
		}
	}
	c.cutLocked()
	return ErrPowerCut
}

// read runs an operation that changes nothing.
func (c *CutFS) read(do func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.image != nil {
		return ErrPowerCut
	}
	return do()
}

func (c *CutFS) wrap(f File) File { return &cutFile{File: f, fs: c} }

func (c *CutFS) Create(name string) (File, error) {
	return c.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
}

func (c *CutFS) Open(name string) (File, error) { return c.OpenFile(name, os.O_RDONLY) }

func (c *CutFS) OpenFile(name string, flag int) (File, error) {
	var f File
	do := func() (err error) {
		f, err = c.mem.OpenFile(name, flag)
		return err
	}
	var err error
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		err = c.mutate(do, nil)
	} else {
		err = c.read(do)
	}
	if err != nil {
		return nil, err
	}
	return c.wrap(f), nil
}

func (c *CutFS) Rename(oldname, newname string) error {
	return c.mutate(func() error { return c.mem.Rename(oldname, newname) }, nil)
}

func (c *CutFS) Remove(name string) error {
	return c.mutate(func() error { return c.mem.Remove(name) }, nil)
}

func (c *CutFS) MkdirAll(dir string, perm fs.FileMode) error {
	return c.mutate(func() error { return c.mem.MkdirAll(dir, perm) }, nil)
}

func (c *CutFS) List(dir string) (names []string, err error) {
	err = c.read(func() error {
		names, err = c.mem.List(dir)
		return err
	})
	return names, err
}

func (c *CutFS) Stat(name string) (fi fs.FileInfo, err error) {
	err = c.read(func() error {
		fi, err = c.mem.Stat(name)
		return err
	})
	return fi, err
}

func (c *CutFS) SyncDir(dir string) error {
	return c.mutate(func() error {
		if c.opts.BreakSyncDir != nil && c.opts.BreakSyncDir(dir) {
			return nil
		}
		return c.mem.SyncDir(dir)
	}, nil)
}

func (c *CutFS) Lock(name string) (l io.Closer, err error) {
	err = c.mutate(func() error {
		l, err = c.mem.Lock(name)
		return err
	}, nil)
	return l, err
}

// cutFile is a File of a CutFS.
type cutFile struct {
	File
	fs *CutFS
}

func (f *cutFile) Read(b []byte) (n int, err error) {
	err = f.fs.read(func() error {
		n, err = f.File.Read(b)
		return err
	})
	return n, err
}

func (f *cutFile) ReadAt(b []byte, off int64) (n int, err error) {
	err = f.fs.read(func() error {
		n, err = f.File.ReadAt(b, off)
		return err
	})
	return n, err
}

func (f *cutFile) Stat() (fi fs.FileInfo, err error) {
	err = f.fs.read(func() error {
		fi, err = f.File.Stat()
		return err
	})
	return fi, err
}

func (f *cutFile) Write(b []byte) (n int, err error) {
	err = f.fs.mutate(func() error {
		n, err = f.File.Write(b)
		return err
	}, func(rng *rand.Rand) { f.File.Write(b[:rng.IntN(len(b)+1)]) })
	return n, err
}

func (f *cutFile) WriteAt(b []byte, off int64) (n int, err error) {
	err = f.fs.mutate(func() error {
		n, err = f.File.WriteAt(b, off)
		return err
	}, func(rng *rand.Rand) { f.File.WriteAt(b[:rng.IntN(len(b)+1)], off) })
	return n, err
}

func (f *cutFile) Truncate(size int64) error {
	return f.fs.mutate(func() error { return f.File.Truncate(size) }, nil)
}

func (f *cutFile) Sync() error {
	return f.fs.mutate(func() error {
		if f.fs.opts.BreakSync != nil && f.fs.opts.BreakSync(f.Name()) {
			return nil
		}
		return f.File.Sync()
	}, nil)
}
