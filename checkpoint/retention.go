package checkpoint

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"
)

// RetentionPlan is what retention removes: manifests first, then files.
type RetentionPlan struct {
	// Manifests to remove, by id, ascending.
	Manifests []uint64
	// Files to remove: referenced by a removed manifest and by no kept one.
	Files []string
}

// PlanRetention decides, without touching the disk, what to remove from a
// set of manifests: it keeps the newest retain checkpoints that are not
// savepoints, plus every savepoint, and removes the other manifests and every
// file they reference that no kept manifest references. retain < 1 keeps
// everything (a caller bug that must not delete data).
func PlanRetention(manifests []*Manifest, retain int) RetentionPlan {
	if retain < 1 {
		return RetentionPlan{}
	}
	ms := slices.Clone(manifests)
	slices.SortFunc(ms, func(a, b *Manifest) int { return cmp.Compare(b.ID, a.ID) })
	kept := make(map[string]bool)
	var drop []*Manifest
	n := 0
	for _, m := range ms {
		if m.Kind == KindSavepoint || n < retain {
			if m.Kind != KindSavepoint {
				n++
			}
			for _, f := range m.Files {
				kept[f.Name] = true
			}
			continue
		}
		drop = append(drop, m)
	}
	var plan RetentionPlan
	seen := make(map[string]bool)
	for _, m := range drop {
		plan.Manifests = append(plan.Manifests, m.ID)
		for _, f := range m.Files {
			if !kept[f.Name] && !seen[f.Name] {
				seen[f.Name] = true
				plan.Files = append(plan.Files, f.Name)
			}
		}
	}
	slices.Sort(plan.Manifests)
	slices.Sort(plan.Files)
	return plan
}

// Retain applies retention to the store (see PlanRetention) and returns what
// it removed. A manifest that does not parse (ErrCorrupt) is removed once it
// is older than every kept checkpoint; an I/O error reading one stops
// retention before anything is removed.
//
// The order is crash-safe: manifests are removed and their directory synced
// before any file is removed, so a crash never leaves a manifest that
// references a removed file; it may leave unreferenced files, which
// CollectGarbage removes. Retain removes only files of removed manifests, so
// it is safe while a checkpoint is in progress (its files are in no
// manifest yet). Nothing else needs a removal to be durable, so the
// directories are synced no more than that (two fsyncs fewer per
// checkpoint at one a second): a manifest removed with no files, brought
// back by a crash, is whole and older than the kept ones, and a later
// Retain's sync makes its removal durable before any file goes; a removed
// file brought back is unreferenced.
func (s *Store) Retain(retain int) (RetentionPlan, error) {
	if retain < 1 {
		return RetentionPlan{}, fmt.Errorf("checkpoint: retain %d must be at least 1", retain)
	}
	ids, err := s.ManifestIDs()
	if err != nil {
		return RetentionPlan{}, err
	}
	var ms []*Manifest
	var corrupt []uint64
	for _, id := range ids {
		m, err := s.retentionManifest(id)
		switch {
		case IsCorruption(err):
			corrupt = append(corrupt, id)
		case err != nil:
			return RetentionPlan{}, fmt.Errorf("checkpoint: retention: %w", err)
		default:
			ms = append(ms, m)
		}
	}
	plan := PlanRetention(ms, retain)
	oldestKept := uint64(0)
	for _, m := range ms {
		if !slices.Contains(plan.Manifests, m.ID) && (oldestKept == 0 || m.ID < oldestKept) {
			oldestKept = m.ID
		}
	}
	for _, id := range corrupt {
		if id < oldestKept {
			plan.Manifests = append(plan.Manifests, id)
		}
	}
	slices.Sort(plan.Manifests)
	names := make([]string, len(plan.Manifests))
	for i, id := range plan.Manifests {
		names[i] = manifestName(id)
	}
	err = s.removeNames("manifests", names, len(plan.Files) > 0)
	s.forgetExcept(slices.DeleteFunc(ids, func(id uint64) bool { _, removed := slices.BinarySearch(plan.Manifests, id); return removed }))
	if err != nil {
		return RetentionPlan{}, err
	}
	if err := s.removeNames("files", plan.Files, false); err != nil {
		return RetentionPlan{}, err
	}
	return plan, nil
}

// CollectGarbage removes every snapshot file that no readable manifest
// references: the files of aborted checkpoints, of a crash before the
// manifest, or left by an interrupted retention. It must not run while a
// checkpoint is in progress, whose files are in no manifest yet: call it at
// start before the first trigger, or when the coordinator has nothing in
// progress. Files of a corrupt manifest are removed too (it can never be
// restored); an I/O error reading a manifest stops it before anything is
// removed.
func (s *Store) CollectGarbage() ([]string, error) {
	referenced, err := s.referencedFiles()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: collect garbage: %w", err)
	}
	files, err := s.Files()
	if err != nil {
		return nil, err
	}
	var garbage []string
	for _, f := range files {
		if !referenced[f] {
			garbage = append(garbage, f)
		}
	}
	return garbage, s.remove("files", garbage)
}

// referencedFiles returns the names of the files the readable manifests
// reference. A corrupt manifest, or one removed meanwhile, is skipped; an
// I/O error reading one is returned.
func (s *Store) referencedFiles() (map[string]bool, error) {
	ids, err := s.ManifestIDs()
	if err != nil {
		return nil, err
	}
	referenced := make(map[string]bool)
	for _, id := range ids {
		m, err := s.ReadManifest(id)
		if IsCorruption(err) || errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, f := range m.Files {
			referenced[f.Name] = true
		}
	}
	return referenced, nil
}

// remove removes names (relative to the store) and syncs dir; names already
// gone are fine.
func (s *Store) remove(dir string, names []string) error { return s.removeNames(dir, names, true) }

// removeNames removes names (relative to the store), names already gone
// being fine, then, with sync, syncs dir.
func (s *Store) removeNames(dir string, names []string, sync bool) error {
	if len(names) == 0 {
		return nil
	}
	for _, n := range names {
		if err := s.fs.Remove(s.path(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checkpoint: remove %s: %w", n, err)
		}
	}
	if !sync {
		return nil
	}
	if err := s.fs.SyncDir(s.path(dir)); err != nil {
		return fmt.Errorf("checkpoint: sync %s dir: %w", dir, err)
	}
	return nil
}
