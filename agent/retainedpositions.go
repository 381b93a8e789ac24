package agent

import "github.com/eddy-edge/eddy/checkpoint"

// retainedPositions holds the ingest-log positions (source name → offset)
// of the retained checkpoints, for truncateIngest after every checkpoint:
// the oldest of them normally, the newest while a log is full. A
// manifest never changes once written, so each is read once, or taken from
// the checkpoint that just completed, rather than every retained manifest
// being opened, read and JSON-decoded again each time (at 1 s checkpoints a
// few of each per second). A savepoint's entry is nil: savepoints do not
// hold the log back. Used on the checkpointer's goroutine only.
type retainedPositions map[uint64]map[string]uint64

// note records the positions of a checkpoint that completed.
func (r retainedPositions) note(done checkpoint.Completed) {
	if done.Manifest == nil {
		return
	}
	if done.Kind == checkpoint.KindSavepoint || done.Manifest.Kind == checkpoint.KindSavepoint {
		r[done.ID] = nil
		return
	}
	r[done.ID] = done.Manifest.SourcePositions
}

// oldest returns each source's lowest position among ids (the manifests on
// disk), reading the manifests it has not seen, and forgets ids no longer
// on disk. A manifest that cannot be read is skipped and read again next
// time.
func (r retainedPositions) oldest(store *checkpoint.Store, ids []uint64) map[string]uint64 {
	onDisk := make(map[uint64]struct{}, len(ids))
	for _, id := range ids {
		onDisk[id] = struct{}{}
	}
	for id := range r {
		if _, ok := onDisk[id]; !ok {
			delete(r, id)
		}
	}
	oldest := map[string]uint64{}
	for _, id := range ids {
		positions, ok := r[id]
		if !ok {
			m, err := store.ReadManifest(id)
			if err != nil {
				continue
			}
			if m.Kind != checkpoint.KindSavepoint {
				positions = m.SourcePositions
			}
			r[id] = positions
		}
		for name, pos := range positions {
			if cur, ok := oldest[name]; !ok || pos < cur {
				oldest[name] = pos
			}
		}
	}
	return oldest
}

// newest returns source's position in the newest checkpoint (the highest
// id, savepoints left out) among those the last call of oldest kept, and
// that checkpoint's id; ok is false when none holds a position for it.
func (r retainedPositions) newest(source string) (pos, id uint64, ok bool) {
	for cid, positions := range r {
		if p, has := positions[source]; has && (!ok || cid > id) {
			pos, id, ok = p, cid, true
		}
	}
	return pos, id, ok
}
