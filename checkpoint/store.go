package checkpoint

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/eddy-edge/eddy/state/vfs"
)

// Store keeps checkpoints in a directory:
//
//	<dir>/files/<sha256>.snap          snapshot files, named by the SHA-256 of
//	                                   their content, so a file shared by
//	                                   several checkpoints is stored once
//	<dir>/manifests/<id>.json          one manifest per completed checkpoint,
//	                                   id zero-padded to 20 digits
//	<dir>/{files,manifests}/*.tmp      files being written; never referenced,
//	                                   removed by OpenStore
//
// A snapshot file is written to a temp file, fsynced, renamed to its content
// address, and the directory fsynced; a manifest likewise (temp, fsync,
// rename, fsync dir). So after a crash a name is either absent or complete,
// and a manifest, once visible, references only durable files.
//
// Methods are safe for concurrent use by several tasks writing snapshots; the
// agent must not run retention or CollectGarbage concurrently with a
// checkpoint in progress (see their docs).
type Store struct {
	fs  vfs.FS
	dir string
	seq atomic.Uint64 // names temp files uniquely

	// kept holds, by id, the manifests retention has seen or this Store
	// wrote: a manifest never changes once written, and retention at every
	// checkpoint would otherwise read and parse each kept one again.
	keptMu sync.Mutex
	kept   map[uint64]*Manifest
}

// OpenStore opens (creating it if needed, durably: vfs.MkdirAllSynced) the
// store in dir on fsys (nil: vfs.Default), and removes the temp files a
// crash may have left.
func OpenStore(fsys vfs.FS, dir string) (*Store, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	s := &Store{fs: fsys, dir: dir}
	for _, sub := range []string{"files", "manifests"} {
		d := filepath.Join(dir, sub)
		if err := vfs.MkdirAllSynced(fsys, d, 0o755); err != nil {
			return nil, fmt.Errorf("checkpoint: create %s: %w", d, err)
		}
		names, err := fsys.List(d)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: list %s: %w", d, err)
		}
		removed := false
		for _, n := range names {
			if strings.HasSuffix(n, ".tmp") {
				if err := fsys.Remove(filepath.Join(d, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("checkpoint: remove temp file %s: %w", n, err)
				}
				removed = true
			}
		}
		if removed {
			if err := fsys.SyncDir(d); err != nil {
				return nil, fmt.Errorf("checkpoint: sync %s: %w", d, err)
			}
		}
	}
	return s, nil
}

