package checkpoint

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/eddy-edge/eddy/state/vfs"
)

// MergeChain writes, as one full snapshot file of checkpoint id, the state
// a task's chain amounts to: its base and increments merged entry by entry,
// the newest file winning on equal keys, tombstones dropped. So a new base
// is built from files already on disk (and already uploaded), without
// reading the live state or holding a barrier; only the new file is new.
//
// chain is in apply order (a KindFull file first, then KindIncremental ones)
// and every file is of one task and of a checkpoint ≤ id. The merge streams:
// it holds one block per file, whatever the state's size, which requires
// each file to be ordered by (bucket, key), as state's snapshots are; a
// file out of order, damaged (size, SHA-256, header, a block CRC, trailer)
// or missing fails the merge. On any failure, or when ctx ends, the
// partial file is removed and an error returned: the chain stays as it was.
func (s *Store) MergeChain(ctx context.Context, chain []FileRef, id uint64) (FileRef, error) {
	ref, _, err := s.mergeChain(ctx, chain, id, false)
	return ref, err
}

// MergeChainTable is MergeChain that also returns a Table of the merged
// file, its index collected as it was written (no second read), to start
// a Chain over from (Chain.Rebase). When the file is committed but no
// Table can be made it returns the file's FileRef with the error, as
// WriteSnapshotTable does.
func (s *Store) MergeChainTable(ctx context.Context, chain []FileRef, id uint64) (FileRef, *Table, error) {
	ref, out, err := s.mergeChain(ctx, chain, id, true)
	if err != nil {
		return ref, nil, err
	}
	t, err := out.Table()
	return ref, t, err
}

// mergeChain is MergeChain; index makes it collect the new file's index.
// The SnapshotFile returned is committed.
func (s *Store) mergeChain(ctx context.Context, chain []FileRef, id uint64, index bool) (FileRef, *SnapshotFile, error) {
	if len(chain) == 0 || chain[0].Kind != KindFull {
		return FileRef{}, nil, errors.New("checkpoint: merge: a chain starts with a full file")
	}
	task, pipeline := chain[0].Task, chain[0].Pipeline
	for _, f := range chain {
		if f.Task != task || f.Checkpoint > id {
			return FileRef{}, nil, fmt.Errorf("checkpoint: merge: file %s (task %s, checkpoint %d) does not belong in task %s's chain up to %d", f.Name, f.Task, f.Checkpoint, task, id)
		}
	}
	m := &merger{s: s}
	defer m.close()
	for i, f := range chain {
		if err := m.open(i, f); err != nil {
			return FileRef{}, nil, err
		}
	}
	out, err := s.CreateSnapshot(task, pipeline, KindFull, id)
	if err != nil {
		return FileRef{}, nil, err
	}
	if index {
		if err := out.CollectIndex(); err != nil {
			out.Abort()
			return FileRef{}, nil, err
		}
	}
	fail := func(err error) (FileRef, *SnapshotFile, error) {
		out.Abort()
		return FileRef{}, nil, fmt.Errorf("checkpoint: merge task %s's chain into checkpoint %d: %w", task, id, err)
	}
	for n := 0; m.Len() > 0; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return fail(ctx.Err())
		}
		// The newest file holding the smallest key wins; the others skip it.
		top := m.heads[0]
		winner := top
		for m.Len() > 0 && sameKey(m.heads[0], top) {
			h := heap.Pop(m).(*mergeHead)
			if h.index > winner.index {
				winner = h
			}
			m.popped = append(m.popped, h)
		}
		if !winner.e.Deleted {
			if err := out.Add(winner.e.Bucket, winner.e.Key, winner.e.Value, false); err != nil {
				return fail(err)
			}
		}
		for _, h := range m.popped {
			if err := m.advance(h); err != nil {
				return fail(err)
			}
		}
		m.popped = m.popped[:0]
	}
	ref, err := out.Commit()
	if err != nil {
		return FileRef{}, nil, fmt.Errorf("checkpoint: merge task %s's chain: %w", task, err)
	}
	return ref, out, nil
}

