package stages

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/state"
)

// coldBackend is a subtask's state backend reading misses from the
// checkpoint files it was written to (state.BoltOptions.ColdReads): the
// subtask attaches each snapshot file it wrote, and each base merged from
// them, under it.
type coldBackend interface {
	state.Backend
	ColdReads() bool
	Cold() state.Cold
	Snapshots() uint64
	AttachCold(c state.Cold, seq uint64) error
	RestoreCold(c state.Cold, opts state.RestoreOptions) error
}

// coldOf returns st's backend as a coldBackend, or nil if it reads no
// checkpoint files.
func coldOf(st *subtask) coldBackend {
	if cb, ok := st.backend.(coldBackend); ok && cb.ColdReads() {
		return cb
	}
	return nil
}

// coldFile is a checkpoint file for a subtask's backend: the snapshot
// taken as the backend's Snapshot number seq (full or an increment on
// checkpoint parent), or, with seq 0, a base merged from its files.
type coldFile struct {
	t      *checkpoint.Table
	seq    uint64
	full   bool
	parent uint64
}

// coldFiles hands the files to the subtask's goroutine, which owns the
// backend: the checkpoint driver writes and merges them in goroutines of
// its own. Tables handed in after close are released.
type coldFiles struct {
	mu      sync.Mutex
	pending []coldFile
	closed  bool
	n       atomic.Int32 // len(pending), read without the lock per message
}

func (b *coldFiles) put(f coldFile) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		f.t.Release()
		return
	}
	b.pending = append(b.pending, f)
	b.n.Store(int32(len(b.pending)))
}

func (b *coldFiles) take() []coldFile {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.pending
	b.pending = nil
	b.n.Store(0)
	return out
}

func (b *coldFiles) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, f := range b.pending {
		f.t.Release()
	}
	b.pending = nil
	b.n.Store(0)
}

// coldFilesOf returns st's mailbox, made on first use with the checkpoint
// driver told where the bases merged from st's files go.
func (p *Pipeline) coldFilesOf(st *subtask) *coldFiles {
	if st.cold == nil {
		st.cold = &coldFiles{}
		box := st.cold
		p.ckpt.OnMerged(st.taskID(p.name), func(t *checkpoint.Table) { box.put(coldFile{t: t}) })
	}
	return st.cold
}

// drainCold attaches the files handed to st, if any; a failure fails the
// subtask.
func (p *Pipeline) drainCold(st *subtask) {
	if st.cold == nil || st.cold.n.Load() == 0 || st.failed {
		return
	}
	if err := p.attachCold(st); err != nil {
		st.failed = true
		p.fatal(fmt.Errorf("pipeline %q subtask %d: %w", p.name, st.index, err))
	}
}

// attachCold attaches the files handed to st since the last call under
// its backend, in order. A file that no longer continues what is attached
// (an increment on another parent, a snapshot older than one attached, a
// base merged from files since replaced) is released unused: the backend
// then keeps its entries until a later file covers them.
func (p *Pipeline) attachCold(st *subtask) error {
	cb := coldOf(st)
	for _, f := range st.cold.take() {
		cur, _ := cb.Cold().(*checkpoint.Chain)
		var next *checkpoint.Chain
		seq := f.seq
		switch {
		case f.seq == 0: // a merged base
			if cur == nil || !rebases(cur, f.t) {
				f.t.Release()
				continue
			}
			next, seq = cur.Rebase(f.t), st.coldSeq
		case f.seq <= st.coldSeq:
			f.t.Release()
			continue
		case f.full:
			next = checkpoint.NewChain(f.t)
		case cur == nil || cur.Tables()[0].Header().CheckpointID != f.parent:
			f.t.Release()
			continue
		default:
			next = cur.With(f.t)
		}
		if err := cb.AttachCold(next, seq); err != nil {
			return fmt.Errorf("attach checkpoint file: %w", err)
		}
		st.coldSeq = seq
	}
	return nil
}

// rebases reports whether base, merged from a prefix of a chain of st's
// files, replaces files of cur: it is at least as new as cur's oldest.
func rebases(cur *checkpoint.Chain, base *checkpoint.Table) bool {
	ts := cur.Tables()
	return len(ts) > 1 && base.Header().CheckpointID >= ts[len(ts)-1].Header().CheckpointID &&
		base.Header().CheckpointID < ts[0].Header().CheckpointID+1
}

// restoreCold restores p's subtasks from files without copying them into
// the working files: each backend reads them, its own key groups only,
// under an empty working file. ok is false, with nothing done, when a
// backend does not read checkpoint files, a file cannot be read that way,
// or one holds another window layout's state: the caller restores by
// copying then, which handles the latter.
func (p *Pipeline) restoreCold(store *checkpoint.Store, files []checkpoint.FileRef) (ok bool, err error) {
	var subs []*subtask
	for _, st := range p.subtasks {
		if st.backend == nil {
			continue
		}
		if coldOf(st) == nil {
			return false, nil
		}
		subs = append(subs, st)
	}
	if len(subs) == 0 {
		return false, nil
	}
	// Newest first: later files win, as when they are applied in order.
	tables := make([]*checkpoint.Table, len(files))
	defer func() {
		for _, t := range tables {
			if t != nil {
				t.Release()
			}
		}
	}()
	for i, f := range files {
		t, err := store.OpenTable(f)
		if err != nil {
			p.log.Warn("a checkpoint file cannot be read in place: restoring by copying it into the working files", "pipeline", p.name, "file", f.Name, "err", err)
			return false, nil
		}
		tables[len(files)-1-i] = t
		for _, b := range t.Buckets() {
			if _, other := otherWindowState([]byte(b), p.windowState); other {
				return false, nil
			}
		}
	}
	for _, st := range subs {
		kgs, ok := state.SubtaskKeyGroups(st.index, len(p.subtasks), p.maxKeyGroups)
		if !ok {
			return true, fmt.Errorf("agent: pipeline %q: more subtasks than key groups", p.name)
		}
		for _, t := range tables {
			t.Retain()
		}
		cb := coldOf(st)
		if err := cb.RestoreCold(checkpoint.NewChain(tables...), state.RestoreOptions{KeyGroups: &kgs}); err != nil {
			return true, fmt.Errorf("agent: restore pipeline %q subtask %d: %w", p.name, st.index, err)
		}
		st.coldSeq = cb.Snapshots()
	}
	return true, nil
}