// ReadStore opens the store in dir on fsys (nil: vfs.Default) for reading
// only: unlike OpenStore it creates nothing and removes no temp file, so a
// reader that must leave data_dir as it found it (eddy validate) can
// select and verify a checkpoint (SelectRestore). Its writing methods must
// not be called.
func ReadStore(fsys vfs.FS, dir string) *Store {
	if fsys == nil {
		fsys = vfs.Default
	}
	return &Store{fs: fsys, dir: dir}
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(name string) string { return filepath.Join(s.dir, filepath.FromSlash(name)) }

// size returns the size of the store's file name (slash-separated,
// relative); fs.ErrNotExist if it is missing.
func (s *Store) size(name string) (int64, error) {
	fi, err := s.fs.Stat(s.path(name))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// SnapshotFile is a snapshot being written into the Store. Add entries, then
// Commit (or Abort). It is not safe for concurrent use; several may be
// written at once.
type SnapshotFile struct {
	s    *Store
	tmp  string
	f    vfs.File
	w    *Writer
	ref  FileRef
	done bool
	// committed: Commit succeeded and ref is the file's.
	committed bool
}

// CreateSnapshot starts a snapshot file of the given kind (KindFull or
// KindIncremental) for checkpoint id, written by task and holding state of
// pipeline (may be empty).
func (s *Store) CreateSnapshot(task, pipeline string, kind Kind, id uint64) (*SnapshotFile, error) {
	if kind != KindFull && kind != KindIncremental {
		return nil, fmt.Errorf("checkpoint: snapshot kind must be full or incremental, not %v", kind)
	}
	tmp := fmt.Sprintf("files/%020d-%d.snap.tmp", id, s.seq.Add(1))
	f, err := s.fs.Create(s.path(tmp))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: create snapshot %s: %w", tmp, err)
	}
	sf := &SnapshotFile{s: s, tmp: tmp, f: f, ref: FileRef{Kind: kind, Checkpoint: id, Task: task, Pipeline: pipeline}}
	sf.w = NewWriter(f, kind, id)
	return sf, nil
}

// Add adds an entry (see Writer.Add); its signature fits state's snapshot
// iterators.
func (sf *SnapshotFile) Add(bucket, key, value []byte, deleted bool) error {
	return sf.w.Add(bucket, key, value, deleted)
}

// Commit finishes the file and makes it durable under its content address:
// trailer, fsync, close, rename, fsync of the directory. It returns the
// FileRef to put in the task's Ack. On error the temp file is removed.
func (sf *SnapshotFile) Commit() (FileRef, error) {
	if sf.done {
		return FileRef{}, errors.New("checkpoint: snapshot already committed or aborted")
	}
	sf.done = true
	fail := func(step string, err error) (FileRef, error) {
		sf.f.Close()
		sf.s.fs.Remove(sf.s.path(sf.tmp))
		return FileRef{}, fmt.Errorf("checkpoint: snapshot of task %s, checkpoint %d: %s: %w", sf.ref.Task, sf.ref.Checkpoint, step, err)
	}
	if err := sf.w.Close(); err != nil {
		return fail("write", err)
	}
	if err := sf.f.Sync(); err != nil {
		return fail("fsync", err)
	}
	if err := sf.f.Close(); err != nil {
		return fail("close", err)
	}
	sum := sf.w.FileSHA256(nil)
	ref := sf.ref
	ref.Name, ref.Size, ref.SHA256 = fileName(sum), sf.w.Size(), hex.EncodeToString(sum)
	if err := sf.s.fs.Rename(sf.s.path(sf.tmp), sf.s.path(ref.Name)); err != nil {
		return fail("rename", err)
	}
	if err := sf.s.fs.SyncDir(sf.s.path("files")); err != nil {
		// The file is complete under its address; only its name may not be
		// durable yet. Fail the checkpoint; CollectGarbage removes it.
		return FileRef{}, fmt.Errorf("checkpoint: snapshot of task %s, checkpoint %d: sync files dir: %w", sf.ref.Task, sf.ref.Checkpoint, err)
	}
	sf.ref, sf.committed = ref, true
	return ref, nil
}

// Abort discards the snapshot. It is a no-op after Commit.
func (sf *SnapshotFile) Abort() error {
	if sf.done {
		return nil
	}
	sf.done = true
	sf.f.Close()
	if err := sf.s.fs.Remove(sf.s.path(sf.tmp)); err != nil {
		return fmt.Errorf("checkpoint: remove %s: %w", sf.tmp, err)
	}
	return nil
}

// WriteSnapshot writes a whole snapshot from an iterator of the shape
// state produces, and commits it. entries must call fn for each entry and
// return fn's first error.
func (s *Store) WriteSnapshot(task, pipeline string, kind Kind, id uint64, entries func(fn func(bucket, key, value []byte, deleted bool) error) error) (FileRef, error) {
	sf, err := s.CreateSnapshot(task, pipeline, kind, id)
	if err != nil {
		return FileRef{}, err
	}
	if err := entries(sf.Add); err != nil {
		sf.Abort()
		return FileRef{}, fmt.Errorf("checkpoint: snapshot of task %s, checkpoint %d: %w", task, id, err)
	}
	return sf.Commit()
}

// WriteManifest writes m durably and atomically: temp file, fsync, close,
// rename, fsync of the directory. When it returns nil the checkpoint is
// complete. It refuses an invalid manifest (m.Time must be set) and one whose
// id already has a manifest.
func (s *Store) WriteManifest(m *Manifest) error {
	b, err := MarshalManifest(m)
	if err != nil {
		return err
	}
	name := manifestName(m.ID)
	if _, err := s.size(name); err == nil {
		return fmt.Errorf("checkpoint: manifest %d already exists", m.ID)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint: manifest %d: %w", m.ID, err)
	}
	tmp := name + ".tmp"
	f, err := s.fs.Create(s.path(tmp))
	if err != nil {
		return fmt.Errorf("checkpoint: manifest %d: create: %w", m.ID, err)
	}
	fail := func(step string, err error) error {
		f.Close()
		s.fs.Remove(s.path(tmp))
		return fmt.Errorf("checkpoint: manifest %d: %s: %w", m.ID, step, err)
	}
	if _, err := f.Write(b); err != nil {
		return fail("write", err)
	}
	if err := f.Sync(); err != nil {
		return fail("fsync", err)
	}
	if err := f.Close(); err != nil {
		return fail("close", err)
	}
	if err := s.fs.Rename(s.path(tmp), s.path(name)); err != nil {
		return fail("rename", err)
	}
	if err := s.fs.SyncDir(s.path("manifests")); err != nil {
		return fmt.Errorf("checkpoint: manifest %d: sync manifests dir: %w", m.ID, err)
	}
	s.keep(&Manifest{ID: m.ID, Kind: m.Kind, Files: slices.Clone(m.Files)})
	return nil
}

// keep remembers what retention needs of a manifest on disk.
func (s *Store) keep(m *Manifest) {
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	if s.kept == nil {
		s.kept = make(map[uint64]*Manifest)
	}
	s.kept[m.ID] = m
}

// retentionManifest returns manifest id as retention sees it: from kept,
// or read from disk.
func (s *Store) retentionManifest(id uint64) (*Manifest, error) {
	s.keptMu.Lock()
	m := s.kept[id]
	s.keptMu.Unlock()
	if m != nil {
		return m, nil
	}
	m, err := s.ReadManifest(id)
	if err == nil {
		s.keep(&Manifest{ID: m.ID, Kind: m.Kind, Files: m.Files})
	}
	return m, err
}

// forgetExcept drops from kept every manifest whose id is not in ids
// (removed by retention or by hand).
func (s *Store) forgetExcept(ids []uint64) {
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	for id := range s.kept {
		if _, found := slices.BinarySearch(ids, id); !found {
			delete(s.kept, id)
		}
	}
}

// ManifestIDs returns the ids of the manifests in the store, ascending.
func (s *Store) ManifestIDs() ([]uint64, error) {
	names, err := s.fs.List(s.path("manifests"))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list manifests: %w", err)
	}
	var ids []uint64
	for _, n := range names {
		if id, ok := parseManifestName(n); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// ReadManifest reads and validates manifest id. A manifest that does not
// parse, or whose id differs from its name, gives an error matching
// ErrCorrupt.
func (s *Store) ReadManifest(id uint64) (*Manifest, error) {
	return readManifest(s.fs, s.path(manifestName(id)), manifestName(id), id)
}

// readManifest reads the manifest of checkpoint id at path; errors name it
// display.
func readManifest(fsys vfs.FS, path, display string, id uint64) (*Manifest, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", display, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", display, err)
	}
	m, err := UnmarshalManifest(b)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", display, err)
	}
	if m.ID != id {
		return nil, corruptf("checkpoint: %s holds checkpoint %d", display, m.ID)
	}
	return m, nil
}

