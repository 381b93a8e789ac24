package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
)

// ErrNotSavepoint is returned by RemoveSavepoint for a checkpoint that is
// not a savepoint: those are retention's to remove.
var ErrNotSavepoint = errors.New("checkpoint: not a savepoint")

// Savepoints returns the ids of the savepoints in the store, ascending. A
// manifest that does not parse is not counted; an I/O error reading one is
// returned.
func (s *Store) Savepoints() ([]uint64, error) {
	ids, err := s.ManifestIDs()
	if err != nil {
		return nil, err
	}
	var sps []uint64
	for _, id := range ids {
		m, err := s.ReadManifest(id)
		switch {
		case IsCorruption(err), errors.Is(err, fs.ErrNotExist): // removed meanwhile by retention
		case err != nil:
			return nil, err
		case m.Kind == KindSavepoint:
			sps = append(sps, id)
		}
	}
	return sps, nil
}

// RemoveSavepoint removes savepoint id: its manifest first (synced), then
// every file of it that no other manifest references, in the order and with
// the safety of Retain: savepoints are never a chain's base, so no
// checkpoint depends on it. It returns the files removed.
func (s *Store) RemoveSavepoint(id uint64) ([]string, error) {
	m, err := s.ReadManifest(id)
	if err != nil {
		return nil, err
	}
	if m.Kind != KindSavepoint {
		return nil, fmt.Errorf("%w: checkpoint %d is %s", ErrNotSavepoint, id, m.Kind)
	}
	if err := s.remove("manifests", []string{manifestName(id)}); err != nil {
		return nil, err
	}
	referenced, err := s.referencedFiles()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: remove savepoint %d: %w", id, err)
	}
	var files []string
	for _, f := range m.Files {
		if !referenced[f.Name] {
			files = append(files, f.Name)
		}
	}
	return files, s.remove("files", files)
}
