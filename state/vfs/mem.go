package vfs

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory FS that remembers, beside the current state, what a
// power cut would leave (as pebble's vfs.NewCrashableMem). It is for tests;
// all methods are safe for concurrent use.
//
// The crash model, exactly:
//   - A file's durable contents are its contents at its last File.Sync (a
//     new file's: empty). Write, WriteAt and Truncate change only the
//     current contents.
//   - A directory's durable entries are its entries at its last SyncDir (a
//     directory made by MkdirAll, and the root of a new MemFS: none). The
//     root itself is always there. Create, Rename, Remove and MkdirAll
//     change only the current entries of the directories they touch. An
//     entry names a file (or directory) node, not a copy: a file renamed
//     and then synced has its durable contents under whichever name its
//     directory made durable. A rename between two directories is two
//     independent entry changes, so a cut may leave the file under both
//     names (as two files) or neither; Eddy renames within one directory,
//     except the S3 restore, which syncs the destination and discards the
//     source directory.
//   - CrashClone returns the file system after a power cut at this moment:
//     from the root down, each directory holds its durable entries, each
//     file its durable contents. What was removed but not synced comes back;
//     what was created or renamed but not synced is gone.
//
// Paths are cleaned and taken from one root; "a/b" and "/a/b" are the same.
type MemFS struct {
	mu    sync.Mutex
	root  *memNode
	locks map[*memNode]bool
}

type memNode struct {
	dir bool
	// directories
	entries, durableEntries map[string]*memNode
	// files
	data, durableData []byte
}

func newDir() *memNode {
	return &memNode{dir: true, entries: map[string]*memNode{}, durableEntries: map[string]*memNode{}}
}

// NewCrashableMem returns an empty MemFS.
func NewCrashableMem() *MemFS {
	return &MemFS{root: newDir(), locks: map[*memNode]bool{}}
}

var _ FS = (*MemFS)(nil)

// CrashOptions vary a crash within the model, as pebble's CrashCloneCfg does.
type CrashOptions struct {
	// Rand, if set, makes the power cut land in the middle of the writeback
	// the kernel was doing: each file whose current contents extend its
	// durable contents keeps a random prefix of the extension (a torn
	// write), and each directory, with probability one half, keeps its
	// current entries instead of its durable ones (the kernel had written
	// it back). Nil: strictly the durable state.
	Rand *rand.Rand
}

// CrashClone returns a new MemFS holding what a power cut at this moment
// leaves (see MemFS for the model). The receiver is unchanged and stays
// usable; files open on it are not open on the clone, and no lock is held
// on the clone.
func (m *MemFS) CrashClone(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &MemFS{root: crashCopy(m.root, opts.Rand), locks: map[*memNode]bool{}}
}

func crashCopy(n *memNode, rng *rand.Rand) *memNode {
	if !n.dir {
		data := n.durableData
		if rng != nil && len(n.data) > len(n.durableData) && string(n.data[:len(n.durableData)]) == string(n.durableData) {
			data = n.data[:len(n.durableData)+rng.IntN(len(n.data)-len(n.durableData)+1)]
		}
		return &memNode{data: slices.Clone(data), durableData: slices.Clone(data)}
	}
	from := n.durableEntries
	if rng != nil && rng.IntN(2) == 0 {
		from = n.entries
	}
	c := newDir()
	// In name order, so a seeded Rand gives the same crash every time.
	for _, name := range slices.Sorted(maps.Keys(from)) {
		cc := crashCopy(from[name], rng)
		c.entries[name], c.durableEntries[name] = cc, cc
	}
	return c
}

