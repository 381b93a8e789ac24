package checkpoint

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/eddy-edge/eddy/state/vfs"
)

var errInjected = errors.New("injected failure")

// recordingFS wraps vfs.Default, logs every mutating operation with paths
// relative to root (as pebble's testdata/checkpoint does), and fails the
// failAt-th one (1-based; 0 never).
type recordingFS struct {
	vfs.FS
	root   string
	mu     sync.Mutex
	ops    []string
	failAt int
}

func (r *recordingFS) op(format string, args ...any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, a := range args {
		if s, ok := a.(string); ok {
			if rel, err := filepath.Rel(r.root, s); err == nil {
				args[i] = filepath.ToSlash(rel)
			}
		}
	}
	r.ops = append(r.ops, fmt.Sprintf(format, args...))
	if len(r.ops) == r.failAt {
		return errInjected
	}
	return nil
}

func (r *recordingFS) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.ops, "\n")
}

func (r *recordingFS) reset() { r.mu.Lock(); r.ops = nil; r.mu.Unlock() }

func (r *recordingFS) Create(name string) (vfs.File, error) {
	if err := r.op("create %s", name); err != nil {
		return nil, err
	}
	f, err := r.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &recordingFile{File: f, fs: r, name: name}, nil
}

func (r *recordingFS) Rename(oldname, newname string) error {
	if err := r.op("rename %s %s", oldname, newname); err != nil {
		return err
	}
	return r.FS.Rename(oldname, newname)
}

func (r *recordingFS) Remove(name string) error {
	if err := r.op("remove %s", name); err != nil {
		return err
	}
	return r.FS.Remove(name)
}

func (r *recordingFS) SyncDir(dir string) error {
	if err := r.op("syncdir %s", dir); err != nil {
		return err
	}
	return r.FS.SyncDir(dir)
}

type recordingFile struct {
	vfs.File
	fs    *recordingFS
	name  string
	wrote bool
}

func (f *recordingFile) Write(p []byte) (int, error) {
	if !f.wrote { // log the first write only: the count depends on sizes
		f.wrote = true
		if err := f.fs.op("write %s", f.name); err != nil {
			return 0, err
		}
	}
	return f.File.Write(p)
}

func (f *recordingFile) Sync() error {
	if err := f.fs.op("sync %s", f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *recordingFile) Close() error {
	if err := f.fs.op("close %s", f.name); err != nil {
		f.File.Close()
		return err
	}
	return f.File.Close()
}

func newRecordingStore(t *testing.T) (*Store, *recordingFS) {
	t.Helper()
	dir := t.TempDir()
	rfs := &recordingFS{FS: vfs.Default, root: dir}
	s, err := OpenStore(rfs, dir)
	if err != nil {
		t.Fatal(err)
	}
	rfs.reset() // the operations of the writes that follow only
	return s, rfs
}
