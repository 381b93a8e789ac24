package checkpoint

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Skipped is a checkpoint that restore passed over, and why.
type Skipped struct {
	ID uint64
	// Reason matches ErrCorrupt and names the file and the fault, e.g.
	// "files/ab12….snap: checksum mismatch".
	Reason error
}

// String returns "skipped 42: <reason>" without the package prefixes of
// the wrapped errors, e.g. "skipped 42: files/ab12….snap: snapshot block at
// offset 24: checksum mismatch".
func (sk Skipped) String() string {
	return fmt.Sprintf("skipped %d: %s", sk.ID, strings.ReplaceAll(sk.Reason.Error(), "checkpoint: ", ""))
}

// Selection is the checkpoint chosen for a restore.
type Selection struct {
	// Manifest is the chosen checkpoint; nil with ErrNoCheckpoint.
	Manifest *Manifest
	// Files is the chain to apply, in order (Manifest.Files); every one has
	// verified: size, SHA-256, header, block CRCs and trailer.
	Files []FileRef
	// Store holds the Files: the receiver, or the store of a --from PATH.
	Store *Store
	// Skipped lists newer checkpoints that did not verify, newest first.
	Skipped []Skipped
	// NewestID is the largest checkpoint id in the receiver's store or
	// selected: pass it to Coordinator.Restore so no id is reused.
	NewestID uint64
}

// SelectRestore chooses the checkpoint to restore. from is:
//
//   - "": the newest checkpoint in s whose files all verify;
//   - a decimal id: that checkpoint of s, which must verify;
//   - a path ending in ".json": that manifest, with its files in the store
//     two levels up (<root>/manifests/<id>.json), which must verify;
//   - another path: the newest checkpoint that verifies in the store there.
//
// A checkpoint that fails verification with a corruption (a garbage
// manifest, a missing, truncated or damaged file) is skipped, and the
// previous one tried, when from selects the newest; an explicitly chosen one
// gives the error instead. Files without a manifest (a half-written
// checkpoint) are never considered. An I/O error stops the selection: the
// device is failing, and an older checkpoint would not fare better. With no
// checkpoint to restore it returns ErrNoCheckpoint and the Selection lists
// what was skipped. Nothing is modified.
func (s *Store) SelectRestore(from string) (Selection, error) {
	local, err := s.ManifestIDs()
	if err != nil {
		return Selection{}, err
	}
	sel := Selection{Store: s}
	if len(local) > 0 {
		sel.NewestID = local[len(local)-1]
	}
	pick := func(m *Manifest, err error) (Selection, error) {
		if err == nil {
			err = sel.Store.verify(m)
		}
		if err != nil {
			return sel, fmt.Errorf("checkpoint: restore from %s: %w", from, err)
		}
		sel.Manifest, sel.Files = m, m.Files
		sel.NewestID = max(sel.NewestID, m.ID)
		return sel, nil
	}
	switch {
	case from == "":
		return sel, s.selectNewest(&sel, local)
	case isID(from):
		id, err := strconv.ParseUint(from, 10, 64)
		if err != nil {
			return sel, fmt.Errorf("checkpoint: restore from %s: %w", from, err)
		}
		return pick(s.ReadManifest(id))
	case strings.HasSuffix(from, ".json"):
		sel.Store = &Store{fs: s.fs, dir: filepath.Dir(filepath.Dir(from))}
		id, ok := parseManifestName(filepath.Base(from))
		if !ok {
			return sel, fmt.Errorf("checkpoint: restore from %s: not a manifest name (<20-digit id>.json)", from)
		}
		return pick(readManifest(s.fs, from, from, id))
	default:
		sel.Store = &Store{fs: s.fs, dir: from}
		ids, err := sel.Store.ManifestIDs()
		if err != nil {
			return sel, fmt.Errorf("checkpoint: restore from %s: %w", from, err)
		}
		if len(ids) > 0 {
			sel.NewestID = max(sel.NewestID, ids[len(ids)-1])
		}
		return sel, sel.Store.selectNewest(&sel, ids)
	}
}

func isID(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// selectNewest fills sel with the newest of ids (ascending) that verifies.
func (s *Store) selectNewest(sel *Selection, ids []uint64) error {
	for i := len(ids) - 1; i >= 0; i-- {
		m, err := s.ReadManifest(ids[i])
		if err == nil {
			err = s.verify(m)
		}
		if IsCorruption(err) {
			sel.Skipped = append(sel.Skipped, Skipped{ID: ids[i], Reason: err})
			continue
		}
		if err != nil {
			return fmt.Errorf("checkpoint: restore: checkpoint %d: %w", ids[i], err)
		}
		sel.Manifest, sel.Files = m, m.Files
		return nil
	}
	if len(sel.Skipped) > 0 {
		return fmt.Errorf("%w: all %d checkpoints are damaged (newest: %v)", ErrNoCheckpoint, len(sel.Skipped), sel.Skipped[0].Reason)
	}
	return fmt.Errorf("%w in %s", ErrNoCheckpoint, s.dir)
}

// verify checks every file of m (each once).
func (s *Store) verify(m *Manifest) error {
	done := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		if done[f.Name] {
			continue
		}
		done[f.Name] = true
		if err := s.VerifyFile(f); err != nil {
			return err
		}
	}
	return nil
}
