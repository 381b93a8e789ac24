package ingest

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/eddy-edge/eddy/state/vfs"
)

// noSpaceFS is a crashable in-memory file system on which the failAt-th
// change (counting file creations, writes, fsyncs and directory fsyncs;
// 0: none) fails with ENOSPC, as a disk that fills up at that moment: a
// write keeps the first half of its bytes, the rest fails without effect.
type noSpaceFS struct {
	*vfs.MemFS
	failAt, changes int
}

func (m *noSpaceFS) full(op, name string) error {
	m.changes++
	if m.changes == m.failAt {
		return &fs.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
	}
	return nil
}

func (m *noSpaceFS) OpenFile(name string, flag int) (vfs.File, error) {
	if flag&os.O_CREATE != 0 {
		if _, err := m.MemFS.Stat(name); errors.Is(err, fs.ErrNotExist) {
			if err := m.full("open", name); err != nil {
				return nil, err
			}
		}
	}
	f, err := m.MemFS.OpenFile(name, flag)
	if err != nil {
		return nil, err
	}
	return noSpaceFile{f, m}, nil
}

func (m *noSpaceFS) Open(name string) (vfs.File, error) { return m.OpenFile(name, os.O_RDONLY) }

func (m *noSpaceFS) SyncDir(dir string) error {
	if err := m.full("sync", dir); err != nil {
		return err
	}
	return m.MemFS.SyncDir(dir)
}

type noSpaceFile struct {
	vfs.File
	fs *noSpaceFS
}

func (f noSpaceFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.full("write", f.Name()); err != nil {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return f.File.WriteAt(p, off)
}

func (f noSpaceFile) Sync() error {
	if err := f.fs.full("sync", f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

// snapshotFiles returns every file of dir on m with its current contents.
func snapshotFiles(t *testing.T, m *vfs.MemFS, dir string) map[string]string {
	t.Helper()
	names, err := m.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, name := range names {
		f, err := m.Open(dir + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	return out
}

// TestAppend_NoSpaceDuringRollUndoesTheBatch appends a batch that fills the
// active segment and rolls to two new ones, with the disk filling up at
// each change the batch makes in turn (a write into the old segment, its
// seal fsync, the creation, header write and directory fsync of a new
// segment, a write into it, the last fsync). Every time: Append returns
// ErrNoSpace and the log is exactly as before the batch — the same files
// with the same bytes, a reader waiting at the end sees nothing of it, and
// a power cut right then restores the entries acknowledged before. Once
// space frees the same log takes the batch at the same offsets, without a
// restart, and a power cut after that keeps every entry.
func TestAppend_NoSpaceDuringRollUndoesTheBatch(t *testing.T) {
	const dir = "data/ingest/s"
	opts := Options{SegmentBytes: 2 << 10, MaxDiskBytes: 1 << 20}
	setup := func(t *testing.T, failAt int) (*noSpaceFS, *Log) {
		m := &noSpaceFS{MemFS: vfs.NewCrashableMem()}
		o := opts
		o.FS = m
		l := mustOpen(t, dir, o)
		mustAppend(t, l, 20, 20) // about half of the first segment
		m.changes, m.failAt = 0, failAt
		return m, l
	}
	batch := func(l *Log) []Entry {
		var b []Entry
		for off := l.LastOffset() + 1; off <= l.LastOffset()+60; off++ { // about two segments
			b = append(b, testEntry(off))
		}
		return b
	}

	// A dry run counts the changes the batch makes.
	m, l := setup(t, 0)
	if _, _, err := l.Append(batch(l)); err != nil {
		t.Fatal(err)
	}
	changes := m.changes
	if n := len(l.segs); n < 3 {
		t.Fatalf("the batch spans %d segments, want 3 (it must roll twice)", n)
	}
	l.Close()
	t.Logf("the batch makes %d changes", changes)

	for failAt := 1; failAt <= changes; failAt++ {
		m, l := setup(t, failAt)
		before := snapshotFiles(t, m.MemFS, dir)
		acked := l.LastOffset()
		r, err := l.Reader(acked + 1)
		if err != nil {
			t.Fatal(err)
		}
		b := batch(l)
		_, _, err = l.Append(b)
		if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("change %d failing: Append = %v, want ErrNoSpace", failAt, err)
		}
		if got := snapshotFiles(t, m.MemFS, dir); !maps.Equal(got, before) {
			t.Fatalf("change %d failing: files %v after the undo, want %v as before", failAt, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(before)))
		}
		if _, err := r.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("change %d failing: a reader at the end read %v, want io.EOF", failAt, err)
		}
		checkAfterCrash(t, m.MemFS, dir, opts, acked)

		first, last, err := l.Append(b)
		if err != nil {
			t.Fatalf("change %d failing: Append once space freed: %v", failAt, err)
		}
		if first != acked+1 || last != acked+uint64(len(b)) {
			t.Fatalf("change %d failing: retried batch at [%d, %d], want [%d, %d]", failAt, first, last, acked+1, acked+uint64(len(b)))
		}
		for want := first; want <= last; want++ {
			e, err := r.Next()
			if err != nil {
				t.Fatalf("change %d failing: reader after the retry: %v", failAt, err)
			}
			checkEntry(t, e, want)
		}
		r.Close()
		if n := readAll(t, l, 0); uint64(n) != last {
			t.Fatalf("change %d failing: %d entries, want %d", failAt, n, last)
		}
		checkAfterCrash(t, m.MemFS, dir, opts, last)
		l.Close()
	}
}

// checkAfterCrash cuts the power of m and checks that the log in dir then
// opens with exactly the entries 1…last.
func checkAfterCrash(t *testing.T, m *vfs.MemFS, dir string, opts Options, last uint64) {
	t.Helper()
	opts.FS = m.CrashClone(vfs.CrashOptions{})
	l := mustOpen(t, dir, opts)
	defer l.Close()
	if got := l.LastOffset(); got != last {
		t.Fatalf("after a power cut the log ends at %d, want %d", got, last)
	}
	readAll(t, l, 0)
}