// split cleans name into its path elements below the root.
func split(name string) []string {
	c := filepath.ToSlash(filepath.Clean("/" + name))
	if c == "/" {
		return nil
	}
	return strings.Split(c[1:], "/")
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// walk returns the node at elems, or nil. m.mu is held.
func (m *MemFS) walk(elems []string) *memNode {
	n := m.root
	for _, e := range elems {
		if !n.dir {
			return nil
		}
		if n = n.entries[e]; n == nil {
			return nil
		}
	}
	return n
}

// parent returns the directory holding name and name's base, or an error
// naming op. m.mu is held.
func (m *MemFS) parent(op, name string) (*memNode, string, error) {
	elems := split(name)
	if len(elems) == 0 {
		return nil, "", pathErr(op, name, fs.ErrInvalid)
	}
	d := m.walk(elems[:len(elems)-1])
	if d == nil || !d.dir {
		return nil, "", pathErr(op, name, fs.ErrNotExist)
	}
	return d, elems[len(elems)-1], nil
}

func (m *MemFS) Create(name string) (File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
}

func (m *MemFS) Open(name string) (File, error) { return m.OpenFile(name, os.O_RDONLY) }

func (m *MemFS) OpenFile(name string, flag int) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("open", name)
	if err != nil {
		return nil, err
	}
	n := d.entries[base]
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case n == nil:
		n = &memNode{}
		d.entries[base] = n
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, pathErr("open", name, fs.ErrExist)
	case n.dir && flag&(os.O_WRONLY|os.O_RDWR) != 0:
		return nil, pathErr("open", name, errors.New("is a directory"))
	}
	if flag&os.O_TRUNC != 0 && !n.dir {
		n.data = n.data[:0:0]
	}
	return &memFile{fs: m, node: n, name: name, flag: flag}, nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, ob, err := m.parent("rename", oldname)
	if err != nil {
		return err
	}
	nd, nb, err := m.parent("rename", newname)
	if err != nil {
		return err
	}
	n := od.entries[ob]
	if n == nil {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	if t := nd.entries[nb]; t != nil && t.dir {
		return pathErr("rename", newname, errors.New("is a directory"))
	}
	delete(od.entries, ob)
	nd.entries[nb] = n
	return nil
}

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	n := d.entries[base]
	if n == nil {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.dir && len(n.entries) > 0 {
		return pathErr("remove", name, errors.New("directory not empty"))
	}
	delete(d.entries, base)
	return nil
}

func (m *MemFS) MkdirAll(dir string, _ fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, e := range split(dir) {
		c := n.entries[e]
		if c == nil {
			c = newDir()
			n.entries[e] = c
		} else if !c.dir {
			return pathErr("mkdir", dir, errors.New("not a directory"))
		}
		n = c
	}
	return nil
}

func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.walk(split(dir))
	if n == nil || !n.dir {
		return nil, pathErr("readdir", dir, fs.ErrNotExist)
	}
	names := make([]string, 0, len(n.entries))
	for name := range n.entries {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.walk(split(name))
	if n == nil {
		return nil, pathErr("stat", name, fs.ErrNotExist)
	}
	return memInfo{name: filepath.Base(name), size: int64(len(n.data)), dir: n.dir}, nil
}

func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.walk(split(dir))
	if n == nil || !n.dir {
		return pathErr("sync", dir, fs.ErrNotExist)
	}
	n.durableEntries = make(map[string]*memNode, len(n.entries))
	for name, c := range n.entries {
		n.durableEntries[name] = c
	}
	return nil
}

func (m *MemFS) Lock(name string) (io.Closer, error) {
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	mf := f.(*memFile)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks[mf.node] {
		return nil, pathErr("lock", name, errors.New("locked by another holder"))
	}
	m.locks[mf.node] = true
	return memLock{m, mf.node}, nil
}

type memLock struct {
	fs   *MemFS
	node *memNode
}

func (l memLock) Close() error {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	delete(l.fs.locks, l.node)
	return nil
}

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// memFile is an open file of a MemFS.
type memFile struct {
	fs     *MemFS
	node   *memNode
	name   string
	flag   int
	pos    int64
	closed bool
}

func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return pathErr(op, f.name, fs.ErrClosed)
	}
	if f.node.dir {
		return pathErr(op, f.name, errors.New("is a directory"))
	}
	if write && f.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return pathErr(op, f.name, errors.New("bad file descriptor"))
	}
	if !write && f.flag&os.O_WRONLY != 0 {
		return pathErr(op, f.name, errors.New("bad file descriptor"))
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	n, err := f.readAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	n, err := f.readAt(p, off)
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

func (f *memFile) readAt(p []byte, off int64) (int, error) {
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off >= int64(len(f.node.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	return copy(p, f.node.data[off:]), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.flag&os.O_APPEND != 0 {
		f.pos = int64(len(f.node.data))
	}
	n, err := f.writeAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.flag&os.O_APPEND != 0 {
		return 0, pathErr("writeat", f.name, errors.New("invalid use of WriteAt on file opened with O_APPEND"))
	}
	return f.writeAt(p, off)
}

func (f *memFile) writeAt(p []byte, off int64) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if end := off + int64(len(p)); end > int64(len(f.node.data)) {
		f.node.data = append(f.node.data, make([]byte, end-int64(len(f.node.data)))...)
	}
	return copy(f.node.data[off:], p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size <= int64(len(f.node.data)) {
		// A new array: the durable contents may share the old one.
		f.node.data = slices.Clone(f.node.data[:size])
	} else {
		f.node.data = append(f.node.data, make([]byte, size-int64(len(f.node.data)))...)
	}
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("sync", f.name, fs.ErrClosed)
	}
	f.node.durableData = slices.Clone(f.node.data)
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, pathErr("stat", f.name, fs.ErrClosed)
	}
	return memInfo{name: filepath.Base(f.name), size: int64(len(f.node.data)), dir: f.node.dir}, nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}