// mergeHead is one input file of a merge and its current entry, which
// aliases the file's reader and stays valid until that reader advances.
type mergeHead struct {
	index  int // in the chain: a larger index is newer
	ref    FileRef
	f      vfs.File
	r      *Reader
	e      Entry
	bucket []byte // the previous entry's bucket and key, to check the order
	key    []byte
	read   bool // an entry was read
}

// merger is a min-heap of the files' current entries by (bucket, key),
// older files first on equal keys.
type merger struct {
	s      *Store
	heads  []*mergeHead
	all    []*mergeHead
	popped []*mergeHead
}

func (m *merger) Len() int { return len(m.heads) }
func (m *merger) Less(i, j int) bool {
	a, b := m.heads[i], m.heads[j]
	if c := compareEntry(a.e, b.e); c != 0 {
		return c < 0
	}
	return a.index < b.index
}
func (m *merger) Swap(i, j int) { m.heads[i], m.heads[j] = m.heads[j], m.heads[i] }
func (m *merger) Push(x any)    { m.heads = append(m.heads, x.(*mergeHead)) }
func (m *merger) Pop() any {
	h := m.heads[len(m.heads)-1]
	m.heads = m.heads[:len(m.heads)-1]
	return h
}

func compareEntry(a, b Entry) int {
	if c := bytes.Compare(a.Bucket, b.Bucket); c != 0 {
		return c
	}
	return bytes.Compare(a.Key, b.Key)
}

func sameKey(a, b *mergeHead) bool { return compareEntry(a.e, b.e) == 0 }

// open opens file ref of the chain and reads its first entry.
func (m *merger) open(index int, ref FileRef) error {
	if size, err := m.s.size(ref.Name); errors.Is(err, fs.ErrNotExist) {
		return corruptf("checkpoint: merge: %s: missing", ref.Name)
	} else if err != nil {
		return fmt.Errorf("checkpoint: merge: stat %s: %w", ref.Name, err)
	} else if size != ref.Size {
		return corruptf("checkpoint: merge: %s: size %d, manifest says %d", ref.Name, size, ref.Size)
	}
	f, err := m.s.fs.Open(m.s.path(ref.Name))
	if err != nil {
		return fmt.Errorf("checkpoint: merge: open %s: %w", ref.Name, err)
	}
	h := &mergeHead{index: index, ref: ref, f: f}
	m.all = append(m.all, h)
	if h.r, err = NewReader(f); err != nil {
		return fmt.Errorf("checkpoint: merge: %s: %w", ref.Name, err)
	}
	if hd := h.r.Header(); hd.Kind != ref.Kind || hd.CheckpointID != ref.Checkpoint {
		return corruptf("checkpoint: merge: %s: header says %v checkpoint %d, manifest %v checkpoint %d", ref.Name, hd.Kind, hd.CheckpointID, ref.Kind, ref.Checkpoint)
	}
	return m.advance(h)
}

// advance moves h to its next entry and back onto the heap, or, at the end
// of its file, checks the file's size and SHA-256 against its FileRef.
func (m *merger) advance(h *mergeHead) error {
	if h.read {
		h.bucket = append(h.bucket[:0], h.e.Bucket...)
		h.key = append(h.key[:0], h.e.Key...)
	}
	e, err := h.r.Next()
	if err == io.EOF {
		sum, size := h.r.FileSHA256(nil)
		if size != h.ref.Size || hex.EncodeToString(sum) != h.ref.SHA256 {
			return corruptf("checkpoint: merge: %s: checksum mismatch", h.ref.Name)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoint: merge: %s: %w", h.ref.Name, err)
	}
	if h.read && compareEntry(Entry{Bucket: h.bucket, Key: h.key}, e) >= 0 {
		return fmt.Errorf("checkpoint: merge: %s: entry %d is not after the one before it in (bucket, key) order", h.ref.Name, h.r.Count())
	}
	h.e, h.read = e, true
	heap.Push(m, h)
	return nil
}

func (m *merger) close() {
	for _, h := range m.all {
		h.f.Close()
	}
}

// Discard removes a merged file that no manifest references yet, for a
// merge whose result is not used (another task's merge failed, or the
// agent stops). Its name being gone is made durable.
func (s *Store) Discard(ref FileRef) error { return s.remove("files", []string{ref.Name}) }