// Files returns the names ("files/<sha256>.snap") of the snapshot files in
// the store, sorted; temp files are not listed.
func (s *Store) Files() ([]string, error) {
	names, err := s.fs.List(s.path("files"))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list files: %w", err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".snap") {
			out = append(out, "files/"+n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ReadSnapshot streams the entries of a snapshot file to fn in file order
// (see Reader.ForEach) and checks, at the end, its size and SHA-256 against
// ref and its header against ref's kind and checkpoint. An error from fn is
// returned as is; damage gives an error matching ErrCorrupt, and a missing
// file too. Entries before a damaged block have been passed to fn: verify
// first (VerifyFile) if that matters.
func (s *Store) ReadSnapshot(ref FileRef, fn func(bucket, key, value []byte, deleted bool) error) error {
	f, err := s.openRef(ref)
	if err != nil {
		return err
	}
	defer f.Close()
	sr, err := NewReader(f)
	if err != nil {
		return fmt.Errorf("checkpoint: %s: %w", ref.Name, err)
	}
	if err := checkHeader(ref, sr.Header()); err != nil {
		return err
	}
	if err := sr.ForEach(fn); err != nil {
		if IsCorruption(err) {
			return fmt.Errorf("checkpoint: %s: %w", ref.Name, err)
		}
		return err
	}
	return checkSum(ref, sr)
}

// openRef opens the store's file ref after checking its size; the size
// check first gives a truncated file a plain reason. A missing file or
// one of the wrong size gives an error matching ErrCorrupt.
func (s *Store) openRef(ref FileRef) (vfs.File, error) {
	if size, err := s.size(ref.Name); errors.Is(err, fs.ErrNotExist) {
		return nil, corruptf("checkpoint: %s: missing", ref.Name)
	} else if err != nil {
		return nil, fmt.Errorf("checkpoint: stat %s: %w", ref.Name, err)
	} else if size < ref.Size {
		return nil, corruptf("checkpoint: %s: truncated: size %d, manifest says %d", ref.Name, size, ref.Size)
	} else if size != ref.Size {
		return nil, corruptf("checkpoint: %s: size %d, manifest says %d", ref.Name, size, ref.Size)
	}
	f, err := s.fs.Open(s.path(ref.Name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, corruptf("checkpoint: %s: missing", ref.Name)
		}
		return nil, fmt.Errorf("checkpoint: open %s: %w", ref.Name, err)
	}
	return f, nil
}

// checkHeader checks a file's header against its ref's kind and checkpoint.
func checkHeader(ref FileRef, h Header) error {
	if h.Kind != ref.Kind || h.CheckpointID != ref.Checkpoint {
		return corruptf("checkpoint: %s: header says %v checkpoint %d, manifest %v checkpoint %d", ref.Name, h.Kind, h.CheckpointID, ref.Kind, ref.Checkpoint)
	}
	return nil
}

// checkSum checks the size and SHA-256 of a file sr has read to the end
// against its ref.
func checkSum(ref FileRef, sr *Reader) error {
	sum, size := sr.FileSHA256(nil)
	if size != ref.Size {
		return corruptf("checkpoint: %s: size %d, manifest says %d", ref.Name, size, ref.Size)
	}
	if got := hex.EncodeToString(sum); got != ref.SHA256 {
		return corruptf("checkpoint: %s: checksum mismatch (SHA-256 %s…)", ref.Name, got[:12])
	}
	return nil
}

// VerifyFile reads a whole snapshot file and checks it against ref: size,
// SHA-256, header, every block CRC and the trailer.
func (s *Store) VerifyFile(ref FileRef) error {
	return s.ReadSnapshot(ref, func([]byte, []byte, []byte, bool) error { return nil })
}
